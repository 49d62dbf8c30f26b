package router

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/pandastack/pandastack"
)

// handshakeTimeout bounds reading a preamble and the ClientHello, and the
// TLS handshake, of each connection.
const handshakeTimeout = 10 * time.Second

// Certs issues a certificate for a hostname (the server's CA, internal/ca).
type Certs interface {
	Certificate(name string) (*tls.Certificate, error)
}

// Preamble lets a protocol that speaks before TLS share the listener:
// PostgreSQL clients send an SSLRequest and wait for 'S' before their
// ClientHello. Answer peeks at the first bytes of a connection and, when
// they are its protocol's, consumes them and answers; it reports whether it
// did. Direct TLS (a first byte 0x16) never reaches a Preamble.
type Preamble func(br *bufio.Reader, c net.Conn) (handled bool, err error)

// TLSConfig configures the SNI listener.
type TLSConfig struct {
	// Table holds the routes by hostname.
	Table *Table
	// HTTPHost reports whether a name not in Table is served over HTTP
	// (sandbox ports, the API's own name); nil: none.
	HTTPHost func(name string) bool
	// ServeHTTP takes a terminated connection of an HTTP name (or of an
	// HTTP route) and serves it; nil: HTTP names are refused.
	ServeHTTP func(c *tls.Conn)
	// Certs issues the certificates of terminated names.
	Certs Certs
	// Preambles are tried, in order, on connections that do not start
	// with a TLS record.
	Preambles []Preamble
	Logger    *slog.Logger
}

// TLSListener accepts TCP connections and routes each by the SNI name of
// its ClientHello: terminated with a certificate from Certs, or passed
// through. A name with no route gets an unrecognized_name alert.
type TLSListener struct {
	cfg TLSConfig
	log *slog.Logger
	acc *Acceptor
}

// NewTLS returns a listener routing the connections ln accepts.
func NewTLS(ln net.Listener, cfg TLSConfig) *TLSListener {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &TLSListener{cfg: cfg, log: cfg.Logger, acc: NewAcceptor(ln, "TLS connection")}
}

// Addr is the listening address.
func (l *TLSListener) Addr() net.Addr { return l.acc.Addr() }

// Serve accepts until Close; it returns nil after Close.
func (l *TLSListener) Serve() error { return l.acc.Serve(l.serve) }

// Close stops accepting, closes every connection and waits for them.
func (l *TLSListener) Close() error { return l.acc.Close() }

// serve routes one connection. It returns when the connection is done
// (an HTTP connection is handed to ServeHTTP and done when it closes).
func (l *TLSListener) serve(c net.Conn) {
	log := l.log.With("remote", c.RemoteAddr().String())
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	if first[0] != recordTypeHandshake {
		handled := false
		for _, p := range l.cfg.Preambles {
			if handled, err = p(br, c); handled || err != nil {
				break
			}
		}
		if err != nil || !handled {
			log.Debug("tls listener: not TLS and no preamble matched", "err", err)
			return
		}
	}
	var rec bytes.Buffer
	hello, err := readClientHello(io.TeeReader(br, &rec))
	if err != nil {
		log.Debug("tls listener: no ClientHello", "err", err)
		return
	}
	// What follows reads the recorded ClientHello again, then the rest.
	conn := &replayConn{Conn: c, r: io.MultiReader(&rec, br)}
	name := NormalizeHost(hello.ServerName)
	rt, ok := l.cfg.Table.Lookup(name)
	switch {
	case ok && rt.TLS == Passthrough:
		l.passthrough(conn, rt, log.With("sni", name))
	case ok && rt.Kind == TCP:
		l.terminateTCP(conn, rt, log.With("sni", name))
	case (ok && rt.Kind == HTTP) || (name != "" && l.cfg.HTTPHost != nil && l.cfg.HTTPHost(name)):
		l.terminateHTTP(conn, name, log.With("sni", name))
	default:
		log.Debug("tls listener: no route", "sni", name)
		// A fatal unrecognized_name alert: the client says why it failed.
		_, _ = c.Write([]byte{recordTypeAlert, 3, 3, 0, 2, alertFatal, alertUnrecognizedName})
	}
}

// TLS record and alert bytes (RFC 8446 §5.1, §6).
const (
	recordTypeAlert       = 21
	recordTypeHandshake   = 22
	alertFatal            = 2
	alertUnrecognizedName = 112
)

// serverConfig terminates TLS for name with a certificate from Certs.
func (l *TLSListener) serverConfig(name string, alpn []string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: alpn,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return l.cfg.Certs.Certificate(name)
		},
	}
}

func (l *TLSListener) handshake(c net.Conn, name string, alpn []string, log *slog.Logger) (*tls.Conn, bool) {
	tc := tls.Server(c, l.serverConfig(name, alpn))
	if err := tc.Handshake(); err != nil {
		log.Debug("tls listener: handshake failed", "err", err)
		return nil, false
	}
	_ = c.SetDeadline(time.Time{})
	return tc, true
}

// terminateHTTP ends TLS and hands the connection to the HTTP server, which
// sees it as TLS (r.TLS set). It waits until the connection is closed.
func (l *TLSListener) terminateHTTP(c *replayConn, name string, log *slog.Logger) {
	if l.cfg.ServeHTTP == nil {
		return
	}
	done := make(chan struct{})
	c.onClose = func() { close(done) }
	tc, ok := l.handshake(c, name, []string{"http/1.1"}, log)
	if !ok {
		return
	}
	l.cfg.ServeHTTP(tc)
	<-done
}

// terminateTCP ends TLS and carries the plaintext to the route's backend.
func (l *TLSListener) terminateTCP(c net.Conn, rt Route, log *slog.Logger) {
	tc, ok := l.handshake(c, rt.Host, rt.ALPN, log)
	if !ok {
		return
	}
	defer tc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	b, err := rt.Backend.Dial(ctx)
	cancel()
	if err != nil {
		log.Info("tls listener: backend unreachable", "err", err, "refused", pandastack.ErrorCode(err) == pandastack.ERefused)
		return
	}
	pipe(tc, b)
}

// passthrough carries the connection, ClientHello included, to the backend.
func (l *TLSListener) passthrough(c net.Conn, rt Route, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	b, err := rt.Backend.Dial(ctx)
	cancel()
	if err != nil {
		log.Info("tls listener: backend unreachable", "err", err)
		// handshake_failure: the client learns the route is down.
		_, _ = c.Write([]byte{recordTypeAlert, 3, 3, 0, 2, alertFatal, 40})
		return
	}
	_ = c.SetDeadline(time.Time{})
	pipe(c, b)
}
