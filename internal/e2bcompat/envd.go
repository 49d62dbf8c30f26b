package e2bcompat

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/router"
)

// sandboxCall is a data-plane request to one sandbox.
type sandboxCall struct {
	sb    pandastack.Sandbox
	guest pandastack.Guest
}

// serveSandbox serves a data-plane request for port of E2B sandbox id:
// envd's surface on EnvdPort, a proxied preview on any other port. An
// unknown, ended or inaccessible sandbox answers 502 JSON as E2B's proxy
// does (never 404: Connect clients read that as "unimplemented").
func (s *Server) serveSandbox(w http.ResponseWriter, r *http.Request, id string, port int, auth Authenticate) {
	sb, ok := s.liveSandbox(r.Context(), id)
	if !ok {
		writeProxyError(w, id, "The sandbox was not found")
		return
	}
	if pausedShut(sb) {
		writeProxyError(w, id, "The sandbox is paused: resume it with Sandbox.connect (or create it with lifecycle autoResume)")
		return
	}
	switch port {
	case EnvdPort:
	case CodePort:
		s.serveCode(w, r, sb, id)
		return
	default:
		s.servePort(w, r, sb, id, port, auth)
		return
	}
	if r.URL.Path == "/health" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	isFiles := r.URL.Path == "/files"
	if !isFiles && !s.tokenOK(sb.ID, r.Header.Get("X-Access-Token")) {
		writeConnectError(w, connectErr("unauthenticated", "the X-Access-Token header is missing or wrong for sandbox %s", id))
		return
	}
	g, err := s.cfg.Engine.Guest(r.Context(), sb.ID)
	if err != nil {
		s.log.WarnContext(r.Context(), "e2b: reach guest", "sandbox", sb.ID, "err", err)
		writeProxyError(w, id, "The sandbox is not running")
		return
	}
	c := &sandboxCall{sb: sb, guest: g}
	if isFiles {
		s.serveFiles(w, r, c)
		return
	}
	s.serveRPC(w, r, c)
}

// liveSandbox finds the live sandbox of E2B id.
func (s *Server) liveSandbox(ctx context.Context, id string) (pandastack.Sandbox, bool) {
	native, ok := s.nativeID(id)
	if !ok {
		return pandastack.Sandbox{}, false
	}
	sb, err := s.cfg.Store.GetSandbox(ctx, native)
	if err != nil || !sb.State.Live() || sb.ManagedBy != "" {
		return pandastack.Sandbox{}, false
	}
	return sb, true
}

// proxyError is the body of E2B's proxy for an unreachable sandbox.
type proxyError struct {
	SandboxID string `json:"sandboxId"`
	Message   string `json:"message"`
	Code      int    `json:"code"`
}

func writeProxyError(w http.ResponseWriter, id, msg string) {
	writeJSON(w, http.StatusBadGateway, proxyError{SandboxID: id, Message: msg, Code: http.StatusBadGateway})
}

// servePort proxies a request (HTTP or a WebSocket upgrade) to a port in
// the sandbox. Who may: anyone when the sandbox was created through the
// E2B API with public traffic (E2B's default), else the holder of its
// access token or of a key of its team.
func (s *Server) servePort(w http.ResponseWriter, r *http.Request, sb pandastack.Sandbox, id string, port int, auth Authenticate) {
	if sb.Metadata[publicKey] != "true" && !s.tokenOK(sb.ID, r.Header.Get("X-Access-Token")) {
		team, err := auth(r)
		if err != nil || team != sb.TeamID {
			writeProxyError(w, id, "The sandbox was not found")
			return
		}
	}
	backend := router.GuestPort{Guests: s.cfg.Engine, SandboxID: sb.ID, Port: port}
	conn, err := backend.Dial(r.Context())
	if err != nil {
		if pandastack.ErrorCode(err) == pandastack.ERefused {
			writeJSON(w, http.StatusBadGateway, proxyError{SandboxID: id, Code: http.StatusBadGateway,
				Message: "The sandbox is running but port is not open"})
			return
		}
		writeProxyError(w, id, "The sandbox is not running")
		return
	}
	first := true
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", r.Host
			pr.Out.Header.Del("X-API-Key")
			pr.Out.Header.Del("X-Access-Token")
			pr.SetXForwarded()
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				if first {
					first = false
					return conn, nil
				}
				return backend.Dial(ctx)
			},
			DisableKeepAlives: true,
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if !errors.Is(err, context.Canceled) {
				writeJSON(w, http.StatusBadGateway, proxyError{SandboxID: id, Code: http.StatusBadGateway,
					Message: "proxy to port failed: " + strings.TrimSpace(err.Error())})
			}
		},
	}
	rp.ServeHTTP(w, r)
	if first {
		conn.Close()
	}
}
