package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// psqlRun runs the host's psql (Debian's postgresql-client) against the
// suite server's database router: host gives libpq the SNI name,
// hostaddr the router's address. It returns stdout, stderr and whether
// psql succeeded.
func psqlRun(t *testing.T, conninfo, password, sql string) (string, string, bool) {
	t.Helper()
	host, port, _ := net.SplitHostPort(main.dbAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
		"-d", conninfo+" hostaddr="+host+" port="+port+" connect_timeout=120", "-c", sql)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password, "PGCONNECT_TIMEOUT=120")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return strings.TrimSpace(out.String()), errb.String(), err == nil
}

// mustPsql runs sql as the database's tenant through the router with
// sslmode=verify-full against the server's CA, and returns its output.
func mustPsql(t *testing.T, d *sdk.Database, sql string) string {
	t.Helper()
	conninfo := "host=" + d.Host + " user=" + d.User + " dbname=" + d.Database +
		" sslmode=verify-full sslrootcert=" + filepath.Join(main.dataDir, "ca", "ca.pem")
	out, stderr, ok := psqlRun(t, conninfo, d.Password, sql)
	if !ok {
		t.Fatalf("psql %q: %s", sql, stderr)
	}
	return out
}

// pgxConfig is d's connection URI for pgx, dialled at the router; sni
// false connects by IP (no SNI), so options=endpoint must name it.
func pgxConfig(t *testing.T, d *sdk.Database, extra string) *pgx.ConnConfig {
	t.Helper()
	return pgxConfigFor(t, d.ConnectionURI+extra, d.Host)
}

// pgxConfigFor is uri for pgx, dialled at the router with SNI host.
func pgxConfigFor(t *testing.T, uri, host string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(uri)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(filepath.Join(main.dataDir, "ca", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	next := cfg.TLSConfig.NextProtos // direct SSL's ALPN, set by pgx
	cfg.TLSConfig = &tls.Config{ServerName: host, RootCAs: roots, NextProtos: next}
	cfg.LookupFunc = func(context.Context, string) ([]string, error) { return []string{host}, nil }
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "tcp", main.dbAddr)
	}
	cfg.Fallbacks = nil
	return cfg
}

func pgxQuery(t *testing.T, cfg *pgx.ConnConfig, sql string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var s string
	err = conn.QueryRow(ctx, sql).Scan(&s)
	return s, err
}

