package databases

import (
	"context"
	"fmt"
	"time"

	"github.com/pandastack/pandastack"
)

// CreateParams is a database as a user asks for it.
type CreateParams struct {
	Name string
	// AutoHibernateSeconds, when above 0, is scale to zero: with no
	// client connection for that long the machine hibernates, and the
	// next connection wakes it (nil or 0: never).
	AutoHibernateSeconds *int64
	// SizeMiB is the database's volume, where its data lives (0:
	// DefaultSizeMiB); it counts against the team's disk quota.
	SizeMiB int
}

// Create makes database p.Name for teamID and answers once a query with
// its credentials went through the router. A taken name is EConflict; the
// router off is EUnavailable. Its data lives on a volume of its own:
// a copy of the base's (base.go) when the host has one, else a new one
// the template's cluster is copied onto. Whatever fails on the way is
// removed: no record, volume, machine or route is left.
func (s *Service) Create(ctx context.Context, teamID string, p CreateParams) (Info, error) {
	name := p.Name
	if err := checkName(name); err != nil {
		return Info{}, err
	}
	size, err := checkSize(p.SizeMiB)
	if err != nil {
		return Info{}, err
	}
	if addr, _ := s.router(); addr == "" {
		return Info{}, pandastack.Errorf(pandastack.EUnavailable, "databases are off on this server: start it with --db-listen")
	}
	d, password, err := s.newRecord(ctx, teamID, name, name+"_owner", name)
	if err != nil {
		return Info{}, err
	}
	log := s.log.With("database", d.ID, "team", teamID)
	ok := false
	defer func() {
		if !ok {
			s.discard(ctx, d)
		}
	}()
	t0 := time.Now()
	// From the base when this host has one (base.go), else the slow way,
	// which saves the base for the next create.
	tpl, terr := s.template(ctx)
	from := "base"
	var sb pandastack.Sandbox
	restored := false
	if terr == nil {
		if sb, restored, err = s.fromBase(ctx, &d, tpl, size, p.AutoHibernateSeconds); err != nil {
			return Info{}, fmt.Errorf("create database %s: %w", name, err)
		}
	}
	tMachine := time.Since(t0)
	var tVolume, tStart, tPrepare time.Duration
	if !restored {
		from = "cold"
		tc := time.Now()
		if err := s.makeVolume(ctx, &d, size); err != nil {
			return Info{}, fmt.Errorf("create database %s: %w", name, err)
		}
		tVolume = time.Since(tc)
		if sb, err = s.machineFor(ctx, d, p.AutoHibernateSeconds); err != nil {
			return Info{}, fmt.Errorf("create database %s: %w", name, err)
		}
		d.MachineID = sb.ID
		if err := s.cfg.Store.UpdateDatabase(ctx, d.ID, d.State, d.MachineID); err != nil {
			return Info{}, err
		}
		tMachine = time.Since(tc) - tVolume
		t1 := time.Now()
		if err := s.startOnVolume(ctx, d, size); err != nil {
			return Info{}, fmt.Errorf("create database %s: %w", name, err)
		}
		tStart = time.Since(t1)
		t1 = time.Now()
		if err := s.prepare(ctx, d); err != nil {
			return Info{}, fmt.Errorf("create database %s: %w", name, err)
		}
		tPrepare = time.Since(t1)
		if terr == nil && sb.TemplateID == tpl.ID {
			s.saveBase(ctx, d, tpl.ID, size)
		}
	}
	t1 := time.Now()
	if err := s.claim(ctx, d, password); err != nil {
		return Info{}, fmt.Errorf("create database %s: %w", name, err)
	}
	tSetup := time.Since(t1)
	t2 := time.Now()
	if err := s.goLive(ctx, &d, password); err != nil {
		return Info{}, fmt.Errorf("create database %s: %w", name, err)
	}
	ok = true
	log.Info("database created", "machine", d.MachineID, "from", from, "volume_ms", tVolume.Milliseconds(), "machine_ms", tMachine.Milliseconds(),
		"start_ms", tStart.Milliseconds(), "prepare_ms", tPrepare.Milliseconds(), "setup_ms", tSetup.Milliseconds(),
		"probe_ms", time.Since(t2).Milliseconds(), "total_ms", time.Since(t0).Milliseconds())
	in := s.info(d, StateRunning, password)
	in.AutoHibernateSeconds = sb.AutoHibernateSeconds
	return in, nil
}
