package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/pandastack/pandastack/internal/databases"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// pgbenchBench is the pgbench part of `pandastack bench --databases`: the
// same select-only pgbench run from this host through the database router
// (TLS, SNI, the guest channel), straight to PostgreSQL and through its
// pooler, inside the database's machine on PostgreSQL's local socket, and
// from the server's host over the machine's NIC with no router (POST
// /v1/admin/bench/databases/{id}/pgbench, admin key), in rounds
// interleaved so load on the host falls on all alike; each tps is the
// median of its rounds, each ratio the median of the rounds' ratios.
//
// Under TCG a database machine's throughput swings 2–3× in phases of 5–20
// s at a steady 99 % vCPU, on every path alike (pgbench -P 1 inside the
// machine and over its NIC, 2026-12-07; the host's own CPU speed held
// within 3 % meanwhile). Short runs in many rounds keep a round's runs in
// one phase more often, and the ratios' quartiles show how far they
// spread.
type pgbenchBench struct {
	PgbenchClients int `json:"db_pgbench_clients,omitempty"`
	PgbenchSeconds int `json:"db_pgbench_seconds,omitempty"`
	PgbenchRounds  int `json:"db_pgbench_rounds,omitempty"`
	// Select-only transactions per second.
	PgbenchRouterTPS float64 `json:"db_pgbench_router_tps,omitempty"`
	PgbenchPooledTPS float64 `json:"db_pgbench_router_pooled_tps,omitempty"`
	PgbenchInsideTPS float64 `json:"db_pgbench_inside_tps,omitempty"`
	// The router's floor: the server host's pgbench in the machine's
	// network namespace straight to the guest's address (no router, no
	// TLS; POST .../pgbench {"via":"nic"}), the NIC path under the router's.
	PgbenchNICTPS float64 `json:"db_pgbench_nic_tps,omitempty"`
	// Router ÷ inside, the median of the rounds' (the target is at least
	// 0.8).
	PgbenchRatio       float64 `json:"db_pgbench_router_inside_ratio,omitempty"`
	PgbenchPooledRatio float64 `json:"db_pgbench_pooled_inside_ratio,omitempty"`
	// NIC ÷ inside: the most router ÷ inside can be on this machine; and
	// router ÷ NIC: what the router itself keeps of its path.
	PgbenchNICRatio       float64 `json:"db_pgbench_nic_inside_ratio,omitempty"`
	PgbenchRouterNICRatio float64 `json:"db_pgbench_router_nic_ratio,omitempty"`
	// The quartiles of the rounds' router ÷ inside and NIC ÷ inside: the
	// spread the medians above come from.
	PgbenchRatioQuartiles    []float64 `json:"db_pgbench_router_inside_ratio_p25_p75,omitempty"`
	PgbenchNICRatioQuartiles []float64 `json:"db_pgbench_nic_inside_ratio_p25_p75,omitempty"`
	// The pgbench versions: this host's and the machine's.
	PgbenchHostVersion   string `json:"db_pgbench_host_version,omitempty"`
	PgbenchInsideVersion string `json:"db_pgbench_inside_version,omitempty"`
}

// The pgbench runs' shape: a few clients for a few seconds, select-only,
// in rounds enough for a median through the phases above (each path
// first in a quarter of them).
const (
	pgbenchClients = 4
	pgbenchSeconds = 3
	pgbenchRounds  = 12
)

