// Package databases is the managed PostgreSQL product: a database is a
// service machine (pandastack.LifetimeService, through the sandboxes
// Service, so the team's quotas count it) restored from the postgres
// template, owned by a team, with its own role and password and a route
// in the router.Table that the database router (internal/pgrouter) reads.
//
// Create answers only once a real query with the new credentials went
// through the router. The password is generated here, kept sealed by
// internal/secrets, and reaches the machine only as a SCRAM verifier. The
// role is not a superuser: it owns its database and may CREATE EXTENSION
// those the template allows (templates.PostgresExtensions).
//
// Records live in the store (pandastack.Database); at start every ready
// database's route is registered again and creates a crash interrupted
// are removed. Each database also has a pooled name, <id>-pooler, routed
// to PgBouncer in its machine (transaction pooling). PGDATA lives on a
// durable volume of the database's own (volume.go, counted in the team's
// disk quota); a machine that dies is restarted from it on the next
// connection or at the server's start (revive.go); sessions other services
// keep to a database (SQL over HTTP's pools) are ended when it is deleted,
// hibernated or restarted (sessions.go). What is not here yet: verifying
// each base backup in a throwaway machine. WAL archiving, base
// backups and point-in-time restore are backup.go, archive.go and
// restore.go. Fork (fork.go) copies a running database, memory and volume
// copy-on-write, into a new one with its own password.
package databases

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/pgbouncer"
	"github.com/pandastack/pandastack/internal/pgrouter"
	"github.com/pandastack/pandastack/internal/quotas"
	"github.com/pandastack/pandastack/internal/router"
	"github.com/pandastack/pandastack/internal/sandboxes"
	"github.com/pandastack/pandastack/internal/secrets"
)

// Template is the catalog template databases start from.
const Template = "postgres"

// Port is where PostgreSQL listens inside a database's machine.
const Port = 5432

// Store keeps database records (internal/store/sqlite) and reads the
// machines' own.
type Store interface {
	CreateDatabase(ctx context.Context, d pandastack.Database) error
	UpdateDatabase(ctx context.Context, id, state, machineID string) error
	GetDatabase(ctx context.Context, id string) (pandastack.Database, error)
	// GetTemplate finds the template build new databases start from (base.go).
	GetTemplate(ctx context.Context, teamID, name string) (pandastack.Template, error)
	ListDatabases(ctx context.Context, teamID string) ([]pandastack.Database, error)
	DeleteDatabase(ctx context.Context, id string) error
	SetDatabaseVolume(ctx context.Context, id, volumeID string) error
	GetVolume(ctx context.Context, id string) (pandastack.Volume, error)
	GetSandbox(ctx context.Context, id string) (pandastack.Sandbox, error)
}

// Config configures a Service.
type Config struct {
	Store Store
	// Sandboxes creates the machines (validation and quotas); Engine runs
	// them (kill, hibernate, wake, the guest).
	Sandboxes *sandboxes.Service
	Engine    pandastack.Engine
	// Forks forks a database's machine keeping its volume's copy
	// (*sandboxes.Engine); nil: no forks.
	Forks Forker
	// Volumes makes a database's volume marked as its own
	// (*sandboxes.Engine), so the volume API cannot delete it and no
	// other machine attaches it; nil: Engine makes it, unmarked.
	Volumes VolumeMaker
	// Bases keeps the machines new databases are restored from (base.go;
	// *sandboxes.Engine); nil: every create starts a cluster cold.
	Bases Baser
	// Quotas counts a hibernated machine's memory against the team's disk.
	Quotas  *quotas.Service
	Secrets *secrets.Box
	// Routes is where each database's route is registered.
	Routes *router.Table
	// Ports reaches the port a route's connections go to in a database's
	// machine (internal/nicroute: over the machine's NIC); nil: through
	// its guest agent (router.AgentPorts, New's default).
	Ports router.Ports
	// NICs finds a machine's network namespace (*network.Manager), for
	// pgbench over the NIC (Pgbench); nil when the server runs no sandbox
	// networking.
	NICs NICs
	// Domain is the parent of databases' host names: <id>.<Domain>.
	Domain string
	// CACert is the PEM certificate clients verify the router with.
	CACert []byte
	Logger *slog.Logger
	// Backup archives WAL and takes base backups (backup.go); its zero
	// value: none.
	Backup BackupConfig
}

// NICs finds the network namespace a machine's NIC lives in and the
// guest's address there (*network.Manager).
type NICs interface {
	GuestNetns(vmID string) (ns, addr string, err error)
}

// Forker forks a running machine into one child whose copies of the
// parent's volumes become new durable volumes named names, in order of
// the parent's volume slots (sandboxes.Engine.ForkKeepingVolumes).
type Forker interface {
	ForkKeepingVolumes(ctx context.Context, id string, names []string, metadata map[string]string, managedBy string) (pandastack.Sandbox, []pandastack.Volume, error)
}

