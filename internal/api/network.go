package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
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

// Signed port URLs: ?ps_token=EXPIRY.SIG, SIG an HMAC of the sandbox, the
// port and the expiry under the server's proxy secret. The proxy strips it
// and sets it as a cookie for the host, so the page's own requests pass.
const (
	tokenParam      = "ps_token"
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

func (s *Server) signToken(id string, port int, exp time.Time) string {
	m := hmac.New(sha256.New, s.cfg.ProxySecret)
	fmt.Fprintf(m, "%s|%d|%d", id, port, exp.Unix())
	return strconv.FormatInt(exp.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

// validToken checks a ps_token for this sandbox port.
func (s *Server) validToken(tok, id string, port int) bool {
	if len(s.cfg.ProxySecret) == 0 || tok == "" {
		return false
	}
	exp, _, ok := strings.Cut(tok, ".")
	if !ok {
		return false
	}
	sec, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || time.Now().Unix() > sec {
		return false
	}
	return hmac.Equal([]byte(tok), []byte(s.signToken(id, port, time.Unix(sec, 0))))
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
	tok := s.signToken(sb.ID, port, exp)
	host := fmt.Sprintf("%d-%s.%s", port, sb.ID, s.domain())
	hostPort := host
	if _, p, err := net.SplitHostPort(r.Host); err == nil {
		hostPort = net.JoinHostPort(host, p)
	}
	writeJSON(w, http.StatusOK, portURLResponse{URL: "http://" + hostPort + "/?" + tokenParam + "=" + tok,
		Host: host, Token: tok, ExpiresAt: exp.UTC()})
	return nil
}

// proxyAccess decides who may reach a sandbox port: anyone for a public
// port, the holder of a valid signed token, or a key of the owning team.
// It reports the token found (to set as a cookie), and strips it from r.
func (s *Server) proxyAccess(r *http.Request, id string, port int) (tok string, err error) {
	q := r.URL.Query()
	tok = q.Get(tokenParam)
	if tok != "" {
		q.Del(tokenParam)
		r.URL.RawQuery = q.Encode()
	} else if c, cerr := r.Cookie(tokenParam); cerr == nil {
		tok = c.Value
	}
	stripCookie(r, tokenParam)
	sb, gerr := s.cfg.Store.GetSandbox(r.Context(), id)
	if gerr == nil && s.cfg.Network != nil && sb.State.Live() && s.cfg.Network.Policy(sb.ID).PortIsPublic(port) {
		return "", nil
	}
	if tok != "" {
		if gerr == nil && s.validToken(tok, sb.ID, port) {
			return tok, nil
		}
		return "", pandastack.Errorf(pandastack.EUnauthorized, "the signed URL for port %d of %s is invalid or expired", port, id)
	}
	p, err := s.authenticate(r)
	if err != nil {
		return "", err
	}
	if gerr != nil || sb.TeamID != p.key.TeamID {
		return "", pandastack.Errorf(pandastack.ENotFound, "sandbox %s not found", id)
	}
	return "", nil
}

// stripCookie removes one cookie from the request before it is forwarded.
func stripCookie(r *http.Request, name string) {
	cs := r.Cookies()
	r.Header.Del("Cookie")
	for _, c := range cs {
		if c.Name != name {
			r.AddCookie(c)
		}
	}
}
