package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// serverQuery runs sql on d through server s's database router (TLS
// verified against s's CA, SNI naming d) and returns the first column of
// a select's row.
func serverQuery(t *testing.T, s *serverProc, d *sdk.Database, sql string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(d.ConnectionURI)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(filepath.Join(s.dataDir, "ca", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	cfg.Fallbacks = nil
	cfg.TLSConfig = &tls.Config{ServerName: d.Host, RootCAs: roots}
	cfg.LookupFunc = func(context.Context, string) ([]string, error) { return []string{d.Host}, nil }
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "tcp", s.dbAddr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect to %s: %v\n%s", d.Name, err, s.tail())
	}
	defer conn.Close(context.Background())
	if !strings.HasPrefix(sql, "select") {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s on %s: %v", sql, d.Name, err)
		}
		return ""
	}
	var out string
	if err := conn.QueryRow(ctx, sql).Scan(&out); err != nil {
		t.Fatalf("%s on %s: %v", sql, d.Name, err)
	}
	return out
}

// TestDatabasesServerCrash: the server is killed with SIGKILL while it
// runs two databases, and one's VM dies while it is down. The restarted
// server re-attaches the first (same machine, its data) and restarts
// the second from its volume at start, with every committed row.
func TestDatabasesServerCrash(t *testing.T) {
	ctx := context.Background()
	s, dir := newTestServer(t, "ps-e2e-dbcrash-")
	defer func() { s.stop() }()
	admin := s.client(s.admin)
	if _, err := admin.BuildTemplate(ctx, "postgres", nil); err != nil {
		t.Fatalf("build postgres: %v\n%s", err, s.tail())
	}
	k, err := admin.CreateKey(ctx, "crash", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	c := s.client(k.Key)
	var dbs []*sdk.Database
	for _, name := range []string{"kept", "lost"} {
		d, err := c.CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: name})
		if err != nil {
			t.Fatalf("create %s: %v\n%s", name, err, s.tail())
		}
		serverQuery(t, s, d, "create table t as select g as x from generate_series(1, 1000) g")
		dbs = append(dbs, d)
	}
	kept, lost := dbs[0], dbs[1]
	defer func() {
		for _, d := range dbs {
			if err := s.client(k.Key).DeleteDatabase(context.Background(), d.ID); err != nil {
				t.Errorf("delete %s: %v", d.Name, err)
			}
		}
	}()

	s.crash()
	pid := vmPID(dir, lost.MachineID)
	if !qemuRunning(pid) {
		t.Fatalf("no QEMU for %s's machine %s after the crash", lost.Name, lost.MachineID)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	restarted, err := startServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	s = restarted
	c = s.client(k.Key)

	g, err := c.GetDatabase(ctx, kept.ID)
	if err != nil || g.State != "running" || g.MachineID != kept.MachineID || g.Password != kept.Password {
		t.Fatalf("%s after the crash: %+v %v (machine was %s)", kept.Name, g, err, kept.MachineID)
	}
	if got := serverQuery(t, s, g, "select sum(x)::text from t"); got != "500500" {
		t.Fatalf("%s's rows after the crash: %q", kept.Name, got)
	}
	var l *sdk.Database
	eventually(t, 5*time.Minute, lost.Name+" restarted from its volume", func() bool {
		l, err = c.GetDatabase(ctx, lost.ID)
		return err == nil && l.State == "running" && l.MachineID != lost.MachineID
	})
	if got := serverQuery(t, s, l, "select sum(x)::text from t"); got != "500500" {
		t.Fatalf("%s's rows after its restart: %q", lost.Name, got)
	}
	if old, err := c.GetSandbox(ctx, lost.MachineID); err != nil || old.Live() {
		t.Fatalf("%s's lost machine: %+v %v", lost.Name, old, err)
	}
}
