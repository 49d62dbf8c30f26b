package databases

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
	"github.com/pandastack/pandastack/internal/sandboxes"
)

// A base is a database machine as every new database starts: restored
// from the postgres template, its cluster copied onto a volume and
// running from it, an empty database (BaseDB) made and PgBouncer
// started, nobody's role yet and the template's loopback trust still on.
// The first create of a size on a template build does that the slow way
// (a cold cluster copied and started) and saves its machine, volume
// included, as the base before it gives the machine its tenant; every
// later create restores the base with its own copy-on-write copy of the
// volume kept as its durable volume, then claims it (claimSQL: its role,
// the database renamed to its name and the hba that turns the trust off)
// in one round trip. Its data is on its own
// volume from the first instruction, as with the slow way: a machine that
// dies is restarted from the volume (revive.go).

// BaseDB is the empty database a base holds, renamed to the tenant's
// database by the create that claims it. A database's name cannot be it
// (checkName: no leading '_').
const BaseDB = "_pandastack_new"

// Baser saves database machines as bases and restores new machines from
// them (*sandboxes.Engine).
type Baser interface {
	SaveBase(ctx context.Context, id, baseID string) error
	RestoreBase(ctx context.Context, p sandboxes.BaseRestore) (pandastack.Sandbox, []pandastack.Volume, error)
}

// baseSizes are the volume sizes a base is kept for: each base keeps a
// copy of a machine's memory on the host, so only the default size's.
var baseSizes = map[int]bool{DefaultSizeMiB: true}

// bases tracks the saves under way and done (one per base id): a base
// saved is not replaced while creates may be restoring it.
type bases struct {
	mu     sync.Mutex
	saving map[string]bool
	saved  map[string]bool
}

// baseID names the base of template build templateID with a volume of
// sizeMiB: a new build of the template never restores an older build's.
// Its last part is the base's layout (baseLayout).
func baseID(templateID string, sizeMiB int) string {
	return fmt.Sprintf("dbbase-%s-%dm-%s", templateID, sizeMiB, baseLayout)
}

// baseLayout changes when what a base's running machine holds changes, so
// a server never restores a base an older version saved: "walroom" has
// PostgreSQL and PgBouncer listening on the machine's NIC address and its
// volume's WAL room kept by project quotas (walroom.go); "authquery" has
// PgBouncer look its clients up in the database (pgbouncer.AuthQuery)
// over PostgreSQL's local socket, its auth_file empty.
const baseLayout = "authquery"

// template is the postgres template's newest public build, which new
// databases start from.
func (s *Service) template(ctx context.Context) (pandastack.Template, error) {
	return s.cfg.Store.GetTemplate(ctx, "", Template)
}

// fromBase starts d's machine from the base for a volume of sizeMiB and
// records its machine and volume on d. With no base (none kept for that
// size, not saved yet on this host, or its files removed) it starts
// nothing and answers false: the caller makes the machine the slow way.
func (s *Service) fromBase(ctx context.Context, d *pandastack.Database, tpl pandastack.Template, sizeMiB int, autoHibernate *int64) (pandastack.Sandbox, bool, error) {
	if s.cfg.Bases == nil || !baseSizes[sizeMiB] {
		return pandastack.Sandbox{}, false, nil
	}
	// The create's rules, as the slow way applies them (auto-hibernate's
	// bounds).
	req, err := s.cfg.Sandboxes.Request(d.TeamID, sandboxes.CreateParams{Template: Template, Lifetime: string(pandastack.LifetimeService),
		AutoHibernateSeconds: autoHibernate})
	if err != nil {
		return pandastack.Sandbox{}, false, err
	}
	if s.cfg.Quotas != nil {
		release, err := s.cfg.Quotas.Reserve(ctx, d.TeamID, quotas.Usage{Sandboxes: 1, ServiceMachines: 1, VCPUs: max(tpl.CPUs, 1),
			MemoryMiB: tpl.MemoryMiB, DiskMiB: tpl.DiskMiB + sizeMiB, Volumes: 1})
		if err != nil {
			return pandastack.Sandbox{}, false, err
		}
		defer release()
	}
	sb, vols, err := s.cfg.Bases.RestoreBase(ctx, sandboxes.BaseRestore{TeamID: d.TeamID, Base: baseID(tpl.ID, sizeMiB),
		Template: tpl.Name, TemplateID: tpl.ID, Metadata: map[string]string{"pandastack.database": d.ID}, ManagedBy: managedBy(d.ID),
		AutoHibernate: req.AutoHibernate, Volumes: []sandboxes.BaseVolume{{Name: d.ID, SizeMiB: sizeMiB, MountPath: DataMount, Slot: 0}}})
	if pandastack.ErrorCode(err) == pandastack.ENotFound {
		s.log.Info("no database base on this host yet: starting the cluster cold", "database", d.ID, "err", err)
		s.base.mu.Lock()
		delete(s.base.saved, baseID(tpl.ID, sizeMiB)) // its files are gone: save it again
		s.base.mu.Unlock()
		return pandastack.Sandbox{}, false, nil
	}
	if err != nil {
		return pandastack.Sandbox{}, false, err
	}
	d.MachineID, d.VolumeID = sb.ID, vols[0].ID
	if err := s.cfg.Store.SetDatabaseVolume(ctx, d.ID, d.VolumeID); err != nil {
		return sb, true, err
	}
	if err := s.cfg.Store.UpdateDatabase(ctx, d.ID, d.State, d.MachineID); err != nil {
		return sb, true, err
	}
	return sb, true, nil
}

