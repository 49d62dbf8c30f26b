package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// dbHTTPFigures are the SQL-over-HTTP part of `pandastack bench
// --databases`, with the floors it is read against in the same run.
type dbHTTPFigures struct {
	// SQL over HTTP (POST /sql): SELECT 1, each after a first one.
	HTTPWarmP50 float64 `json:"db_http_warm_query_p50_ms"`
	HTTPWarmP99 float64 `json:"db_http_warm_query_p99_ms"`
	// The floor of a warm query: SELECT 1 on a connection already open
	// through the database router (no HTTP, no session to find).
	ConnWarmP50 float64 `json:"db_conn_warm_query_p50_ms"`
	ConnWarmP99 float64 `json:"db_conn_warm_query_p99_ms"`
	// Hibernated, then the first SQL-over-HTTP query (the wake included).
	HTTPWakeP50 float64 `json:"db_http_wake_first_query_p50_ms"`
	HTTPWakeP99 float64 `json:"db_http_wake_first_query_p99_ms"`
	// The floor of a wake: a plain base sandbox hibernated and woken,
	// client measured (the wake call until it answered).
	SandboxWakeP50 float64 `json:"sandbox_wake_floor_p50_ms"`
	SandboxWakeP99 float64 `json:"sandbox_wake_floor_p99_ms"`
}

// benchDBHTTP measures, on database d: warmN warm SQL-over-HTTP queries
// and as many on an open connection, n wakes by an HTTP query, and n
// wakes of a plain sandbox.
func benchDBHTTP(ctx context.Context, c *sdk.Client, d *sdk.Database, routerHost string, n int, f *dbHTTPFigures, progress func(string, ...any)) error {
	const warmN = 50
	progress("%d warm SQL-over-HTTP queries, and as many on an open connection", warmN)
	var https []float64
	for i := range warmN + 1 {
		t0 := time.Now()
		if err := sqlOverHTTP(ctx, d); err != nil {
			return err
		}
		if i > 0 {
			https = append(https, ms(time.Since(t0)))
		}
	}
	f.HTTPWarmP50, f.HTTPWarmP99 = pct(https, 50), pct(https, 99)
	conns, err := warmConnQueries(ctx, d, routerHost, warmN)
	if err != nil {
		return err
	}
	f.ConnWarmP50, f.ConnWarmP99 = pct(conns, 50), pct(conns, 99)
	progress("%d wakes, each until the first SQL-over-HTTP query answered", n)
	var wakes []float64
	for range n {
		if _, err := c.HibernateDatabase(ctx, d.ID); err != nil {
			return err
		}
		t0 := time.Now()
		if err := sqlOverHTTP(ctx, d); err != nil {
			return err
		}
		wakes = append(wakes, ms(time.Since(t0)))
	}
	f.HTTPWakeP50, f.HTTPWakeP99 = pct(wakes, 50), pct(wakes, 99)
	progress("%d wakes of a plain sandbox (the floor)", n)
	if f.SandboxWakeP50, f.SandboxWakeP99, err = sandboxWakeFloor(ctx, c, n); err != nil {
		return fmt.Errorf("wake floor: %w", err)
	}
	return nil
}

// warmConnQueries opens one connection to d through the router and times
// n SELECT 1 on it.
func warmConnQueries(ctx context.Context, d *sdk.Database, routerHost string, n int) ([]float64, error) {
	cfg, err := pgx.ParseConfig(d.ConnectionURI)
	if err != nil {
		return nil, fmt.Errorf("connection uri: %w", err)
	}
	cfg.Fallbacks = nil
	cfg.TLSConfig = &tls.Config{ServerName: d.Host, InsecureSkipVerify: true} //nolint:gosec // a benchmark's own server
	cfg.LookupFunc = func(context.Context, string) ([]string, error) { return []string{d.Host}, nil }
	addr := net.JoinHostPort(routerHost, fmt.Sprint(d.Port))
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "tcp", addr)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", d.Name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var xs []float64
	for i := range n + 1 {
		t0 := time.Now()
		if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
			return nil, fmt.Errorf("query %s: %w", d.Name, err)
		}
		if i > 0 {
			xs = append(xs, ms(time.Since(t0)))
		}
	}
	return xs, nil
}

// sandboxWakeFloor hibernates and wakes a plain base sandbox n times: the
// wake call's p50 and p99, client measured.
func sandboxWakeFloor(ctx context.Context, c *sdk.Client, n int) (p50, p99 float64, err error) {
	sb, err := floorSandbox(ctx, c)
	if err != nil {
		return 0, 0, err
	}
	defer sb.Kill(context.WithoutCancel(ctx))
	xs, err := wakeSamples(ctx, sb, n)
	if err != nil {
		return 0, 0, err
	}
	return pct(xs, 50), pct(xs, 99), nil
}
