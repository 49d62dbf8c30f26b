package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pandastack/pandastack"
)

// sandboxLabel matches PORT-SANDBOXID, the first label of a sandbox host.
var sandboxLabel = regexp.MustCompile(`^([0-9]{1,6})-(sbx_[0-9a-f]{1,64})$`)

// Sandboxes finds a sandbox's record (its team and state): pandastack.Store.
type Sandboxes interface {
	GetSandbox(ctx context.Context, id string) (pandastack.Sandbox, error)
}

// Policies gives a sandbox's network policy, whose public_ports need no
// key (internal/network).
type Policies interface {
	Policy(id string) pandastack.NetworkPolicy
}

// Authenticate returns the team of the API key a request presents, or an
// EUnauthorized error (the API's key check).
type Authenticate func(r *http.Request) (teamID string, err error)

// HTTPConfig configures the HTTP router.
type HTTPConfig struct {
	// Domain: sandbox ports are served at PORT-ID.Domain (default
	// "localhost").
	Domain string
	// Table holds the hostnames services registered; nil: none.
	Table *Table
	// Sandboxes, Guests and Policies serve sandbox ports; Policies may be
	// nil (no public ports).
	Sandboxes Sandboxes
	Guests    Guests
	Policies  Policies
	// Secret signs and checks port URLs (?ps_token=); empty: none.
	Secret []byte
}

// HTTPRouter serves HTTP requests addressed to sandbox ports and to
// registered hostnames. Every other host is the API's.
type HTTPRouter struct {
	cfg HTTPConfig
}

// NewHTTP returns an HTTP router for cfg.
func NewHTTP(cfg HTTPConfig) *HTTPRouter {
	if cfg.Domain == "" {
		cfg.Domain = "localhost"
	}
	cfg.Domain = NormalizeHost(cfg.Domain)
	return &HTTPRouter{cfg: cfg}
}

// Domain is the sandbox domain.
func (h *HTTPRouter) Domain() string { return h.cfg.Domain }

// Owns reports whether the router serves host (a sandbox port host or a
// registered HTTP route) rather than the API.
func (h *HTTPRouter) Owns(host string) bool {
	if r, ok := h.cfg.Table.Lookup(host); ok {
		return r.Kind == HTTP
	}
	_, _, ok, _ := h.sandboxTarget(host)
	return ok
}

// sandboxTarget parses a host PORT-ID.DOMAIN[:port]. ok is false for hosts
// that are not one label under the domain (the API's own); err is set for a
// label that is not PORT-SANDBOXID or a port outside 1-65535.
func (h *HTTPRouter) sandboxTarget(host string) (port int, id string, ok bool, err error) {
	host = NormalizeHost(host)
	label, found := strings.CutSuffix(host, "."+h.cfg.Domain)
	if !found || label == "" || strings.Contains(label, ".") {
		return 0, "", false, nil
	}
	m := sandboxLabel.FindStringSubmatch(label)
	if m == nil {
		return 0, "", true, pandastack.Errorf(pandastack.EInvalid, "host %q is not PORT-SANDBOXID.%s", host, h.cfg.Domain)
	}
	port, _ = strconv.Atoi(m[1])
	if port < 1 || port > 65535 {
		return 0, "", true, pandastack.Errorf(pandastack.EInvalid, "port %d is outside 1-65535", port)
	}
	return port, m[2], true, nil
}

