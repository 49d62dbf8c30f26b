// Package e2bcompat serves E2B's wire protocol on PandaStack's sandboxes, so
// that the stock `e2b` SDKs run unchanged against a PandaStack server with
// only E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL (or E2B_DOMAIN) changed.
//
// It has two faces, both translated onto the sandboxes Engine and the
// guest agent's protocol (host side: the guest agent is unchanged, so every
// template and baked snapshot works as it is):
//
//   - the control plane (control.go): E2B's REST API for creating,
//     connecting, listing, timing out, pausing (hibernate) and killing
//     sandboxes, authenticated by the X-API-Key header with a PandaStack key
//     (keys create --e2b makes one in E2B's e2b_<hex> shape);
//   - the data plane (envd.go): the in-VM agent E2B calls "envd" — its
//     Connect-RPC over JSON services process.Process and
//     filesystem.Filesystem, and the /files upload and download endpoints —
//     authenticated by the per-sandbox X-Access-Token, and previews of any
//     other port. A request reaches it by the E2b-Sandbox-Id and
//     E2b-Sandbox-Port headers (E2B_SANDBOX_URL pointing at the server) or
//     by a host PORT-ID.DOMAIN.
//
// E2B sandbox ids are PandaStack ids without their "sbx_" prefix: E2B's
// host routing needs [a-z0-9] only.
package e2bcompat

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
	"github.com/pandastack/pandastack/internal/router"
	"github.com/pandastack/pandastack/internal/sandboxes"
	"github.com/pandastack/pandastack/internal/terminals"
)

// EnvdPort is the port E2B's SDKs address the in-VM agent on.
const EnvdPort = 49983

// EnvdVersion is the envd version reported to the SDKs, which gate features
// on it: 0.5.7 has octet-stream uploads and closeStdin; metadata and
// includeEntry (0.6.x) are not served.
const EnvdVersion = "0.5.7"

// publicKey is the metadata key marking a sandbox created through the E2B
// API with public traffic (E2B's default): its ports are then reachable at
// PORT-ID.DOMAIN without credentials, as on E2B. The E2B API never shows it.
const publicKey = "pandastack.e2b.public"

// Config assembles a Server.
type Config struct {
	Store  pandastack.Store
	Engine pandastack.Engine
	Quotas *quotas.Service // nil: no limits beyond the engine's
	Logger *slog.Logger    // nil: discard
	// Secret derives each sandbox's envd access token (HMAC-SHA256 of its
	// id); it must not be empty.
	Secret []byte
	// Domain is the sandbox domain: a request for PORT-ID.Domain is routed
	// to that sandbox's port (default "localhost").
	Domain string
	// MaxTTL bounds timeouts (default sandboxes.DefaultMaxTTL).
	MaxTTL time.Duration
	// IDPrefix starts every native sandbox id and is left out of E2B ids
	// (default "sbx_", the engine's).
	IDPrefix string
	// Network changes live sandboxes' egress (updateNetwork); nil when
	// sandbox networking is off.
	Network Network
}

// Server serves the E2B API. Create it with New.
type Server struct {
	cfg Config
	log *slog.Logger
	sbx *sandboxes.Service
	// stdins holds the stdin of each process started with stdin: true,
	// by stdinKey, for SendInput and CloseStdin.
	stdins sync.Map
	// ptys holds the terminal session of each process started with a
	// pty, by stdinKey, for SendInput, Update and Connect (pty.go); terms
	// keeps the sessions.
	ptys  sync.Map
	terms *terminals.Manager
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Domain == "" {
		cfg.Domain = "localhost"
	}
	cfg.Domain = router.NormalizeHost(cfg.Domain)
	if cfg.IDPrefix == "" {
		cfg.IDPrefix = "sbx_"
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = sandboxes.DefaultMaxTTL
	}
	return &Server{cfg: cfg, log: cfg.Logger.With("api", "e2b"), terms: terminals.New(terminals.Config{Log: cfg.Logger}),
		sbx: sandboxes.New(sandboxes.Config{Store: cfg.Store, Engine: cfg.Engine, Logger: cfg.Logger,
			Quotas: cfg.Quotas, MaxTTL: cfg.MaxTTL, DefaultTTL: defaultTimeout})}
}

// Authenticate returns the team of the API key a request presents (the
// API's key check).
type Authenticate = router.Authenticate

// hostLabel matches PORT-ID, the first label of an E2B sandbox host.
var hostLabel = regexp.MustCompile(`^([0-9]{1,5})-([a-z0-9]{1,64})$`)

// ServeE2B serves r when it is E2B traffic and reports whether it did: a
// request for PORT-ID.DOMAIN with an E2B-shaped id, or, on the API's own
// host (apiHost: not an app's or a sandbox port's), one carrying
// E2b-Sandbox-Id or on E2B's control-plane paths.
func (s *Server) ServeE2B(w http.ResponseWriter, r *http.Request, auth Authenticate, apiHost bool) bool {
	if port, id, ok := s.hostTarget(r.Host); ok {
		s.serveSandbox(w, r, id, port, auth)
		return true
	}
	// With E2B_DOMAIN the SDKs call api.DOMAIN (control plane) and, for
	// header routing, sandbox.DOMAIN: names under the sandbox domain the
	// host router would otherwise claim.
	switch router.NormalizeHost(r.Host) {
	case "api." + s.cfg.Domain, "sandbox." + s.cfg.Domain:
		apiHost = true
	}
	if !apiHost {
		return false
	}
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		port, err := strconv.Atoi(r.Header.Get("E2b-Sandbox-Port"))
		if err != nil || port < 1 || port > 65535 {
			port = EnvdPort
		}
		s.serveSandbox(w, r, id, port, auth)
		return true
	}
	if isControlPath(r.URL.Path) {
		s.serveControl(w, r, auth)
		return true
	}
	return false
}

// hostTarget parses PORT-ID.DOMAIN[:port] with an E2B-shaped id.
func (s *Server) hostTarget(host string) (port int, id string, ok bool) {
	label, found := strings.CutSuffix(router.NormalizeHost(host), "."+s.cfg.Domain)
	if !found {
		return 0, "", false
	}
	m := hostLabel.FindStringSubmatch(label)
	if m == nil {
		return 0, "", false
	}
	port, _ = strconv.Atoi(m[1])
	if port < 1 || port > 65535 {
		return 0, "", false
	}
	return port, m[2], true
}

// nativeID is the PandaStack id of E2B sandbox id e; ok is false for ids
// that cannot be one.
func (s *Server) nativeID(e string) (string, bool) {
	if e == "" || len(e) > 64 {
		return "", false
	}
	for _, c := range []byte(e) {
		if !('0' <= c && c <= '9') && !('a' <= c && c <= 'z') {
			return "", false
		}
	}
	return s.cfg.IDPrefix + e, true
}

// e2bID is the E2B id of a PandaStack sandbox.
func (s *Server) e2bID(native string) string { return strings.TrimPrefix(native, s.cfg.IDPrefix) }

// accessToken is the envd access token of a sandbox: HMAC-SHA256 of its
// native id under the server's secret, so nothing is stored and a server
// restart keeps it.
func (s *Server) accessToken(native string) string {
	m := hmac.New(sha256.New, s.cfg.Secret)
	m.Write([]byte("e2b-envd-access-token\x00" + native))
	return hex.EncodeToString(m.Sum(nil))
}

// tokenOK checks an access token in constant time.
func (s *Server) tokenOK(native, token string) bool {
	return token != "" && hmac.Equal([]byte(token), []byte(s.accessToken(native)))
}
