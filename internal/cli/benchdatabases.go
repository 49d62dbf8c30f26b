package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// databasesBenchResult is what `pandastack bench --databases` prints: the
// managed PostgreSQL product's figures, client measured through the
// server's database router.
type databasesBenchResult struct {
	Accel   string `json:"accel"`
	Machine string `json:"machine"`
	Date    string `json:"date"`
	N       int    `json:"n"`
	// SQL over HTTP, warm and after a wake, and their floors (benchdbhttp.go).
	dbHTTPFigures
	// pgbench through the router against inside the machine (benchpgbench.go).
	pgbenchBench
	// Base backups and point-in-time restores (benchbackups.go).
	backupsBench
	// Create until the first query with its credentials answered through
	// the router (the create call answers after its own such query).
	CreateP50 float64 `json:"db_create_first_query_p50_ms"`
	CreateP99 float64 `json:"db_create_first_query_p99_ms"`
	// The first create of the run: on a server that has made no database
	// yet, it starts the cluster cold and saves the base later creates
	// restore (internal/databases/base.go).
	CreateFirst float64 `json:"db_create_first_ms"`
	// Hibernated, then connect and SELECT 1 (the wake included).
	WakeP50 float64 `json:"db_wake_first_query_p50_ms"`
	WakeP99 float64 `json:"db_wake_first_query_p99_ms"`
	// Fork of a running database until its child answered a query.
	ForkP50 float64 `json:"db_fork_p50_ms"`
	ForkP99 float64 `json:"db_fork_p99_ms"`
	// The floor, in the same run: a plain sandbox create from the base
	// template, client measured; the ratios are figure p50 ÷ floor p50.
	CreateFloorP50   float64 `json:"create_floor_p50_ms"`
	CreateFloorP99   float64 `json:"create_floor_p99_ms"`
	CreateFloorRatio float64 `json:"db_create_floor_ratio"`
	WakeFloorRatio   float64 `json:"db_wake_floor_ratio"`
	ForkFloorRatio   float64 `json:"db_fork_floor_ratio"`
	// A fork's own floor, measured on the server's host in the same run
	// (POST /v1/admin/bench/databases/{id}/fork-floor): the engine's fork
	// of the machine, then the child's first query with the parent's
	// password — the fork without its route, its own password and the
	// pooler's check. Its parts' medians too; the ratio is fork p50 ÷ it.
	ForkOwnFloorP50   float64 `json:"db_fork_own_floor_p50_ms"`
	ForkOwnFloorP99   float64 `json:"db_fork_own_floor_p99_ms"`
	ForkOwnFloorFork  float64 `json:"db_fork_own_floor_fork_p50_ms"`
	ForkOwnFloorQuery float64 `json:"db_fork_own_floor_first_query_p50_ms"`
	ForkOwnFloorRatio float64 `json:"db_fork_own_floor_ratio"`
}

// benchDatabases creates n databases one after another (each removed
// after its first query), then on one of them measures n wakes, n forks
// and 50 warm SQL-over-HTTP queries and n HTTP wakes (benchDBHTTP), then n plain creates (the floor). routerHost is where the database
// router is dialled (the server's host).
func benchDatabases(ctx context.Context, c *sdk.Client, n int, routerHost string, progress func(string, ...any)) (*databasesBenchResult, error) {
	h, err := c.Health(ctx)
	if err != nil {
		return nil, err
	}
	res := &databasesBenchResult{Accel: h.Accel, Machine: machine(), Date: time.Now().UTC().Format("2006-01-02"), N: n}
	tag := fmt.Sprintf("%d", time.Now().UnixNano()%1e6)
	var made []string
	defer func() {
		for _, id := range made {
			_ = c.DeleteDatabase(context.WithoutCancel(ctx), id)
		}
	}()
	var creates []float64
	var keep *sdk.Database
	progress("%d database creates, each until its first query through the router", n)
	for i := range n {
		t0 := time.Now()
		d, err := c.CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: fmt.Sprintf("bench-%s-%d", tag, i)})
		if err != nil {
			return nil, fmt.Errorf("create database: %w", err)
		}
		made = append(made, d.ID)
		if err := dbQuery(ctx, d, d.Host, routerHost); err != nil {
			return nil, err
		}
		creates = append(creates, ms(time.Since(t0)))
		if keep == nil {
			keep = d
			continue
		}
		if err := c.DeleteDatabase(ctx, d.ID); err != nil {
			return nil, err
		}
		made = made[:len(made)-1]
	}
	res.CreateP50, res.CreateP99, res.CreateFirst = pct(creates, 50), pct(creates, 99), creates[0]
	progress("%d wakes, each until the first query answered", n)
	var wakes []float64
	for range n {
		if _, err := c.HibernateDatabase(ctx, keep.ID); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := dbQuery(ctx, keep, keep.Host, routerHost); err != nil {
			return nil, err
		}
		wakes = append(wakes, ms(time.Since(t0)))
	}
	res.WakeP50, res.WakeP99 = pct(wakes, 50), pct(wakes, 99)
	progress("%d forks of a running database", n)
	var forks []float64
	for i := range n {
		t0 := time.Now()
		f, err := c.ForkDatabase(ctx, keep.ID, fmt.Sprintf("bench-%s-fork-%d", tag, i))
		if err != nil {
			return nil, fmt.Errorf("fork database: %w", err)
		}
		forks = append(forks, ms(time.Since(t0)))
		if err := c.DeleteDatabase(ctx, f.ID); err != nil {
			return nil, err
		}
	}
	res.ForkP50, res.ForkP99 = pct(forks, 50), pct(forks, 99)
	if err := benchForkFloor(ctx, c, keep, n, res, progress); err != nil {
		return nil, err
	}
	if res.pgbenchBench, err = benchPgbench(ctx, c, keep, routerHost, progress); err != nil {
		return nil, err
	}
	if res.backupsBench, err = benchBackups(ctx, c, keep, min(n, 3), tag, progress); err != nil {
		return nil, err
	}
	progress("%d plain creates from the base template (the floor)", n)
	if res.CreateFloorP50, res.CreateFloorP99, err = createFloor(ctx, c, n); err != nil {
		return nil, fmt.Errorf("create floor: %w", err)
	}
	if f := res.CreateFloorP50; f > 0 {
		res.CreateFloorRatio, res.WakeFloorRatio, res.ForkFloorRatio = res.CreateP50/f, res.WakeP50/f, res.ForkP50/f
	}
	if err := benchDBHTTP(ctx, c, keep, routerHost, n, &res.dbHTTPFigures, progress); err != nil {
		return nil, err
	}
	return res, nil
}

