package pgrouter

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pandastack/pandastack/internal/ca"
	"github.com/pandastack/pandastack/internal/router"
)

const domain = "db.localhost"

// fakeDatabase is a stand-in for PostgreSQL in a machine (the real one is
// in the e2e tests): it accepts any startup, reports the database it was
// asked for as a ParameterStatus and answers ready.
func fakeDatabase(t *testing.T) (addr string, startups chan map[string]string) {
	addr, startups, _ = fakeDatabaseWithCancels(t)
	return addr, startups
}

// fakeDatabaseWithCancels also reports the CancelRequests it gets.
func fakeDatabaseWithCancels(t *testing.T) (addr string, startups chan map[string]string, cancels chan *pgproto3.CancelRequest) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	startups = make(chan map[string]string, 10)
	cancels = make(chan *pgproto3.CancelRequest, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				be := pgproto3.NewBackend(c, c)
				m, err := be.ReceiveStartupMessage()
				if err != nil {
					return
				}
				if cr, ok := m.(*pgproto3.CancelRequest); ok {
					cancels <- cr
					return
				}
				sm, ok := m.(*pgproto3.StartupMessage)
				if !ok {
					return
				}
				startups <- sm.Parameters
				be.Send(&pgproto3.AuthenticationOk{})
				be.Send(&pgproto3.ParameterStatus{Name: "server_version", Value: "17.0"})
				be.Send(&pgproto3.BackendKeyData{ProcessID: 7, SecretKey: []byte{0, 0, 0, 42}})
				be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
				_ = be.Flush()
				_, _ = be.Receive() // Terminate
			}()
		}
	}()
	return ln.Addr().String(), startups, cancels
}

// startRouter runs a Listener over a real CA with database db-1 routed to
// a fake database.
func startRouter(t *testing.T) (addr string, roots *x509.CertPool, startups chan map[string]string) {
	addr, roots, startups, _ = startRouterWithCancels(t)
	return addr, roots, startups
}

func startRouterWithCancels(t *testing.T) (addr string, roots *x509.CertPool, startups chan map[string]string, cancels chan *pgproto3.CancelRequest) {
	c, err := ca.Open(t.TempDir(), []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	backend, startups, cancels := fakeDatabaseWithCancels(t)
	tbl := router.NewTable()
	if err := tbl.Register(router.Route{Host: Host("db-1", domain), Kind: router.TCP, Backend: router.Addr{Network: "tcp", Address: backend}}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, Config{Table: tbl, Domain: domain, Certs: c, HandshakeTimeout: 5 * time.Second})
	go func() { _ = l.Serve() }()
	t.Cleanup(func() { l.Close() })
	roots = x509.NewCertPool()
	roots.AppendCertsFromPEM(c.CertPEM())
	return ln.Addr().String(), roots, startups, cancels
}

func connect(t *testing.T, addr string, roots *x509.CertPool, connString, sni string, direct bool) (*pgconn.PgConn, error) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	cfg, err := pgconn.ParseConfig(connString + " host=" + host + " port=" + port)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Fallbacks = nil
	if cfg.TLSConfig != nil {
		cfg.TLSConfig = &tls.Config{ServerName: sni, RootCAs: roots}
		if sni == "" {
			cfg.TLSConfig = &tls.Config{InsecureSkipVerify: true} // what sslmode=require does
		}
	}
	if direct {
		cfg.SSLNegotiation = "direct"
		cfg.TLSConfig.NextProtos = []string{ALPN} // as pgconn sets it for sslnegotiation=direct
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return pgconn.ConnectConfig(ctx, cfg)
}

func TestRouterReachesTheDatabaseTheClientNames(t *testing.T) {
	addr, roots, startups := startRouter(t)
	for _, tc := range []struct {
		name, conn, sni string
		direct          bool
	}{
		{"sslrequest with sni", "user=u dbname=app sslmode=require", "db-1.db.localhost", false},
		{"direct ssl with sni and alpn", "user=u dbname=app sslmode=require", "db-1.db.localhost", true},
		{"no sni, endpoint in options", "user=u dbname=app sslmode=require options=endpoint=db-1", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := connect(t, addr, roots, tc.conn, tc.sni, tc.direct)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer pc.Close(context.Background())
			got := <-startups
			if got["user"] != "u" || got["database"] != "app" {
				t.Fatalf("database got startup %v", got)
			}
			if _, ok := got["options"]; ok {
				t.Fatalf("the endpoint option reached the database: %v", got)
			}
			if pc.ParameterStatus("server_version") != "17.0" {
				t.Fatal("no parameter status from the database")
			}
		})
	}
}

func TestRouterRefusesWithPostgreSQLErrors(t *testing.T) {
	addr, roots, _ := startRouter(t)
	for _, tc := range []struct {
		name, conn, sni, want string
	}{
		{"plain text", "user=u dbname=app sslmode=disable", "", "connection is insecure (try using sslmode=require)"},
		{"unknown database by sni", "user=u dbname=app sslmode=require", "db-9.db.localhost", "database db-9 does not exist"},
		{"unknown database by options", "user=u dbname=app sslmode=require options=endpoint=db-9", "", "database db-9 does not exist"},
		{"no database named", "user=u dbname=app sslmode=require", "", "no database named"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := connect(t, addr, roots, tc.conn, tc.sni, false)
			if err == nil {
				pc.Close(context.Background())
				t.Fatal("connected")
			}
			var pgErr *pgconn.PgError
			if !strings.Contains(err.Error(), tc.want) || !errorsAs(err, &pgErr) || pgErr.Severity != "FATAL" {
				t.Fatalf("error %v; want a FATAL PostgreSQL error saying %q", err, tc.want)
			}
		})
	}
}

func TestDirectSSLWithoutALPNIsRefused(t *testing.T) {
	addr, roots, _ := startRouter(t)
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "db-1.db.localhost", RootCAs: roots})
	if err == nil {
		c.Close()
		t.Fatal("a direct TLS connection without ALPN postgresql was accepted")
	}
}

// A cancel request, which names no host, reaches the database whose
// session has its key: the router learnt it from BackendKeyData.
func TestCancelRequestReachesTheSessionsDatabase(t *testing.T) {
	addr, roots, startups, cancels := startRouterWithCancels(t)
	pc, err := connect(t, addr, roots, "user=u dbname=app sslmode=require", "db-1.db.localhost", false)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(context.Background())
	<-startups
	if pc.PID() != 7 {
		t.Fatalf("client got pid %d: BackendKeyData did not pass through", pc.PID())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pc.CancelRequest(ctx); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	select {
	case cr := <-cancels:
		if cr.ProcessID != 7 || string(cr.SecretKey) != "\x00\x00\x00\x2a" {
			t.Fatalf("database got cancel %+v", cr)
		}
	case <-ctx.Done():
		t.Fatal("the cancel request never reached the database")
	}
}
