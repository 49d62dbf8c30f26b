package api

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

	"github.com/pandastack/pandastack"
)

// sandboxHost matches PORT-SANDBOXID. at the start of a Host header.
var sandboxHost = regexp.MustCompile(`^([0-9]{1,6})-(sbx_[0-9a-f]{1,64})$`)

// proxyTarget parses a Host header of the form PORT-ID.DOMAIN[:port]. ok is
// false for hosts outside the sandbox domain (the API's own).
func (s *Server) proxyTarget(host string) (port int, id string, ok bool, err error) {
	domain := s.cfg.SandboxDomain
	if domain == "" {
		domain = "localhost"
	}
	if h, _, splitErr := net.SplitHostPort(host); splitErr == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	label, found := strings.CutSuffix(host, "."+domain)
	if !found || strings.Contains(label, ".") {
		return 0, "", false, nil
	}
	m := sandboxHost.FindStringSubmatch(label)
	if m == nil {
		return 0, "", true, invalid("host %q is not PORT-SANDBOXID.%s", host, domain)
	}
	port, _ = strconv.Atoi(m[1])
	if port < 1 || port > 65535 {
		return 0, "", true, invalid("port %d is outside 1-65535", port)
	}
	return port, m[2], true, nil
}

// withProxy sends requests for sandbox hosts to the sandbox, the rest to the
// API.
func (s *Server) withProxy(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		port, id, ok, err := s.proxyTarget(r.Host)
		if !ok {
			api.ServeHTTP(w, r)
			return
		}
		if err == nil {
			err = s.proxy(w, r, port, id)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	})
}

// proxy forwards one request (HTTP, streamed, or a WebSocket upgrade) to a
// port inside the sandbox, through its guest agent.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, port int, id string) error {
	tok, err := s.proxyAccess(r, id, port)
	if err != nil {
		return err
	}
	g, err := s.cfg.Engine.Guest(r.Context(), id)
	if err != nil {
		return err
	}
	// Connect first, so a closed port answers a clear error before any
	// proxying starts.
	conn, err := g.DialPort(r.Context(), port)
	if err != nil {
		return err
	}
	// The first dial gets conn; one the proxy never used is closed (an
	// open port connection keeps the sandbox busy, see auto-hibernate).
	var used atomic.Bool
	defer func() {
		if used.CompareAndSwap(false, true) {
			conn.Close()
		}
	}()
	noWriteDeadline(w)
	if tok != "" && r.URL.Query().Get(tokenParam) == "" {
		// The page's own requests carry no token: let the browser keep it.
		http.SetCookie(w, &http.Cookie{Name: tokenParam, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			pr.Out.Host = r.Host
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("X-API-Key")
			pr.SetXForwarded()
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				if used.CompareAndSwap(false, true) {
					return conn, nil
				}
				return g.DialPort(ctx, port)
			},
			DisableKeepAlives: true,
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			code := pandastack.EUnavailable
			if errors.Is(err, context.Canceled) {
				return
			}
			if pandastack.ErrorCode(err) == pandastack.ERefused {
				code = pandastack.ERefused
			}
			s.writeError(w, r, &pandastack.Error{Code: code, Message: fmt.Sprintf("proxy to port %d of %s failed", port, id), Err: err})
		},
	}
	rp.ServeHTTP(w, r)
	return nil
}
