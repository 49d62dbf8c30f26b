// Package pgrouter carries PostgreSQL client connections, all on one TCP
// port, to the databases behind them (internal/databases). A connection
// names its database by the first label of its TLS SNI name
// (<id>.<domain>) or, for clients that send no SNI, by an endpoint=<id>
// entry in the StartupMessage's options. Both ways into TLS work: the
// classic SSLRequest ('S', then the handshake) and PostgreSQL 17's direct
// SSL (a ClientHello first, ALPN "postgresql" required). TLS ends here with
// a certificate from the server's CA; the database's machine gets the
// StartupMessage in plain text and authenticates the client itself.
//
// Cancel requests (plain text or over TLS) carry no host name: the router
// remembers each session's BackendKeyData and sends a cancel to the
// database whose session it names (cancel.go).
//
// A client that does not ask for TLS, names no database or an unknown one
// gets a PostgreSQL ErrorResponse saying so, never a hang. Databases are
// found in a router.Table (Kind TCP, host <id>.<domain>): the databases
// service registers them.
package pgrouter

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/pandastack/pandastack/internal/router"
)

// Defaults of Config's zero fields.
const (
	// DefaultHandshakeTimeout bounds everything before the database is
	// dialled: the first packet, TLS, the StartupMessage.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultDialTimeout bounds reaching the database, waking its machine
	// from hibernation included.
	DefaultDialTimeout = 2 * time.Minute
)

// ALPN is the protocol name direct-SSL clients must offer.
const ALPN = "postgresql"

// Config configures a Listener.
type Config struct {
	// Table holds the databases' routes: host <id>.<Domain>, Kind TCP.
	Table *router.Table
	// Domain is the parent of every database's host name ("db.example.com").
	Domain string
	// Certs issues the certificates (the server's CA): <id>.<Domain>, and
	// Domain itself for clients that send no SNI.
	Certs            router.Certs
	HandshakeTimeout time.Duration
	DialTimeout      time.Duration
	Logger           *slog.Logger
}

// Listener routes the connections of one TCP listener. Serve runs it;
// Close stops it and every connection.
type Listener struct {
	cfg Config
	log *slog.Logger
	acc *router.Acceptor

	cancel cancelKeys
}

// New returns a Listener routing what ln accepts.
func New(ln net.Listener, cfg Config) *Listener {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	cfg.Domain = router.NormalizeHost(cfg.Domain)
	return &Listener{cfg: cfg, log: cfg.Logger, acc: router.NewAcceptor(ln, "database connection")}
}

// Addr is the listening address.
func (l *Listener) Addr() net.Addr { return l.acc.Addr() }

// Host is the host name of database id.
func Host(id, domain string) string { return id + "." + router.NormalizeHost(domain) }

// Serve accepts until Close; it returns nil after Close.
func (l *Listener) Serve() error { return l.acc.Serve(l.serve) }

// Close stops accepting, closes every connection and waits for them.
func (l *Listener) Close() error { return l.acc.Close() }

// refuse writes a FATAL ErrorResponse and gives up on the connection.
func refuse(w io.Writer, code, message string) {
	_, _ = w.Write(errorResponse(code, message))
}

// serve handles one connection until it ends.
func (l *Listener) serve(c net.Conn) {
	log := l.log.With("remote", c.RemoteAddr().String())
	_ = c.SetDeadline(time.Now().Add(l.cfg.HandshakeTimeout))
	br := bufio.NewReader(c)
	tc, cancelBody, err := l.startTLS(c, br)
	if cancelBody != nil {
		l.forwardCancel(cancelBody, log.Debug)
		return
	}
	if err != nil {
		log.Debug("database router: no TLS", "err", err)
		return
	}
	if err := tc.Handshake(); err != nil {
		log.Debug("database router: TLS handshake failed", "err", err)
		return
	}
	cs := tc.ConnectionState()
	p, err := readPacket(tc)
	if err != nil {
		refuse(tc, stateProtocol, "invalid startup packet")
		return
	}
	if p.code == codeCancel {
		l.forwardCancel(p.body, log.Debug) // an encrypted cancel (libpq 17)
		return
	}
	if p.code>>16 != 3 {
		refuse(tc, stateProtocol, fmt.Sprintf("unsupported frontend protocol %d.%d: the server supports 3.0", p.code>>16, p.code&0xffff))
		return
	}
	st, err := parseStartup(p.body)
	if err != nil {
		refuse(tc, stateProtocol, "invalid startup packet: "+err.Error())
		return
	}
	id, st, err := resolve(cs.ServerName, l.cfg.Domain, st)
	if err != nil {
		refuse(tc, stateUnknownDatabase, err.Error())
		return
	}
	log = log.With("database", id)
	rt, ok := l.cfg.Table.Lookup(Host(id, l.cfg.Domain))
	if !ok || rt.Kind != router.TCP {
		refuse(tc, stateUnknownDatabase, fmt.Sprintf("database %s does not exist", id))
		return
	}
	// Reaching the database may wake it: DialTimeout bounds that, not
	// the handshake's deadline.
	_ = c.SetDeadline(time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.DialTimeout)
	b, err := rt.Backend.Dial(ctx)
	cancel()
	if err != nil {
		log.Info("database router: database unreachable", "err", err)
		refuse(tc, stateUnavailable, fmt.Sprintf("database %s is not reachable now; try again", id))
		return
	}
	defer b.Close()
	if _, err := b.Write(st.encode()); err != nil {
		log.Info("database router: send startup", "err", err)
		refuse(tc, stateUnavailable, fmt.Sprintf("database %s is not reachable now; try again", id))
		return
	}
	var key string
	defer func() {
		if key != "" {
			l.cancel.remove(key)
		}
	}()
	pipe(tc, b, func(dst io.Writer, src net.Conn) {
		relayStartup(dst, src, func(body []byte) {
			key = string(body)
			l.cancel.add(key, rt.Backend)
		})
	})
}

