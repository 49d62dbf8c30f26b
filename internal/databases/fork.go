package databases

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/pgbouncer"
	"github.com/pandastack/pandastack/internal/pgrouter"
	"github.com/pandastack/pandastack/internal/quotas"
)

// Fork makes database name for teamID as a copy of running database ref
// at this moment: the engine forks its machine (memory, root disk and
// volume copy-on-write; the parent pauses only for the save, then runs
// on) and the child's copy of the volume becomes a volume of its own.
// The child keeps the parent's role and database names but gets its own
// password, set in the child before it is routed (rekey): the parent's
// does not open it. It answers like Create, once a query with the new
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
	parentPassword, err := s.password(parent)
	if err != nil {
		return Info{}, err
	}
	if err := s.goLiveCopy(ctx, &d, parentPassword, password, true); err != nil {
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

// rekey gives copied database d (a fork's child, a point-in-time
// restore) verifier, its own password's, in place of the verifier of
// oldPassword, the password of the database it was copied from. It logs
// in as the role itself, with oldPassword, through the router (no
// process started in the guest: under TCG a psql exec'd in a just
// restored machine cost 1.7 s), sets the verifier (a role may) and ends
// the other sessions of the role the copy holds. When oldPassword does
// not open it (the tenant changed the password inside), the postgres
// superuser does the same from inside the machine.
func (s *Service) rekey(ctx context.Context, d pandastack.Database, oldPassword, verifier string) error {
	t0 := time.Now()
	err := s.rekeyAsRole(ctx, d, oldPassword, verifier)
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28P01" {
		return fmt.Errorf("set the copy's password: %w", err)
	}
	if err := s.rekeyInside(ctx, d, verifier, false); err != nil {
		return err
	}
	s.log.Debug("database rekeyed", "database", d.ID, "as", "postgres", "ms", time.Since(t0).Milliseconds())
	return nil
}

// rekeyAsRole is rekey's way as the role, through the router's direct
// route to d (registered first).
func (s *Service) rekeyAsRole(ctx context.Context, d pandastack.Database, password, verifier string) error {
	cfg, err := s.routerConfig(pgrouter.Host(d.ID, s.cfg.Domain), d, password)
	if err != nil {
		return err
	}
	t0 := time.Now()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tConn := time.Since(t0)
	defer func() {
		s.log.Debug("database rekey session", "database", d.ID, "connect_ms", tConn.Milliseconds(), "ms", time.Since(t0).Milliseconds())
	}()
	// One simple query, one round trip. The statement holds the verifier;
	// PostgreSQL's error (message and SQLSTATE) does not quote it.
	_, err = conn.Exec(ctx, rekeyRoleSQL(d.User, verifier), pgx.QueryExecModeSimpleProtocol)
	return err
}

// rekeyRoleSQL sets role user's verifier and ends the role's other
// sessions (the copied machine's, whose clients are the original's).
func rekeyRoleSQL(user, verifier string) string {
	return fmt.Sprintf("ALTER ROLE %s PASSWORD %s;\n", quoteIdent(user), quoteLiteral(verifier)) +
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = " +
		quoteLiteral(user) + " AND pid <> pg_backend_pid();\n"
}

// rekeyInsideSQL is rekeyRoleSQL as a psql script whose errors do not
// quote the statement (terse: the statements hold the verifier); with
// pooler, it also writes the verifier to a legacy PgBouncer's auth_file
// (legacyPoolerSQL) and has PgBouncer read it again.
func rekeyInsideSQL(user, verifier string, pooler bool) string {
	q := "\\set ON_ERROR_STOP 1\n\\set VERBOSITY terse\n" + rekeyRoleSQL(user, verifier)
	if pooler {
		q += legacyPoolerSQL(user, verifier) + ";\n" +
			"COPY (SELECT 1) TO PROGRAM " + quoteLiteral("kill -HUP $(cat "+pgbouncer.PIDFile+")") + ";\n"
	}
	return q
}

// rekeyInside sets d's verifier as the postgres superuser over the local
// socket (the only way in as postgres once trust is off), the SQL on
// standard input, not in a command line; see rekeyInsideSQL for pooler.
func (s *Service) rekeyInside(ctx context.Context, d pandastack.Database, verifier string, pooler bool) error {
	if _, err := s.runIn(ctx, d.MachineID, strings.NewReader(rekeyInsideSQL(d.User, verifier, pooler)),
		"runuser", "-u", "postgres", "--", "psql", "-X", "-q", "-d", "postgres"); err != nil {
		return fmt.Errorf("set the copy's password inside: %w", err)
	}
	return nil
}
