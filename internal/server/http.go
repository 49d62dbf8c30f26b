package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/pandastack/pandastack/internal/ca"
	"github.com/pandastack/pandastack/internal/router"
)

// Limits of the HTTP server. Headers are tenant-controlled (proxied
// requests carry any header), so they are bounded; bodies are bounded by
// the API's per-request read deadline, which streaming uploads lift.
const (
	// DefaultMaxConnsPerClient caps the connections one client address
	// holds at once, on each listener.
	DefaultMaxConnsPerClient = 256
	readHeaderTimeout        = 10 * time.Second
	idleTimeout              = 2 * time.Minute
	maxHeaderBytes           = 64 << 10
)

// httpLimits are the HTTP server's timeouts and sizes (tests shrink them).
type httpLimits struct {
	ReadHeader, Idle time.Duration
	MaxHeaderBytes   int
}

var defaultLimits = httpLimits{ReadHeader: readHeaderTimeout, Idle: idleTimeout, MaxHeaderBytes: maxHeaderBytes}

// newHTTPServer returns the http.Server for h with lim. There is no
// server-wide ReadTimeout or WriteTimeout: exec streams, file transfers
// and WebSockets last as long as they need; the API bounds each request's
// body read instead (api.Config.BodyReadTimeout).
func newHTTPServer(h http.Handler, lim httpLimits, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.ReadHeader,
		IdleTimeout:       lim.Idle,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}

// openCA loads or makes the server's CA under DATA/ca, for the sandbox
// domain. A CA made for another domain is an error only when the TLS
// listener needs it.
func (s *Server) openCA() error {
	c, err := ca.Open(filepath.Join(s.cfg.DataDir, "ca"), []string{s.domain()})
	if err != nil {
		if s.cfg.TLSListen != "" || s.cfg.DBListen != "" {
			return err
		}
		s.log.Warn("certificate authority unavailable", "err", err)
		return nil
	}
	s.ca = c
	s.log.Info("certificate authority", "cert", c.CertPath())
	return nil
}

func (s *Server) domain() string {
	if s.cfg.SandboxDomain == "" {
		return "localhost"
	}
	return router.NormalizeHost(s.cfg.SandboxDomain)
}

// caPEM is the CA certificate the API serves (nil without a CA).
func (s *Server) caPEM() []byte {
	if s.ca == nil {
		return nil
	}
	return s.ca.CertPEM()
}

// serveTLS runs the SNI listener on cfg.TLSListen: HTTP names (the domain
// itself, sandbox ports, registered HTTP routes) are terminated and served
// by h; registered TCP routes go to their backends. It returns a stop
// function, after which nothing of it runs.
func (s *Server) serveTLS(h http.Handler) (addr string, stop func(), err error) {
	tcp, err := net.Listen("tcp", s.cfg.TLSListen)
	if err != nil {
		return "", nil, fmt.Errorf("listen --tls-listen: %w", err)
	}
	httpLn := router.NewConnListener(tcp.Addr())
	srv := newHTTPServer(h, defaultLimits, s.log)
	domain := s.domain()
	tln := router.NewTLS(router.LimitPerClient(tcp, s.maxConnsPerClient()), router.TLSConfig{
		Table:     s.routes,
		HTTPHost:  func(name string) bool { return name == domain || s.hosts.Owns(name) },
		ServeHTTP: func(c *tls.Conn) { httpLn.Put(c) },
		Certs:     s.ca,
		Logger:    s.log,
	})
	go func() { _ = srv.Serve(httpLn) }()
	go func() {
		if err := tln.Serve(); err != nil {
			s.log.Error("tls listener stopped", "err", err)
		}
	}()
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
		_ = tln.Close()
	}
	return tcp.Addr().String(), stop, nil
}

func (s *Server) maxConnsPerClient() int {
	if s.cfg.MaxConnsPerClient < 0 {
		return 0
	}
	if s.cfg.MaxConnsPerClient == 0 {
		return DefaultMaxConnsPerClient
	}
	return s.cfg.MaxConnsPerClient
}