// benchPgbench measures pgbench on database d, whose router listens on
// routerHost. With no pgbench on this host it measures nothing and says so.
func benchPgbench(ctx context.Context, c *sdk.Client, d *sdk.Database, routerHost string, progress func(string, ...any)) (pgbenchBench, error) {
	var res pgbenchBench
	if _, err := exec.LookPath("pgbench"); err != nil {
		progress("no pgbench on this host (Debian: postgresql-client): pgbench through the router not measured")
		return res, nil
	}
	addr, err := hostAddr(ctx, routerHost)
	if err != nil {
		return res, err
	}
	direct := pgbenchConninfo(d, d.Host, addr)
	pooled := pgbenchConninfo(d, strings.Replace(d.Host, d.ID+".", d.ID+"-pooler.", 1), addr)
	progress("pgbench -i through the router, then %d rounds of %d s select-only runs (%d clients), in turn: through the router, through its pooler, inside the machine, over its NIC",
		pgbenchRounds, pgbenchSeconds, pgbenchClients)
	if _, err := runPgbench(ctx, d.Password, "-i", "-q", "-s", "1", direct); err != nil {
		return res, fmt.Errorf("pgbench -i: %w", err)
	}
	run := []string{"-n", "-S", "-c", strconv.Itoa(pgbenchClients), "-j", "2", "-T", strconv.Itoa(pgbenchSeconds)}
	params := sdk.PgbenchParams{Clients: pgbenchClients, Seconds: pgbenchSeconds, SelectOnly: true}
	noNIC := false
	// The four paths, each round in another order (a run can leave work
	// behind for the next: writeback, autovacuum).
	paths := []struct {
		name string
		tps  []float64
		run  func() (float64, error)
	}{
		{"router", nil, func() (float64, error) {
			out, err := runPgbench(ctx, d.Password, append(run, direct)...)
			res.PgbenchHostVersion = out.Version
			return out.TPS, err
		}},
		{"pooled", nil, func() (float64, error) {
			out, err := runPgbench(ctx, d.Password, append(run, pooled)...)
			return out.TPS, err
		}},
		{"inside", nil, func() (float64, error) {
			in, err := c.BenchDatabasePgbench(ctx, d.ID, params)
			if err != nil {
				return 0, err
			}
			res.PgbenchInsideVersion = in.Version
			return in.TPS, nil
		}},
		{"NIC", nil, func() (float64, error) {
			p := params
			p.Via = "nic"
			in, err := c.BenchDatabasePgbench(ctx, d.ID, p)
			if sdk.IsUnavailable(err) {
				if !noNIC {
					progress("  no pgbench over the NIC: %v", err)
				}
				noNIC = true
				return 0, nil
			}
			if err != nil {
				return 0, err
			}
			return in.TPS, nil
		}},
	}
	for r := range pgbenchRounds {
		line := "  round:"
		for i := range paths {
			p := &paths[(r+i)%len(paths)]
			tps, err := p.run()
			if err != nil {
				return res, fmt.Errorf("pgbench (%s): %w", p.name, err)
			}
			p.tps = append(p.tps, tps)
			line += fmt.Sprintf(" %s %.0f tps", p.name, tps)
		}
		progress("%s", line)
	}
	routed, pooledTPS, inside, nics := paths[0].tps, paths[1].tps, paths[2].tps, paths[3].tps
	res.PgbenchRouterTPS, res.PgbenchPooledTPS, res.PgbenchInsideTPS = pct(routed, 50), pct(pooledTPS, 50), pct(inside, 50)
	res.PgbenchRatio, res.PgbenchPooledRatio = medianRatio(routed, inside), medianRatio(pooledTPS, inside)
	res.PgbenchRatioQuartiles = ratioQuartiles(routed, inside)
	if !noNIC {
		res.PgbenchNICTPS = pct(nics, 50)
		res.PgbenchNICRatio, res.PgbenchRouterNICRatio = medianRatio(nics, inside), medianRatio(routed, nics)
		res.PgbenchNICRatioQuartiles = ratioQuartiles(nics, inside)
	}
	res.PgbenchClients, res.PgbenchSeconds, res.PgbenchRounds = pgbenchClients, pgbenchSeconds, pgbenchRounds
	return res, nil
}

// medianRatio is the median of the rounds' ratios a[i] ÷ b[i]: the runs of
// one round, seconds apart, share the host's load, which drifts between
// rounds on a shared machine.
func medianRatio(a, b []float64) float64 { return pct(roundRatios(a, b), 50) }

// ratioQuartiles is the 25th and 75th percentiles of the rounds' ratios
// a[i] ÷ b[i].
func ratioQuartiles(a, b []float64) []float64 {
	rs := roundRatios(a, b)
	if len(rs) == 0 {
		return nil
	}
	return []float64{pct(rs, 25), pct(rs, 75)}
}

// roundRatios is a[i] ÷ b[i] for each round with a yardstick (b[i] > 0).
func roundRatios(a, b []float64) []float64 {
	var rs []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			rs = append(rs, a[i]/b[i])
		}
	}
	return rs
}

// hostAddr is host as an IP address (libpq's hostaddr).
func hostAddr(ctx context.Context, host string) (string, error) {
	if net.ParseIP(host) != nil {
		return host, nil
	}
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil || len(addrs) == 0 {
		return "", fmt.Errorf("resolve the database router's host %s: %v", host, err)
	}
	return addrs[0], nil
}

// pgbenchConninfo is d's libpq conninfo dialled at the router's address:
// host gives TLS its SNI name, hostaddr where to connect.
func pgbenchConninfo(d *sdk.Database, host, addr string) string {
	return fmt.Sprintf("host=%s hostaddr=%s port=%d user=%s dbname=%s sslmode=require connect_timeout=120", host, addr, d.Port, d.User, d.Database)
}

// runPgbench runs this host's pgbench with args, the password in its
// environment (never on its command line), and reads its summary (none
// for `pgbench -i`).
func runPgbench(ctx context.Context, password string, args ...string) (databases.PgbenchResult, error) {
	cmd := exec.CommandContext(ctx, "pgbench", args...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password)
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		return databases.PgbenchResult{}, fmt.Errorf("%v: %s", err, lastLines(out, 5))
	}
	if args[0] == "-i" {
		return databases.PgbenchResult{}, nil
	}
	return databases.ParsePgbench(out)
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
