// Package api is PandaStack's HTTP API: JSON over HTTP under /v1, with NDJSON
// streams for command output and template builds and raw bytes for file
// transfers. It is the only layer that speaks HTTP; it authenticates API keys,
// keeps each team to its own sandboxes, decodes requests (the sandbox
// product's rules — validation, quotas, lifetimes — are package sandboxes')
// and maps *pandastack.Error codes to HTTP statuses (errors.go holds the one
// table).
//
// The API reads sandboxes from the Store but never writes them: the Engine
// persists every state change (create, kill, TTL change, expiry).
//
// Every route is listed in routes.go; api/openapi.yaml documents exactly those
// routes and a test keeps the two in step.
package api

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cron"
	"github.com/pandastack/pandastack/internal/diskreserve"
	"github.com/pandastack/pandastack/internal/functions"
	"github.com/pandastack/pandastack/internal/quotas"
	"github.com/pandastack/pandastack/internal/sandboxes"
	"github.com/pandastack/pandastack/internal/terminals"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultMaxTTL            = sandboxes.DefaultMaxTTL
	DefaultTTL               = sandboxes.DefaultTTL
	DefaultMaxBufferedOutput = 16 << 20
	DefaultMaxBufferedTotal  = 256 << 20
	DefaultBodyReadTimeout   = time.Minute
)

// maxJSONBody bounds the body of every JSON request.
const maxJSONBody = 1 << 20

// Config assembles a Server.
type Config struct {
	Store   pandastack.Store
	Engine  pandastack.Engine
	Builder pandastack.TemplateBuilder // the host's builder: cold boots (bench), disk sizes of old records
	// Templates is the template registry: templates, versions, tags and
	// builds per team (nil: template routes answer 503 and sandbox creates
	// pass the template reference on as it is).
	Templates Templates
	Logger    *slog.Logger // nil: discard

	// Quotas holds each team's limits and reserves what requests take (nil:
	// a service whose only limits are MaxLiveSandboxesPerTeam and
	// MaxServiceMachinesPerTeam). Its limits' requests_per_second also
	// rate-limit each API key.
	Quotas *quotas.Service
	// Storage, when set, is the host's VM storage reserve, shown to admins
	// in GET quotas (the quota service enforces it).
	Storage StorageStatus
	// MaxLiveSandboxesPerTeam caps a team's live sandboxes (service
	// machines included) when Quotas is nil; 0 means no cap. (With
	// Quotas, max_sandboxes does this.)
	MaxLiveSandboxesPerTeam int
	// MaxServiceMachinesPerTeam caps a team's live service machines when
	// Quotas is nil; 0 means no cap. (With Quotas, max_service_machines.)
	MaxServiceMachinesPerTeam int
	// MaxTTL bounds ttl_seconds (default 24h).
	MaxTTL time.Duration
	// DefaultTTL is a new sandbox's TTL when the request names none (default 5m).
	DefaultTTL time.Duration
	// SandboxDomain is the domain under which sandbox ports are served:
	// http://PORT-SANDBOXID.SandboxDomain (default "localhost").
	SandboxDomain string
	// MaxBufferedOutput bounds each of stdout and stderr of a buffered
	// (non-streaming) exec (default 16 MiB).
	MaxBufferedOutput int64
	// MaxBufferedTotal bounds the output all buffered execs in flight hold
	// together (default 256 MiB); past it, a buffered exec fails with 503
	// and streaming (which holds nothing) still works.
	MaxBufferedTotal int64
	// Network serves sandboxes' network policies and public ports (nil:
	// sandbox networking is off).
	Network Network
	// ProxySecret signs port URLs (?ps_token=); empty: no signed URLs.
	ProxySecret []byte
	// Archive exports snapshots to object storage and imports them (nil:
	// those routes answer 503).
	Archive SnapshotArchive
	// Hosts serves sandbox ports and registered hostnames; nil: a
	// router.HTTPRouter for sandbox ports built from this Config.
	Hosts HostRouter
	// BodyReadTimeout bounds reading a request's body (default 1m; below
	// 0: no bound): a client that stops sending holds its connection no
	// longer. Streaming uploads (files, build contexts, proxied requests)
	// lift it; it ends with the body, so a long streamed response is never
	// cut.
	BodyReadTimeout time.Duration
	// CACert is the PEM certificate of the server's CA, served at
	// GET /v1/ca.pem; nil: that route answers 404.
	CACert []byte
	// Bench measures restore floors and VM processes' cost on the host,
	// for `pandastack bench` (admin routes under /v1/admin/bench; nil:
	// they answer 503).
	Bench HostBench
	// DatabaseBench runs pgbench inside a database's machine for the
	// benchmark (admin only; nil: that route answers 503).
	DatabaseBench DatabaseBench
	// Apps hosts git-driven apps (nil: the /v1/apps routes answer 503).
	Apps Apps
	// E2B serves E2B's wire protocol (internal/e2bcompat) on this port,
	// ahead of everything else; nil: none.
	E2B E2BServer
	// Functions deploys and invokes serverless functions, Cron keeps their
	// schedules (nil: those routes answer 503).
	Functions *functions.Service
	Cron      *cron.Service
	// Databases is the managed PostgreSQL service (nil: the database
	// routes answer 503).
	Databases Databases
	// DatabaseBackups lists and takes databases' backups and restores
	// them to a point in time (nil: those routes answer 503).
	DatabaseBackups DatabaseBackups
	// SQL serves POST /sql, SQL over HTTP for the databases
	// (*sqlhttp.Handler; nil: 503).
	SQL http.Handler
}