// prepare brings d's new machine (the template's, its cluster just
// started on the volume) to the base's state: the empty database made,
// PgBouncer started with no user yet.
func (s *Service) prepare(ctx context.Context, d pandastack.Database) error {
	conn, err := s.superuser(ctx, d.MachineID)
	if err != nil {
		return fmt.Errorf("prepare database machine: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	size, err := s.volumeSize(ctx, d)
	if err != nil {
		return fmt.Errorf("prepare database machine: %w", err)
	}
	for _, q := range append([]string{
		"CREATE DATABASE " + quoteIdent(BaseDB),
		emptyAuthFileSQL,
	}, walSQL(size)...) {
		if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("prepare database machine: %s: %w", q, err)
		}
	}
	return s.startPooler(ctx, d)
}

// saveBase saves d's machine, prepared (not yet claimed), as the base for
// volumes of sizeMiB on template build templateID, unless one is being
// saved. It is best effort: a create without it works, the slow way.
func (s *Service) saveBase(ctx context.Context, d pandastack.Database, templateID string, sizeMiB int) {
	if s.cfg.Bases == nil || !baseSizes[sizeMiB] {
		return
	}
	id := baseID(templateID, sizeMiB)
	s.base.mu.Lock()
	if s.base.saving[id] || s.base.saved[id] {
		s.base.mu.Unlock()
		return
	}
	if s.base.saving == nil {
		s.base.saving, s.base.saved = map[string]bool{}, map[string]bool{}
	}
	s.base.saving[id] = true
	s.base.mu.Unlock()
	t0 := time.Now()
	err := s.cfg.Bases.SaveBase(ctx, d.MachineID, id)
	s.base.mu.Lock()
	delete(s.base.saving, id)
	s.base.saved[id] = err == nil
	s.base.mu.Unlock()
	if err != nil {
		s.log.Error("save database base", "database", d.ID, "base", id, "err", err)
		return
	}
	s.log.Info("database base saved", "database", d.ID, "machine", d.MachineID, "base", id, "ms", time.Since(t0).Milliseconds())
}

// hbaFile is the cluster's hba_file on the postgres template (Debian's
// layout; the template writes it there).
const hbaFile = "/etc/postgresql/17/main/pg_hba.conf"

// claimSQL gives a prepared machine (a base's state) to its tenant, as
// one simple query (one transaction: a statement that fails undoes the
// role and the rename): the role user (from its SCRAM verifier), the
// base's database renamed to db and given to it, and the hba that ends
// the loopback trust, configuration reloaded. The base's PgBouncer looks
// the new role up by itself (pgbouncer.AuthQuery): nothing to tell it.
func claimSQL(user, verifier, db string) string {
	hba := make([]string, len(hbaLines))
	for i, l := range hbaLines {
		hba[i] = quoteLiteral(l)
	}
	return strings.Join([]string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD %s", quoteIdent(user), quoteLiteral(verifier)),
		fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", quoteIdent(BaseDB), quoteIdent(db)),
		fmt.Sprintf("ALTER DATABASE %s OWNER TO %s", quoteIdent(db), quoteIdent(user)),
		"COPY (SELECT unnest(ARRAY[" + strings.Join(hba, ", ") + "])) TO " + quoteLiteral(hbaFile),
		"SELECT pg_reload_conf()",
	}, ";\n")
}

// claim runs claimSQL for d in its prepared machine, as the postgres
// superuser over the guest channel.
func (s *Service) claim(ctx context.Context, d pandastack.Database, password string) error {
	verifier, err := newVerifier(password)
	if err != nil {
		return fmt.Errorf("claim database machine: %w", err)
	}
	t0 := time.Now()
	conn, err := s.superuser(ctx, d.MachineID)
	if err != nil {
		return fmt.Errorf("claim database machine: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tConn := time.Since(t0)
	defer func() {
		s.log.Debug("database machine claimed", "database", d.ID, "connect_ms", tConn.Milliseconds(), "ms", time.Since(t0).Milliseconds())
	}()
	if _, err := conn.Exec(ctx, claimSQL(d.User, verifier, d.DBName), pgx.QueryExecModeSimpleProtocol); err != nil {
		// The statement holds the verifier: say what failed, not it.
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) {
			return fmt.Errorf("claim database machine: %s (SQLSTATE %s)", pe.Message, pe.Code)
		}
		return fmt.Errorf("claim database machine: %w", err)
	}
	return nil
}
