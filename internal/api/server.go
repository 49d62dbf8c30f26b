// Package api is PandaStack's HTTP API: JSON over HTTP under /v1, with NDJSON
// streams for command output and template builds and raw bytes for file
// transfers. It is the only layer that speaks HTTP; it authenticates API keys,
// keeps each team to its own sandboxes, validates requests and maps
// *pandastack.Error codes to HTTP statuses (errors.go holds the one table).
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
	"sync"
	"time"

	"github.com/pandastack/pandastack"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultMaxTTL            = 24 * time.Hour
	DefaultTTL               = 5 * time.Minute
	DefaultMaxBufferedOutput = 16 << 20
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

	// MaxLiveSandboxesPerTeam caps a team's live sandboxes; 0 means no cap.
	MaxLiveSandboxesPerTeam int
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
	// Network serves sandboxes' network policies and public ports (nil:
	// sandbox networking is off).
	Network Network
	// ProxySecret signs port URLs (?ps_token=); empty: no signed URLs.
	ProxySecret []byte
}

// Server serves the API. Create it with New.
type Server struct {
	cfg     Config
	log     *slog.Logger
	handler http.Handler

	// pending counts sandbox creations in flight per team, so that
	// concurrent creates cannot together overshoot MaxLiveSandboxesPerTeam.
	mu      sync.Mutex
	pending map[string]int
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
	if cfg.MaxBufferedOutput <= 0 {
		cfg.MaxBufferedOutput = DefaultMaxBufferedOutput
	}
	s := &Server{cfg: cfg, log: cfg.Logger, pending: map[string]int{}}
	s.handler = s.buildHandler()
	return s
}

// Handler returns the http.Handler serving every route.
func (s *Server) Handler() http.Handler { return s.handler }
