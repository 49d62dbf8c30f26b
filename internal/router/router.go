// Package router carries traffic from outside to machines: HTTP by Host
// header (sandbox ports at PORT-ID.DOMAIN, and hostnames services register,
// such as NAME.apps.DOMAIN or a custom domain) and TLS connections by SNI on
// a TCP listener, terminated with a certificate from the server's own CA or
// passed through untouched.
//
// The seam is the Table: services Register a Route for a hostname (a
// Backend to dial, who may reach it, how TLS is handled) and Unregister it
// when it goes; the HTTP router and the SNI listener Lookup every request or
// connection. Sandbox ports need no registration: their hostnames name the
// sandbox and the port, and a sandbox is woken on the first request.
//
// The router never speaks a backend's protocol beyond HTTP: protocols that
// open with their own bytes before the TLS ClientHello (PostgreSQL's
// SSLRequest) plug in as a Preamble of the SNI listener, and ALPN is offered
// per route.
package router

import (
	"context"
	"net"
	"strings"
	"sync"

	"github.com/pandastack/pandastack"
)

// Backend is where a route's connections go.
type Backend interface {
	// Dial connects to the backend. ERefused means nothing listens there.
	Dial(ctx context.Context) (net.Conn, error)
}

// TLSMode says what the SNI listener does with a route's TLS.
type TLSMode int

const (
	// Terminate ends TLS at the router with a certificate from the
	// server's CA and sends the plaintext to the backend.
	Terminate TLSMode = iota
	// Passthrough sends the TLS bytes, ClientHello included, to the
	// backend unchanged: the backend holds the certificate.
	Passthrough
)

// Kind says which protocol a route's backend speaks after TLS.
type Kind int

const (
	// HTTP routes serve HTTP requests by Host, with the route's access
	// rules; over TLS they are terminated and served by the HTTP router.
	HTTP Kind = iota
	// TCP routes carry a byte stream: reachable only through the SNI
	// listener.
	TCP
)

// Access says who may reach an HTTP route.
type Access struct {
	// Public routes need nothing.
	Public bool
	// TeamID, when not public, is the team whose API keys may reach it.
	TeamID string
}

// Route sends one hostname to a backend.
type Route struct {
	// Host is the exact hostname, without a port ("web.apps.example.com").
	Host    string
	Kind    Kind
	Backend Backend
	// TLS applies to connections through the SNI listener.
	TLS TLSMode
	// ALPN lists the protocols offered when TLS is terminated (for
	// example "postgresql" for PostgreSQL 17's direct SSL); empty offers
	// none, except http/1.1 for HTTP routes.
	ALPN []string
	// Access applies to HTTP routes; TCP routes rely on their protocol's
	// own authentication.
	Access Access
}

// Table holds the registered routes. The zero value is not usable: make
// one with NewTable. It is safe for concurrent use.
type Table struct {
	mu     sync.RWMutex
	routes map[string]Route
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{routes: map[string]Route{}} }

// NormalizeHost lower-cases a hostname and drops a port and a trailing dot.
func NormalizeHost(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// Register adds a route. A hostname already routed is EConflict; a route
// without a host or backend is EInvalid.
func (t *Table) Register(r Route) error {
	r.Host = NormalizeHost(r.Host)
	if r.Host == "" || r.Backend == nil {
		return pandastack.Errorf(pandastack.EInvalid, "a route needs a host and a backend")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, taken := t.routes[r.Host]; taken {
		return pandastack.Errorf(pandastack.EConflict, "host %s is already routed", r.Host)
	}
	t.routes[r.Host] = r
	return nil
}

// Unregister removes the route of a hostname, if any.
func (t *Table) Unregister(host string) {
	t.mu.Lock()
	delete(t.routes, NormalizeHost(host))
	t.mu.Unlock()
}

// Lookup finds the route of a hostname (any case, with or without a port).
func (t *Table) Lookup(host string) (Route, bool) {
	if t == nil {
		return Route{}, false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.routes[NormalizeHost(host)]
	return r, ok
}