// StorageStatus reads the host's VM filesystem: its size, free space and
// reserve (*diskreserve.Reserve).
type StorageStatus interface {
	Status() (diskreserve.Status, error)
}

// Server serves the API. Create it with New.
type Server struct {
	cfg     Config
	log     *slog.Logger
	handler http.Handler

	quotas  *quotas.Service
	limiter *quotas.RateLimiter

	buffered budget // output held by buffered execs, bounded by MaxBufferedTotal
	// sbx applies the sandbox product's rules: validation, quotas, TTL
	// and lifetime (package sandboxes).
	sbx *sandboxes.Service
	// terms holds interactive terminal sessions (terminal.go).
	terms *terminals.Manager
}

// New returns a Server for cfg, filling in defaults.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = DefaultMaxTTL
	}
	if cfg.DefaultTTL <= 0 {
		cfg.DefaultTTL = DefaultTTL
	}
	if cfg.DefaultTTL > cfg.MaxTTL {
		cfg.DefaultTTL = cfg.MaxTTL
	}
	if cfg.BodyReadTimeout == 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.MaxBufferedOutput <= 0 {
		cfg.MaxBufferedOutput = DefaultMaxBufferedOutput
	}
	if cfg.Quotas == nil {
		cfg.Quotas = quotas.New(quotas.Config{Store: cfg.Store, Defaults: quotas.Limits{
			MaxSandboxes: cfg.MaxLiveSandboxesPerTeam, MaxServiceMachines: cfg.MaxServiceMachinesPerTeam}})
	}
	if cfg.MaxBufferedTotal <= 0 {
		cfg.MaxBufferedTotal = DefaultMaxBufferedTotal
	}
	s := &Server{cfg: cfg, log: cfg.Logger, quotas: cfg.Quotas, limiter: quotas.NewRateLimiter(), buffered: budget{max: cfg.MaxBufferedTotal},
		sbx: sandboxes.New(sandboxes.Config{Store: cfg.Store, Engine: cfg.Engine, Logger: cfg.Logger, Quotas: cfg.Quotas,
			MaxTTL: cfg.MaxTTL, DefaultTTL: cfg.DefaultTTL})}
	s.terms = terminals.New(terminals.Config{Log: cfg.Logger})
	s.handler = s.buildHandler()
	return s
}

// Handler returns the http.Handler serving every route.
func (s *Server) Handler() http.Handler { return s.handler }
