package databases

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/sandboxes"
)

// A database outlives its machine: when the VM dies (killed, crashed, or
// lost while the server was down) the data stays on the database's
// volume, and the next connection (or the server's start) restarts the
// database on a new machine from that volume. PostgreSQL then recovers
// the cluster from its WAL: every transaction it acknowledged is there.

// backend is a route's backend for port in database id's machine: it
// follows the database's current machine and restarts a dead one.
type backend struct {
	s    *Service
	id   string
	port int
}

// Dial connects to the port in the database's machine (waking it when it
// sleeps), restarting the database first when its machine is gone.
func (b backend) Dial(ctx context.Context) (net.Conn, error) {
	t0 := time.Now()
	d, err := b.s.cfg.Store.GetDatabase(ctx, b.id)
	if err != nil {
		return nil, err
	}
	c, err := b.s.cfg.Ports.Port(d.MachineID, b.port).Dial(ctx)
	b.s.log.Debug("database dialled", "database", b.id, "port", b.port, "us", time.Since(t0).Microseconds(), "err", err)
	if err == nil || !b.s.gone(ctx, d.MachineID, err) {
		return c, err
	}
	if d, err = b.s.revive(ctx, d); err != nil {
		return nil, err
	}
	return b.s.cfg.Ports.Port(d.MachineID, b.port).Dial(ctx)
}

// gone reports whether machine id ended, dialErr being what reaching it
// answered. A VM that just died first shows as a guest session shut
// down, a moment before the host notices the exit and its end is
// recorded: unless the port merely refused, wait a little for that
// record.
func (s *Service) gone(ctx context.Context, id string, dialErr error) bool {
	if pandastack.ErrorCode(dialErr) == pandastack.ERefused || errors.Is(dialErr, context.Canceled) || errors.Is(dialErr, context.DeadlineExceeded) {
		return false
	}
	for deadline := time.Now().Add(15 * time.Second); ; {
		sb, err := s.cfg.Store.GetSandbox(ctx, id)
		if pandastack.ErrorCode(err) == pandastack.ENotFound || (err == nil && !sb.State.Live()) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// revive restarts database d on a new machine from its volume, unless
// another caller did already; it returns the record with the machine.
func (s *Service) revive(ctx context.Context, d pandastack.Database) (pandastack.Database, error) {
	mu := s.reviveLock(d.ID)
	mu.Lock()
	defer mu.Unlock()
	d, err := s.cfg.Store.GetDatabase(ctx, d.ID)
	if err != nil {
		return d, err
	}
	old, err := s.cfg.Store.GetSandbox(ctx, d.MachineID)
	if err == nil && old.State.Live() {
		return d, nil // restarted while we waited
	}
	if d.State != pandastack.DatabaseReady {
		return d, pandastack.Errorf(pandastack.EConflict, "database %s is still being created", d.ID)
	}
	if d.VolumeID == "" {
		return d, pandastack.Errorf(pandastack.EUnavailable, "database %s: its machine is gone and it has no volume to restart from", d.ID)
	}
	password, err := s.password(d)
	if err != nil {
		return d, err
	}
	log := s.log.With("database", d.ID, "team", d.TeamID, "old_machine", d.MachineID)
	log.Warn("database machine is gone; restarting it from its volume", "old_state", old.State)
	// A restart must not outlast the caller that noticed: one that went
	// away would leave a half set-up machine.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	var auto *int64
	if old.AutoHibernateSeconds > 0 {
		a := int64(old.AutoHibernateSeconds)
		auto = &a
	}
	sb, err := s.machineFor(ctx, d, auto)
	if err != nil {
		return d, fmt.Errorf("restart database %s: %w", d.ID, err)
	}
	d.MachineID = sb.ID
	s.endSessions(d.ID) // the old machine's are dead
	if err := s.attach(ctx, d, password); err != nil {
		s.kill(ctx, d)
		return d, fmt.Errorf("restart database %s: %w", d.ID, err)
	}
	if err := s.cfg.Store.UpdateDatabase(ctx, d.ID, d.State, d.MachineID); err != nil {
		s.kill(ctx, d)
		return d, err
	}
	log.Info("database restarted from its volume", "machine", d.MachineID, "ms", time.Since(t0).Milliseconds())
	return d, nil
}

// machineFor starts a service machine for d with its volume mounted.
func (s *Service) machineFor(ctx context.Context, d pandastack.Database, autoHibernate *int64) (pandastack.Sandbox, error) {
	return s.cfg.Sandboxes.Create(ctx, d.TeamID, sandboxes.CreateParams{Template: Template, Lifetime: string(pandastack.LifetimeService),
		Metadata: map[string]string{"pandastack.database": d.ID}, AutoHibernateSeconds: autoHibernate,
		Volumes: []pandastack.VolumeMount{{Volume: d.VolumeID, Path: DataMount}}, ManagedBy: managedBy(d.ID)})
}

// managedBy marks database id's machines (pandastack.Sandbox.ManagedBy):
// the sandbox API shows them but leaves changing them to this service.
func managedBy(id string) string {
	return "database:" + id
}

// attach brings up PostgreSQL on the volume in d's (new) machine and
// configures it for d.
func (s *Service) attach(ctx context.Context, d pandastack.Database, password string) error {
	size, err := s.volumeSize(ctx, d)
	if err != nil {
		return err
	}
	if err := s.startOnVolume(ctx, d, size); err != nil {
		return err
	}
	return s.setup(ctx, d, password)
}

// kill ends d's machine (its volume is freed and kept).
func (s *Service) kill(ctx context.Context, d pandastack.Database) {
	if err := s.cfg.Engine.Kill(context.WithoutCancel(ctx), d.MachineID, pandastack.StateKilled); err != nil {
		s.log.Error("kill database machine", "database", d.ID, "machine", d.MachineID, "err", err)
	}
}

// reviveLock is database id's restart lock.
func (s *Service) reviveLock(id string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reviving == nil {
		s.reviving = map[string]*sync.Mutex{}
	}
	mu := s.reviving[id]
	if mu == nil {
		mu = &sync.Mutex{}
		s.reviving[id] = mu
	}
	return mu
}

// reviveAll restarts, in the background, every ready database whose
// machine is gone (the server's start found it ended).
func (s *Service) reviveAll(ctx context.Context, all []pandastack.Database) {
	for _, d := range all {
		if d.State != pandastack.DatabaseReady {
			continue
		}
		if sb, err := s.cfg.Store.GetSandbox(ctx, d.MachineID); err == nil && sb.State.Live() {
			continue
		}
		go func() {
			if _, err := s.revive(ctx, d); err != nil {
				s.log.Error("restart database at start", "database", d.ID, "err", err)
			}
		}()
	}
}
