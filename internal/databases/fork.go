package databases

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/pgbouncer"
	"github.com/pandastack/pandastack/internal/quotas"
)

// Fork makes database name for teamID as a copy of running database ref
// at this moment: the engine forks its machine (memory, root disk and
// volume copy-on-write; the parent pauses only for the save, then runs
// on) and the child's copy of the volume becomes a volume of its own.
// The child keeps the parent's role and database names but gets its own
// password, set inside the child before it is routed: the parent's does
// not open it. It answers like Create, once a query with the new
// password went through the router. A taken name is EConflict; whatever
// fails on the way is removed.
func (s *Service) Fork(ctx context.Context, teamID, ref, name string) (Info, error) {
	if err := checkName(name); err != nil {
		return Info{}, err
	}
	if s.cfg.Forks == nil {
		return Info{}, pandastack.Errorf(pandastack.EUnavailable, "this server does not fork databases")
	}
	parent, err := s.ready(ctx, teamID, ref)
	if err != nil {
		return Info{}, err
	}
	if parent.VolumeID == "" {
		return Info{}, pandastack.Errorf(pandastack.EConflict, "database %s keeps its data on no volume of its own: it cannot be forked", ref)
	}
	pm, err := s.cfg.Store.GetSandbox(ctx, parent.MachineID)
	if err != nil || !pm.State.Live() {
		return Info{}, pandastack.Errorf(pandastack.EConflict, "database %s is not running: connect to it (or wake it) first", ref)
	}
	vol, err := s.volumeSize(ctx, parent)
	if err != nil {
		return Info{}, err
	}
	d, password, err := s.newRecord(ctx, teamID, name, parent.User, parent.DBName)
	if err != nil {
		return Info{}, err
	}
	ok := false
	defer func() {
		if !ok {
			s.discard(ctx, d)
		}
	}()
	if s.cfg.Quotas != nil {
		release, err := s.cfg.Quotas.Reserve(ctx, teamID, quotas.Usage{Sandboxes: 1, ServiceMachines: 1, VCPUs: pm.CPUs,
			MemoryMiB: pm.MemoryMiB, DiskMiB: pm.DiskMiB + vol, Volumes: 1})
		if err != nil {
			return Info{}, err
		}
		defer release()
	}
	t0 := time.Now()
	sb, vols, err := s.cfg.Forks.ForkKeepingVolumes(ctx, parent.MachineID, []string{d.ID}, map[string]string{"pandastack.database": d.ID}, managedBy(d.ID))
	if err != nil {
		return Info{}, fmt.Errorf("fork database %s: %w", ref, err)
	}
	tFork := time.Since(t0)
	d.MachineID = sb.ID
	if err := s.cfg.Store.UpdateDatabase(ctx, d.ID, d.State, d.MachineID); err != nil {
		return Info{}, err
	}
	d.VolumeID = vols[0].ID
	if err := s.cfg.Store.SetDatabaseVolume(ctx, d.ID, d.VolumeID); err != nil {
		return Info{}, err
	}
	if err := s.rekey(ctx, d, password); err != nil {
		return Info{}, fmt.Errorf("fork database %s: %w", ref, err)
	}
	if err := s.goLive(ctx, &d, password, nil); err != nil {
		return Info{}, fmt.Errorf("fork database %s: %w", ref, err)
	}
	ok = true
	s.log.Info("database forked", "database", d.ID, "parent", parent.ID, "team", teamID, "machine", d.MachineID,
		"fork_ms", tFork.Milliseconds(), "total_ms", time.Since(t0).Milliseconds())
	in := s.info(d, StateRunning, password)
	in.AutoHibernateSeconds = sb.AutoHibernateSeconds
	return in, nil
}

// volumeSize is the size of d's volume in MiB.
func (s *Service) volumeSize(ctx context.Context, d pandastack.Database) (int, error) {
	v, err := s.cfg.Store.GetVolume(ctx, d.VolumeID)
	if err != nil {
		return 0, fmt.Errorf("volume of database %s: %w", d.ID, err)
	}
	return v.SizeMiB, nil
}

// rekeySQL sets role user's verifier and rewrites PgBouncer's auth_file,
// as a psql script whose errors do not quote the statement (terse: the
// statements hold the verifier).
func rekeySQL(user, verifier string) string {
	q := []string{"\\set ON_ERROR_STOP 1", "\\set VERBOSITY terse",
		fmt.Sprintf("ALTER ROLE %s PASSWORD %s;", quoteIdent(user), quoteLiteral(verifier))}
	for _, p := range poolerSQL(user, verifier) {
		q = append(q, p+";")
	}
	return strings.Join(q, "\n") + "\n"
}

// rekey gives forked database d its own password: inside its machine, as
// the postgres superuser over the local socket (the only way in once the
// parent's setup turned trust off), it sets the role's verifier and
// PgBouncer's auth_file (the SQL goes on standard input, not in a
// command line), has PgBouncer read it again and ends the sessions the
// fork copied from the parent.
func (s *Service) rekey(ctx context.Context, d pandastack.Database, password string) error {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	verifier, err := scramVerifier(password, salt)
	if err != nil {
		return err
	}
	// One guest round trip: PgBouncer is told to read its auth_file again
	// from the same script (the probe waits for it to have done so).
	sql := rekeySQL(d.User, verifier) + "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = " +
		quoteLiteral(d.User) + " AND pid <> pg_backend_pid();\n" +
		"COPY (SELECT 1) TO PROGRAM " + quoteLiteral("kill -HUP $(cat "+pgbouncer.PIDFile+")") + ";\n"
	if _, err := s.runIn(ctx, d.MachineID, strings.NewReader(sql), "runuser", "-u", "postgres", "--", "psql", "-X", "-q", "-d", "postgres"); err != nil {
		return fmt.Errorf("set the fork's password: %w", err)
	}
	return nil
}