// VolumeMaker makes a platform service's volume
// (sandboxes.Engine.CreateManagedVolume).
type VolumeMaker interface {
	CreateManagedVolume(ctx context.Context, teamID, name string, sizeMiB int, managedBy string) (pandastack.Volume, error)
}

// Service creates and runs databases. Make it with New; Start it once.
type Service struct {
	cfg   Config
	log   *slog.Logger
	roots *x509.CertPool
	base  bases // the bases being saved (base.go)

	mu      sync.Mutex
	addr    string // the database router's listening address ("" when off)
	public  int    // the port clients are told
	httpURL string // SQL over HTTP's URL ("" when unknown)
	// reviving serialises restarts of each database (revive.go).
	reviving map[string]*sync.Mutex
	// bk is the state of backups and WAL archiving (backup.go).
	bk backups
	// sessionsEnd are told when a database's kept sessions must end
	// (sessions.go).
	sessionsEnd []func(id string)
}

// New returns a Service for cfg.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Ports == nil {
		cfg.Ports = router.AgentPorts{Guests: cfg.Engine}
	}
	cfg.Domain = router.NormalizeHost(cfg.Domain)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(cfg.CACert)
	return &Service{cfg: cfg, log: cfg.Logger, roots: roots}
}

// Domain is the parent of databases' host names.
func (s *Service) Domain() string { return s.cfg.Domain }

// SetRouter tells the service where the database router listens (creates
// query through it) and the port clients connect to.
func (s *Service) SetRouter(addr string, port int) {
	s.mu.Lock()
	s.addr, s.public = addr, port
	s.mu.Unlock()
}

// SetSQLURL tells the service the URL of SQL over HTTP (POST /sql).
func (s *Service) SetSQLURL(u string) {
	s.mu.Lock()
	s.httpURL = u
	s.mu.Unlock()
}

func (s *Service) sqlURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.httpURL
}

func (s *Service) router() (addr string, port int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr, s.public
}

// Start registers the route of every ready database, removes what
// creates left half done (their machine too) when the server stopped
// under them, and restarts in the background every database whose
// machine did not survive (from its volume).
func (s *Service) Start(ctx context.Context) error {
	all, err := s.cfg.Store.ListDatabases(ctx, "")
	if err != nil {
		return fmt.Errorf("start databases: %w", err)
	}
	for _, d := range all {
		if d.State != pandastack.DatabaseReady {
			s.log.Warn("database create was interrupted; removing it", "database", d.ID)
			s.discard(ctx, d)
			continue
		}
		if err := s.register(d); err != nil {
			s.log.Error("route database", "database", d.ID, "err", err)
		}
	}
	s.reviveAll(context.WithoutCancel(ctx), all)
	return nil
}

// PoolerSuffix ends the first label of a database's pooled host name:
// <id>-pooler.<domain> goes to PgBouncer in the machine.
const PoolerSuffix = "-pooler"

// routes are database d's entries in the route table: TLS ends at the
// router, the plain stream goes to PostgreSQL in its current machine
// (waking it, or restarting it from its volume: revive.go), or to its
// PgBouncer for the pooler's name.
func (s *Service) routes(d pandastack.Database) []router.Route {
	mk := func(label string, port int) router.Route {
		return router.Route{Host: pgrouter.Host(label, s.cfg.Domain), Kind: router.TCP, TLS: router.Terminate,
			ALPN:    []string{pgrouter.ALPN},
			Backend: backend{s: s, id: d.ID, port: port}}
	}
	return []router.Route{mk(d.ID, Port), mk(d.ID+PoolerSuffix, pgbouncer.Port)}
}

func (s *Service) register(d pandastack.Database) error {
	for _, rt := range s.routes(d) {
		if err := s.cfg.Routes.Register(rt); err != nil {
			s.unregister(d)
			return fmt.Errorf("route database %s: %w", d.ID, err)
		}
	}
	return nil
}

func (s *Service) unregister(d pandastack.Database) {
	for _, rt := range s.routes(d) {
		s.cfg.Routes.Unregister(rt.Host)
	}
}

// discard removes what there is of d: route, machine, volume, record. It runs
// on a context of its own so a caller gone away still cleans up.
func (s *Service) discard(ctx context.Context, d pandastack.Database) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	s.unregister(d)
	if d.MachineID != "" {
		if err := s.cfg.Engine.Kill(ctx, d.MachineID, pandastack.StateKilled); err != nil {
			s.log.Error("kill database machine", "database", d.ID, "machine", d.MachineID, "err", err)
		}
	}
	s.dropVolume(ctx, d)
	if err := s.cfg.Store.DeleteDatabase(ctx, d.ID); err != nil {
		s.log.Error("delete database record", "database", d.ID, "err", err)
	}
}
