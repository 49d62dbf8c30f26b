package api

import (
	"net/http"

	"github.com/pandastack/pandastack/internal/router"
)

// HostRouter serves requests addressed to hosts other than the API's own:
// sandbox ports and registered hostnames (internal/router).
type HostRouter interface {
	// ServeHost serves r when the router owns its host, reporting whether
	// it did; an error it returns is written by the API.
	ServeHost(w http.ResponseWriter, r *http.Request, auth router.Authenticate) (bool, error)
}

// E2BServer serves E2B's control plane and sandbox traffic
// (internal/e2bcompat), reporting whether r was E2B's.
// apiHost is false for hosts the router owns (registered hostnames, sandbox
// ports): E2B's API paths and routing headers count only on the API's own.
type E2BServer interface {
	ServeE2B(w http.ResponseWriter, r *http.Request, auth router.Authenticate, apiHost bool) bool
}

// owns reports whether the host router serves host (when it can say).
func owns(h HostRouter, host string) bool {
	o, ok := h.(interface{ Owns(host string) bool })
	return ok && o.Owns(host)
}

// hostRouter is cfg.Hosts, or a router for sandbox ports made from the
// API's own configuration.
func (s *Server) hostRouter() HostRouter {
	if s.cfg.Hosts != nil {
		return s.cfg.Hosts
	}
	cfg := router.HTTPConfig{Domain: s.domain(), Sandboxes: s.cfg.Store, Guests: s.cfg.Engine,
		Secret: s.cfg.ProxySecret}
	if s.cfg.Network != nil {
		cfg.Policies = s.cfg.Network
	}
	return router.NewHTTP(cfg)
}

// withHosts sends requests for hosts the router owns to it, the rest to
// the API.
func (s *Server) withHosts(api http.Handler) http.Handler {
	hosts := s.hostRouter()
	auth := func(r *http.Request) (string, error) {
		p, err := s.authenticate(r)
		if err != nil {
			return "", err
		}
		return p.key.TeamID, nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.E2B != nil && s.cfg.E2B.ServeE2B(w, r, s.e2bAuth(w), !owns(hosts, r.Host)) {
			return
		}
		served, err := hosts.ServeHost(w, r, auth)
		if err != nil {
			s.writeError(w, r, err)
		}
		if !served {
			api.ServeHTTP(w, r)
		}
	})
}

// e2bAuth authenticates an E2B control-plane request like any API request:
// the key's principal is logged and its rate limit applies (ERateLimited,
// with Retry-After set on w).
func (s *Server) e2bAuth(w http.ResponseWriter) router.Authenticate {
	return func(r *http.Request) (string, error) {
		p, err := s.authenticate(r)
		if err != nil {
			return "", err
		}
		setPrincipal(r, p)
		if err := s.rateLimit(w, r, p); err != nil {
			return "", err
		}
		return p.key.TeamID, nil
	}
}
