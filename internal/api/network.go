package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/router"
)

// Network is the sandboxes' network settings (internal/network).
type Network interface {
	Policy(id string) pandastack.NetworkPolicy
	SetPolicy(ctx context.Context, id string, p pandastack.NetworkPolicy) (pandastack.NetworkPolicy, error)
	// Denied counts the connections the policy refused since the VM started.
	Denied(ctx context.Context, id string) (int64, error)
}

type networkResponse struct {
	pandastack.NetworkPolicy
	DeniedConnections int64 `json:"denied_connections"`
}

func (s *Server) network() (Network, error) {
	if s.cfg.Network == nil {
		return nil, pandastack.Errorf(pandastack.EUnavailable, "sandbox networking is off on this server")
	}
	return s.cfg.Network, nil
}

func (s *Server) getNetwork(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.liveSandbox(r)
	if err != nil {
		return err
	}
	nw, err := s.network()
	if err != nil {
		return err
	}
	denied, err := nw.Denied(r.Context(), sb.ID)
	if err != nil {
		return wrap(err, "read denied connections of "+sb.ID)
	}
	writeJSON(w, http.StatusOK, networkResponse{NetworkPolicy: nw.Policy(sb.ID), DeniedConnections: denied})
	return nil
}

// setNetwork replaces a live sandbox's policy; it applies at once.
func (s *Server) setNetwork(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.liveSandbox(r)
	if err != nil {
		return err
	}
	nw, err := s.network()
	if err != nil {
		return err
	}
	var p pandastack.NetworkPolicy
	if err := decodeJSON(w, r, &p); err != nil {
		return err
	}
	if _, err := p.Normalize(); err != nil {
		return err
	}
	applied, err := nw.SetPolicy(r.Context(), sb.ID, p)
	if err != nil {
		return wrap(err, "set network policy of "+sb.ID)
	}
	s.log.InfoContext(r.Context(), "network policy set", "request_id", requestID(r), "sandbox", sb.ID, "egress", applied.Egress)
	denied, _ := nw.Denied(r.Context(), sb.ID)
	writeJSON(w, http.StatusOK, networkResponse{NetworkPolicy: applied, DeniedConnections: denied})
	return nil
}

// presentNetwork fills in a sandbox's port domain and network policy.
func (s *Server) presentNetwork(sb pandastack.Sandbox) pandastack.Sandbox {
	sb.Domain = s.domain()
	if s.cfg.Network != nil && sb.State.Live() {
		p := s.cfg.Network.Policy(sb.ID)
		sb.Network = &p
	}
	return sb
}

func (s *Server) domain() string {
	if s.cfg.SandboxDomain == "" {
		return "localhost"
	}
	return s.cfg.SandboxDomain
}

// Signed port URLs (router.SignPort): the router strips ?ps_token= and
// keeps it as a cookie for the host, so the page's own requests pass.
const (
	maxURLLifetime  = 7 * 24 * time.Hour
	defaultLifetime = time.Hour
)

type portURLRequest struct {
	ExpiresInSeconds *int64 `json:"expires_in_seconds"`
}

type portURLResponse struct {
	URL       string    `json:"url"`
	Host      string    `json:"host"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// portURL signs a URL for one port of a live sandbox.
func (s *Server) portURL(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.liveSandbox(r)
	if err != nil {
		return err
	}
	if len(s.cfg.ProxySecret) == 0 {
		return pandastack.Errorf(pandastack.EUnavailable, "signed URLs are not configured on this server")
	}
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		return invalid("port must be a number in 1-65535, got %q", r.PathValue("port"))
	}
	var req portURLRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
	}
	life := defaultLifetime
	if req.ExpiresInSeconds != nil {
		if *req.ExpiresInSeconds <= 0 || time.Duration(*req.ExpiresInSeconds)*time.Second > maxURLLifetime {
			return invalid("expires_in_seconds must be between 1 and %d", int64(maxURLLifetime/time.Second))
		}
		life = time.Duration(*req.ExpiresInSeconds) * time.Second
	}
	exp := time.Now().Add(life).Truncate(time.Second)
	tok := router.SignPort(s.cfg.ProxySecret, sb.ID, port, exp)
	host := fmt.Sprintf("%d-%s.%s", port, sb.ID, s.domain())
	hostPort := host
	if _, p, err := net.SplitHostPort(r.Host); err == nil {
		hostPort = net.JoinHostPort(host, p)
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	writeJSON(w, http.StatusOK, portURLResponse{URL: scheme + "://" + hostPort + "/?" + router.TokenParam + "=" + tok,
		Host: host, Token: tok, ExpiresAt: exp.UTC()})
	return nil
}