// ServeHost serves r when its host is one the router owns and reports
// whether it did. An error it returns has not been written: the caller
// writes it (JSON, its status table).
func (h *HTTPRouter) ServeHost(w http.ResponseWriter, r *http.Request, auth Authenticate) (bool, error) {
	if rt, ok := h.cfg.Table.Lookup(r.Host); ok && rt.Kind == HTTP {
		return true, h.serveRoute(w, r, rt, auth)
	}
	port, id, ok, err := h.sandboxTarget(r.Host)
	if !ok {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	return true, h.serveSandboxPort(w, r, id, port, auth)
}

// serveRoute proxies to a registered route after its access check.
func (h *HTTPRouter) serveRoute(w http.ResponseWriter, r *http.Request, rt Route, auth Authenticate) error {
	if !rt.Access.Public {
		team, err := auth(r)
		if err != nil {
			return err
		}
		if team != rt.Access.TeamID {
			return pandastack.Errorf(pandastack.ENotFound, "host %s not found", rt.Host)
		}
	}
	// Names under the shared domain are neighbours of other tenants'; a
	// custom domain is its owner's alone, cookies for its subdomains too.
	// A public app may use Authorization itself (HTTP Basic auth).
	return h.forward(w, r, rt.Backend, rt.Host, forwarding{isolateCookies: h.underDomain(rt.Host), stripKey: !rt.Access.Public})
}

// underDomain reports whether host lies under the shared sandbox domain.
func (h *HTTPRouter) underDomain(host string) bool {
	return strings.HasSuffix(NormalizeHost(host), "."+h.cfg.Domain)
}

// serveSandboxPort forwards one request (HTTP, streamed, or a WebSocket
// upgrade) to a port inside a sandbox, through its guest agent.
func (h *HTTPRouter) serveSandboxPort(w http.ResponseWriter, r *http.Request, id string, port int, auth Authenticate) error {
	grant, err := h.portAccess(r, id, port, auth)
	if err != nil {
		return err
	}
	if grant.fromURL && isNavigation(r) {
		// A browser opening a signed URL: keep the token in a cookie and
		// send it to the same address without it, so the token leaves
		// the address bar, the history and later Referer headers.
		h.setTokenCookie(w, r, grant)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, r.URL.RequestURI(), http.StatusFound)
		return nil
	}
	if grant.fromURL {
		h.setTokenCookie(w, r, grant)
	}
	return h.forward(w, r, GuestPort{Guests: h.cfg.Guests, SandboxID: id, Port: port}, fmt.Sprintf("port %d of %s", port, id),
		forwarding{isolateCookies: true, stripKey: true})
}

// forwarding says how a request is forwarded.
type forwarding struct {
	// isolateCookies keeps the backend's cookies on its own host.
	isolateCookies bool
	// stripKey removes the API key headers (Authorization, X-API-Key).
	stripKey bool
}

// forward connects to the backend first, so that a closed port answers a
// clear error before any proxying starts, then proxies the request.
func (h *HTTPRouter) forward(w http.ResponseWriter, r *http.Request, b Backend, what string, f forwarding) error {
	conn, err := b.Dial(r.Context())
	if err != nil {
		return err
	}
	// The first dial gets conn; one the proxy never used is closed (an
	// open port connection keeps a sandbox busy, see auto-hibernate).
	var used atomic.Bool
	defer func() {
		if used.CompareAndSwap(false, true) {
			conn.Close()
		}
	}()
	// Responses stream and WebSockets live as long as they like: lift the
	// server's per-request deadlines.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	var proxyErr error
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = r.Host
			pr.Out.Host = r.Host
			if f.stripKey {
				pr.Out.Header.Del("Authorization")
				pr.Out.Header.Del("X-API-Key")
			}
			pr.SetXForwarded()
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				if used.CompareAndSwap(false, true) {
					return conn, nil
				}
				return b.Dial(ctx)
			},
			DisableKeepAlives: true,
		},
		FlushInterval: -1,
		ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			code := pandastack.EUnavailable
			if pandastack.ErrorCode(err) == pandastack.ERefused {
				code = pandastack.ERefused
			}
			proxyErr = &pandastack.Error{Code: code, Message: "proxy to " + what + " failed", Err: err}
		},
	}
	if f.isolateCookies {
		rp.ModifyResponse = isolateCookies
	}
	rp.ServeHTTP(w, r)
	return proxyErr
}