// benchForkFloor measures database d's fork floor n times, between its
// forks, into res. A key that cannot reach the admin endpoint measures
// nothing and says so.
func benchForkFloor(ctx context.Context, c *sdk.Client, d *sdk.Database, n int, res *databasesBenchResult, progress func(string, ...any)) error {
	progress("%d fork floors: the engine's fork of the machine, then the child's first query (no route, no password of its own)", n)
	var total, fork, query []float64
	for range n {
		f, err := c.BenchDatabaseForkFloor(ctx, d.ID)
		if sdk.IsForbidden(err) {
			progress("fork floor not measured: it needs an admin key")
			return nil
		}
		if err != nil {
			return fmt.Errorf("fork floor: %w", err)
		}
		total, fork, query = append(total, f.TotalMs), append(fork, f.ForkMs), append(query, f.FirstQueryMs)
	}
	res.ForkOwnFloorP50, res.ForkOwnFloorP99 = pct(total, 50), pct(total, 99)
	res.ForkOwnFloorFork, res.ForkOwnFloorQuery = pct(fork, 50), pct(query, 50)
	if res.ForkOwnFloorP50 > 0 {
		res.ForkOwnFloorRatio = res.ForkP50 / res.ForkOwnFloorP50
	}
	return nil
}

// dbQuery connects to d through the router at routerHost (TLS with SNI
// sni, not verified: this measures, it does not vouch) and runs SELECT 1.
func dbQuery(ctx context.Context, d *sdk.Database, sni, routerHost string) error {
	cfg, err := pgx.ParseConfig(d.ConnectionURI)
	if err != nil {
		return fmt.Errorf("connection uri: %w", err)
	}
	cfg.Fallbacks = nil
	cfg.TLSConfig = &tls.Config{ServerName: sni, InsecureSkipVerify: true} //nolint:gosec // a benchmark's own server
	cfg.LookupFunc = func(context.Context, string) ([]string, error) { return []string{sni}, nil }
	addr := net.JoinHostPort(routerHost, fmt.Sprint(d.Port))
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "tcp", addr)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", d.Name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("query %s: %w", d.Name, err)
	}
	return nil
}

// sqlOverHTTP runs SELECT 1 on d over its HTTP endpoint (Neon's wire).
func sqlOverHTTP(ctx context.Context, d *sdk.Database) error {
	req, err := http.NewRequestWithContext(ctx, "POST", d.HTTPURL, bytes.NewReader([]byte(`{"query":"SELECT 1","params":[]}`)))
	if err != nil {
		return err
	}
	req.Header.Set("Neon-Connection-String", d.ConnectionURI)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("sql over http: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("sql over http: %s: %s", resp.Status, body)
	}
	return nil
}

// routerHostOf is the host of the server's base URL: where its database
// router listens too.
func routerHostOf(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Hostname() == "" {
		return "127.0.0.1"
	}
	return u.Hostname()
}