// startTLS reads what comes before TLS and returns the server side of the
// TLS connection (handshake not done yet), or the body of a plain-text
// CancelRequest. Plain-text clients get an ErrorResponse; GSSAPI
// encryption is declined and the next packet read.
func (l *Listener) startTLS(c net.Conn, br *bufio.Reader) (*tls.Conn, []byte, error) {
	first, err := br.Peek(1)
	if err != nil {
		return nil, nil, err
	}
	if first[0] == 0x16 { // a TLS handshake record: direct SSL
		return tls.Server(&bufConn{Conn: c, r: br}, l.tlsConfig(true)), nil, nil
	}
	for range 2 { // GSSENCRequest, then SSLRequest at most
		p, err := readPacket(br)
		if err != nil {
			refuse(c, stateProtocol, "invalid startup packet")
			return nil, nil, err
		}
		switch {
		case p.code == codeSSL && len(p.body) == 0:
			if br.Buffered() > 0 {
				// Bytes sent before our answer would be read as if
				// they came over TLS (CVE-2021-23222's shape).
				return nil, nil, fmt.Errorf("data pipelined after SSLRequest")
			}
			if _, err := c.Write([]byte{sslAccepted}); err != nil {
				return nil, nil, err
			}
			return tls.Server(c, l.tlsConfig(false)), nil, nil
		case p.code == codeGSSEnc && len(p.body) == 0:
			if _, err := c.Write([]byte{gssDeclined}); err != nil {
				return nil, nil, err
			}
		case p.code == codeCancel:
			return nil, p.body, nil
		default:
			refuse(c, stateInvalidAuthSpec, "connection is insecure (try using sslmode=require)")
			return nil, nil, fmt.Errorf("plain-text startup")
		}
	}
	refuse(c, stateProtocol, "expected an SSLRequest")
	return nil, nil, fmt.Errorf("no SSLRequest")
}

// tlsConfig ends TLS with a certificate for the SNI name (Domain's own
// without one, or for a name outside it: the startup then fails with a
// PostgreSQL error). A direct-SSL client must offer ALPN "postgresql".
func (l *Listener) tlsConfig(direct bool) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{ALPN},
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if direct && !offers(hello.SupportedProtos, ALPN) {
				return nil, fmt.Errorf("direct SSL connection without ALPN %q", ALPN)
			}
			return nil, nil
		},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			name := l.cfg.Domain
			if idFromSNI(hello.ServerName, l.cfg.Domain) != "" {
				name = router.NormalizeHost(hello.ServerName)
			}
			return l.cfg.Certs.Certificate(name)
		},
	}
}

func offers(protos []string, want string) bool {
	for _, p := range protos {
		if strings.EqualFold(p, want) {
			return true
		}
	}
	return false
}

// bufConn reads through the buffered reader that peeked at the
// connection's first byte.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// pipe copies both ways until either side ends, then closes both: the
// protocol has no use for a half-closed connection. fromB copies what b
// sends to a (relayStartup, which watches the session's start).
func pipe(a, b net.Conn, fromB func(dst io.Writer, src net.Conn)) {
	done := make(chan struct{}, 2)
	go func() {
		_ = copyLean(b, a)
		done <- struct{}{}
	}()
	go func() {
		fromB(a, b)
		done <- struct{}{}
	}()
	<-done
	a.Close()
	b.Close()
	<-done
}