// TestDatabases: a team creates a database and reaches it through the
// router with psql and pgx; its role is no superuser but creates pgvector;
// bad credentials, unknown names and plain text are refused with
// PostgreSQL errors; names are unique per team and another team sees
// nothing; hibernation keeps the data and a connection wakes it; its
// data lives on a volume of its own, so a SIGKILL of its QEMU during
// pgbench loses no committed transaction (the next connection restarts
// it from the volume); delete frees the machine, the volume and the
// route.
func TestDatabases(t *testing.T) {
	needTemplate(t, "postgres")
	ctx := context.Background()
	c := teamClient(t, "db-owner")
	other := teamClient(t, "db-other")

	t0 := time.Now()
	d, err := c.CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: "orders"})
	if err != nil {
		t.Fatalf("create database: %v\n%s", err, main.tail())
	}
	t.Logf("create answered in %v (first query through the router included)", time.Since(t0))
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			_ = c.DeleteDatabase(context.Background(), d.ID)
		}
	})
	_, port, _ := net.SplitHostPort(main.dbAddr)
	if d.State != "running" || d.Host != d.ID+".db.localhost" || d.User != "orders_owner" || d.Database != "orders" ||
		d.Password == "" || !strings.HasSuffix(main.dbAddr, ":"+strconv.Itoa(d.Port)) {
		t.Fatalf("created %+v (router %s)", d, main.dbAddr)
	}
	if want := "postgres://orders_owner:" + d.Password + "@" + d.Host + ":" + port + "/orders?sslmode=require"; d.ConnectionURI != want {
		t.Fatalf("connection_uri %s, want %s", d.ConnectionURI, want)
	}
	if d.HTTPURL != main.url+"/sql" {
		t.Fatalf("http_url %s, want %s/sql", d.HTTPURL, main.url)
	}
	pooledHost := d.ID + "-pooler.db.localhost"
	if want := "postgres://orders_owner:" + d.Password + "@" + pooledHost + ":" + port + "/orders?sslmode=require"; d.PooledConnectionURI != want {
		t.Fatalf("pooled_connection_uri %s, want %s", d.PooledConnectionURI, want)
	}

	t.Run("its data lives on a volume of its own", func(t *testing.T) {
		checkDataOnVolume(t, c, d)
	})
	t.Run("psql through the router, verify-full", func(t *testing.T) {
		if got := mustPsql(t, d, "select current_user || ' ' || current_database() || ' ' || (select rolsuper from pg_roles where rolname = current_user)"); got != "orders_owner orders false" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("extensions as the tenant role", func(t *testing.T) {
		got := mustPsql(t, d, "create extension vector; create extension pg_trgm; create extension pgcrypto; "+
			"create table items (id int primary key, embedding vector(3)); "+
			"insert into items values (1, '[1,2,3]'), (2, '[3,1,2]'); "+
			"select id from items order by embedding <-> '[3,1,2]' limit 1")
		if got != "2" {
			t.Fatalf("nearest neighbour %q", got)
		}
	})
	t.Run("pgx by sni, by options and by direct ssl", func(t *testing.T) {
		for name, extra := range map[string]string{"sni": "", "direct ssl": "&sslnegotiation=direct"} {
			if got, err := pgxQuery(t, pgxConfig(t, d, extra), "select current_database()"); err != nil || got != "orders" {
				t.Fatalf("%s: %q %v", name, got, err)
			}
		}
		// An IP address as host: no SNI, so the options name the database.
		cfg, err := pgx.ParseConfig("postgres://" + d.User + ":" + d.Password + "@" + main.dbAddr + "/orders?sslmode=require&options=endpoint%3D" + d.ID)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Fallbacks = nil
		if got, err := pgxQuery(t, cfg, "select count(*)::text from items"); err != nil || got != "2" {
			t.Fatalf("options=endpoint: %q %v", got, err)
		}
	})
	t.Run("pooled: two clients share one server session (transaction pooling)", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		var pids []uint32
		for range 2 {
			conn, err := pgx.ConnectConfig(ctx, pgxConfigFor(t, d.PooledConnectionURI, pooledHost))
			if err != nil {
				t.Fatalf("connect through the pooler: %v", err)
			}
			defer conn.Close(context.Background())
			var pid uint32
			if err := conn.QueryRow(ctx, "select pg_backend_pid()").Scan(&pid); err != nil {
				t.Fatal(err)
			}
			pids = append(pids, pid)
		}
		if pids[0] != pids[1] {
			t.Fatalf("two open pooled clients ran on backends %v: not pooled", pids)
		}
		direct, err := pgx.ConnectConfig(ctx, pgxConfig(t, d, ""))
		if err != nil {
			t.Fatal(err)
		}
		defer direct.Close(context.Background())
		var pid uint32
		if err := direct.QueryRow(ctx, "select pg_backend_pid()").Scan(&pid); err != nil || pid == pids[0] {
			t.Fatalf("direct connection on backend %d (%v), pooled on %d", pid, err, pids[0])
		}
	})
	t.Run("cancel request reaches the database", func(t *testing.T) {
		conn, err := pgx.ConnectConfig(ctx, pgxConfig(t, d, ""))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		// A CancelRequest on a new connection, plain text and without a
		// host name, as pgx sends it.
		watcher, err := pgx.ConnectConfig(ctx, pgxConfig(t, d, ""))
		if err != nil {
			t.Fatal(err)
		}
		defer watcher.Close(context.Background())
		qctx, stop := context.WithTimeout(ctx, 2*time.Minute)
		defer stop()
		cancelled := make(chan error, 1)
		go func() {
			// Once the query runs (no sleep: wait for the condition).
			for {
				var n int
				if err := watcher.QueryRow(qctx, "select count(*) from pg_stat_activity where state = 'active' and query = 'select pg_sleep(600)'").Scan(&n); err != nil {
					cancelled <- err
					return
				}
				if n == 1 {
					break
				}
			}
			cancelled <- conn.PgConn().CancelRequest(qctx)
		}()
		_, err = conn.Exec(qctx, "select pg_sleep(600)")
		if cerr := <-cancelled; cerr != nil {
			t.Fatalf("send cancel: %v", cerr)
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
			t.Fatalf("cancelled query: %v; want 57014 canceling statement due to user request", err)
		}
	})
	t.Run("refusals are PostgreSQL errors", func(t *testing.T) {
		for _, tc := range []struct{ name, conninfo, password, want string }{
			{"wrong password", "host=" + d.Host + " user=orders_owner dbname=orders sslmode=require", "not-the-password", `password authentication failed for user "orders_owner"`},
			{"unknown database", "host=db-00000000000000000000.db.localhost user=orders_owner dbname=orders sslmode=require", d.Password, "database db-00000000000000000000 does not exist"},
			{"plain text", "host=" + d.Host + " user=orders_owner dbname=orders sslmode=disable", d.Password, "connection is insecure (try using sslmode=require)"},
		} {
			_, stderr, ok := psqlRun(t, tc.conninfo, tc.password, "select 1")
			if ok || !strings.Contains(stderr, tc.want) {
				t.Errorf("%s: ok=%v stderr %q; want an error saying %q", tc.name, ok, stderr, tc.want)
			}
		}
	})
	t.Run("sql over http, Neon's wire", func(t *testing.T) {
		post := func(uri string, headers map[string]string, body string) (int, sqlResult) {
			t.Helper()
			return sqlPost(t, d.HTTPURL, uri, headers, body)
		}
		status, r := post(d.ConnectionURI, nil, `{"query": "select $1::int + 1 as n, null::text as z", "params": ["41"]}`)
		if status != 200 || r.Command != "SELECT" || r.RowCount == nil || *r.RowCount != 1 || !r.RowAsArray ||
			len(r.Fields) != 2 || r.Fields[0].Name != "n" || r.Fields[0].DataTypeID != 23 ||
			len(r.Rows) != 1 || *r.Rows[0][0] != "42" || r.Rows[0][1] != nil {
			t.Fatalf("single query: %d %+v", status, r)
		}
		status, r = post(d.ConnectionURI, map[string]string{"Neon-Batch-Isolation-Level": "Serializable"},
			`{"queries": [{"query": "create table http_t (x int)"}, {"query": "insert into http_t values ($1), ($2)", "params": [1, "2"]}, {"query": "select sum(x) from http_t"}]}`)
		if status != 200 || len(r.Results) != 3 || r.Results[1].Command != "INSERT" || *r.Results[1].RowCount != 2 || *r.Results[2].Rows[0][0] != "3" {
			t.Fatalf("batch: %d %+v", status, r)
		}
		// A failing batch rolls back what it did before the failure.
		status, r = post(d.ConnectionURI, nil, `{"queries": [{"query": "insert into http_t values (10)"}, {"query": "select 1/0"}]}`)
		if status != 400 || r.Code != "22012" || !strings.Contains(r.Message, "division by zero") {
			t.Fatalf("failing batch: %d %+v", status, r)
		}
		if _, r = post(d.ConnectionURI, nil, `{"query": "select count(*) from http_t"}`); *r.Rows[0][0] != "2" {
			t.Fatalf("the failed batch left rows: %+v", r)
		}
		if status, r = post(d.ConnectionURI, nil, `{"query": "select * from no_such_table"}`); status != 400 || r.Code != "42P01" {
			t.Fatalf("sql error: %d %+v", status, r)
		}
		// Sessions are pooled now: a wrong password is still PostgreSQL's
		// to refuse, and does not spoil the right one's pool.
		bad := strings.Replace(d.ConnectionURI, d.Password, "not-the-password", 1)
		if status, r = post(bad, nil, `{"query": "select 1"}`); status != 400 || r.Code != "28P01" {
			t.Fatalf("wrong password after pooled successes: %d %+v", status, r)
		}
		if status, r = post(d.ConnectionURI, nil, `{"query": "select 1"}`); status != 200 {
			t.Fatalf("the right password after a wrong one: %d %+v", status, r)
		}
		checkSQLSessionsReset(t, d)
		checkSQLSessionCap(t, d)
		unknown := strings.Replace(d.ConnectionURI, d.ID, "db-00000000000000000000", 1)
		if status, r = post(unknown, nil, `{"query": "select 1"}`); status != 400 || !strings.Contains(r.Message, "does not exist") {
			t.Fatalf("unknown database: %d %+v", status, r)
		}
	})
	t.Run("sql over http, the stock @neondatabase/serverless driver", func(t *testing.T) {
		dir := t.TempDir()
		script := `import { neon, neonConfig } from '@neondatabase/serverless';
neonConfig.fetchEndpoint = process.env.SQL_URL;
const sql = neon(process.env.DB_URL);
const rows = await sql` + "`select ${41}::int + 1 as n, now() is not null as ok`" + `;
const [a, b] = await sql.transaction([sql` + "`select 1 as one`" + `, sql` + "`select 'x'::text as s`" + `]);
let code = '';
try { await sql` + "`select * from no_such_table`" + `; } catch (e) { code = e.code; }
console.log(JSON.stringify({ n: rows[0].n, ok: rows[0].ok, one: a[0].one, s: b[0].s, code }));
`
		if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"type": "module"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "neon.mjs"), []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		install := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--silent", "@neondatabase/serverless@1.2.0")
		install.Dir = dir
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("npm install @neondatabase/serverless: %v\n%s", err, out)
		}
		node := exec.CommandContext(ctx, "node", "neon.mjs")
		node.Dir = dir
		node.Env = append(os.Environ(), "SQL_URL="+d.HTTPURL, "DB_URL="+d.ConnectionURI)
		out, err := node.CombinedOutput()
		if err != nil {
			t.Fatalf("node: %v\n%s", err, out)
		}
		if got, want := strings.TrimSpace(string(out)), `{"n":42,"ok":true,"one":1,"s":"x","code":"42P01"}`; got != want {
			t.Fatalf("driver printed %s, want %s", got, want)
		}
	})
	t.Run("names are unique per team; another team sees nothing", func(t *testing.T) {
		if _, err := c.CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: "orders"}); !errors.Is(err, sdk.ErrConflict) {
			t.Fatalf("same name again: %v, want conflict", err)
		}
		if _, err := other.GetDatabase(ctx, d.ID); !errors.Is(err, sdk.ErrNotFound) {
			t.Fatalf("another team's get: %v, want not found", err)
		}
		if _, err := other.HibernateDatabase(ctx, d.ID); !errors.Is(err, sdk.ErrNotFound) {
			t.Fatalf("another team's hibernate: %v, want not found", err)
		}
		if err := other.DeleteDatabase(ctx, d.ID); !errors.Is(err, sdk.ErrNotFound) {
			t.Fatalf("another team's delete: %v, want not found", err)
		}
		if list, err := other.ListDatabases(ctx); err != nil || len(list) != 0 {
			t.Fatalf("another team's list: %v %v", list, err)
		}
		list, err := c.ListDatabases(ctx)
		if err != nil || len(list) != 1 || list[0].ID != d.ID || list[0].Password != "" || list[0].ConnectionURI != "" {
			t.Fatalf("own list (no credentials): %+v %v", list, err)
		}
		if _, err := c.CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: "Bad Name"}); !errors.Is(err, sdk.ErrInvalid) {
			t.Fatalf("bad name: %v, want invalid_argument", err)
		}
	})
	t.Run("over the team's service-machine quota: 429, nothing left behind", func(t *testing.T) {
		one := 1
		if _, err := main.client(main.admin).SetTeamQuotas(ctx, "db-owner", sdk.QuotaUpdate{MaxServiceMachines: &one}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: "second"}); !errors.Is(err, sdk.ErrQuotaExceeded) {
			t.Fatalf("a second database over max_service_machines 1: %v, want quota_exceeded", err)
		}
		if list, err := c.ListDatabases(ctx); err != nil || len(list) != 1 {
			t.Fatalf("after the refused create: %+v %v", list, err)
		}
		if _, err := c.GetDatabase(ctx, "second"); !errors.Is(err, sdk.ErrNotFound) {
			t.Fatalf("the refused database has a record: %v", err)
		}
		if vols, err := c.ListVolumes(ctx); err != nil || len(vols) != 1 || vols[0].ID != d.VolumeID {
			t.Fatalf("the refused database left a volume: %+v %v", vols, err)
		}
	})
	t.Run("scale to zero: with no connection it hibernates, a connection wakes it", func(t *testing.T) {
		s, err := other.CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: "sleepy", AutoHibernateSeconds: 2})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		t.Cleanup(func() { _ = other.DeleteDatabase(context.Background(), s.ID) })
		if s.AutoHibernateSeconds != 2 {
			t.Fatalf("created %+v", s)
		}
		mustPsql(t, s, "create table kept (x int); insert into kept values (7)")
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			g, err := other.GetDatabase(ctx, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			if g.State == "hibernated" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("still %s two minutes after its last connection", g.State)
			}
		}
		if got := mustPsql(t, s, "select x from kept"); got != "7" {
			t.Fatalf("after the wake: %q", got)
		}
	})
	t.Run("hibernate, then a connection wakes it with its data", func(t *testing.T) {
		h, err := c.HibernateDatabase(ctx, d.ID)
		if err != nil || h.State != "hibernated" {
			t.Fatalf("hibernate: %+v %v", h, err)
		}
		t1 := time.Now()
		if got := mustPsql(t, d, "select count(*) from items"); got != "2" {
			t.Fatalf("after wake: %q rows", got)
		}
		t.Logf("first query after hibernate (wake included) in %v", time.Since(t1))
		if g, err := c.GetDatabase(ctx, d.ID); err != nil || g.State != "running" || g.Password != d.Password {
			t.Fatalf("after wake: %+v %v", g, err)
		}
		if _, err := c.HibernateDatabase(ctx, d.ID); err != nil {
			t.Fatal(err)
		}
		if w, err := c.WakeDatabase(ctx, "orders"); err != nil || w.State != "running" {
			t.Fatalf("wake by name: %+v %v", w, err)
		}
		// SQL over HTTP wakes it too (its pooled sessions ended with the
		// hibernation).
		if _, err := c.HibernateDatabase(ctx, d.ID); err != nil {
			t.Fatal(err)
		}
		if status, r := sqlPost(t, d.HTTPURL, d.ConnectionURI, nil, `{"query": "select count(*) from items"}`); status != 200 || r.cell(0, 0) != "2" {
			t.Fatalf("sql over http after hibernate: %d %+v", status, r)
		}
	})
	t.Run("kill -9 of its QEMU during pgbench loses no committed transaction", func(t *testing.T) {
		d = checkKillDuringPgbench(t, c, d)
	})
	t.Run("fork a running database: its rows, its own password and volume", func(t *testing.T) {
		checkFork(t, c, d)
	})
	t.Run("delete frees the machine, the volume and the route", func(t *testing.T) {
		if err := c.DeleteDatabase(ctx, d.ID); err != nil {
			t.Fatal(err)
		}
		deleted = true
		if _, err := c.GetDatabase(ctx, d.ID); !errors.Is(err, sdk.ErrNotFound) {
			t.Fatalf("get after delete: %v", err)
		}
		if sb, err := c.GetSandbox(ctx, d.MachineID); err == nil && sb.Live() {
			t.Fatalf("machine %s still %s", sb.ID, sb.State)
		}
		if _, err := c.GetVolume(ctx, d.VolumeID); !errors.Is(err, sdk.ErrNotFound) {
			t.Fatalf("volume %s after delete: %v", d.VolumeID, err)
		}
		_, stderr, ok := psqlRun(t, "host="+d.Host+" user=orders_owner dbname=orders sslmode=require", d.Password, "select 1")
		if ok || !strings.Contains(stderr, "does not exist") {
			t.Fatalf("after delete: ok=%v %s", ok, stderr)
		}
		if status, r := sqlPost(t, d.HTTPURL, d.ConnectionURI, nil, `{"query": "select 1"}`); status != 400 || !strings.Contains(r.Message, "does not exist") {
			t.Fatalf("sql over http after delete: %d %+v", status, r)
		}
	})
}
