package databases

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// The benchmark's yardstick: pgbench run inside a database's machine, on
// PostgreSQL's local socket, as the postgres OS user — what the database
// does with no router, TLS, guest channel or pooler in front of it.
// `pandastack bench --databases` runs the same pgbench through the router
// and reports the ratio. Only the server's admin reaches it (the sandbox
// exec API refuses a database's machine by design).

// PgbenchParams is a pgbench run on tables `pgbench -i` made in the
// database.
type PgbenchParams struct {
	Clients int `json:"clients"`
	Seconds int `json:"seconds"`
	// SelectOnly runs pgbench's built-in select-only script (-S), else
	// its TPC-B-like default.
	SelectOnly bool `json:"select_only"`
}

// PgbenchResult is what pgbench reported.
type PgbenchResult struct {
	PgbenchParams
	// TPS is transactions per second, without the connections' start.
	TPS          float64 `json:"tps"`
	Transactions int64   `json:"transactions"`
	LatencyMs    float64 `json:"latency_avg_ms"`
	Version      string  `json:"pgbench_version"`
}

// Bounds of a run inside a machine.
const (
	maxBenchClients = 64
	maxBenchSeconds = 60
)

// check validates p.
func (p PgbenchParams) check() error {
	if p.Clients < 1 || p.Clients > maxBenchClients {
		return pandastack.Errorf(pandastack.EInvalid, "clients must be between 1 and %d, got %d", maxBenchClients, p.Clients)
	}
	if p.Seconds < 1 || p.Seconds > maxBenchSeconds {
		return pandastack.Errorf(pandastack.EInvalid, "seconds must be between 1 and %d, got %d", maxBenchSeconds, p.Seconds)
	}
	return nil
}

// PgbenchInside runs pgbench inside database id's machine (any team's:
// the caller is the server's admin) on the local socket against the
// database's own tables. A database that is not running is EConflict.
func (s *Service) PgbenchInside(ctx context.Context, id string, p PgbenchParams) (PgbenchResult, error) {
	if err := p.check(); err != nil {
		return PgbenchResult{}, err
	}
	d, err := s.cfg.Store.GetDatabase(ctx, id)
	if err != nil {
		return PgbenchResult{}, err
	}
	sb, err := s.cfg.Store.GetSandbox(ctx, d.MachineID)
	if err != nil {
		return PgbenchResult{}, fmt.Errorf("pgbench in database %s: its machine: %w", id, err)
	}
	if d.State != pandastack.DatabaseReady || sb.State != pandastack.StateRunning {
		return PgbenchResult{}, pandastack.Errorf(pandastack.EConflict, "database %s is not running (machine %s); connect to it first", id, sb.State)
	}
	args := []string{"runuser", "-u", "postgres", "--", pgBin + "/pgbench", "-h", pgSocketDir, "-n",
		"-c", strconv.Itoa(p.Clients), "-j", "1", "-T", strconv.Itoa(p.Seconds)}
	if p.SelectOnly {
		args = append(args, "-S")
	}
	args = append(args, d.DBName)
	out, err := s.execIn(ctx, d.MachineID, time.Duration(p.Seconds)*time.Second+2*time.Minute, nil, args...)
	if err != nil {
		return PgbenchResult{}, fmt.Errorf("pgbench in database %s: %w", id, err)
	}
	res, err := ParsePgbench(out)
	if err != nil {
		return PgbenchResult{}, fmt.Errorf("pgbench in database %s: %w", id, err)
	}
	res.PgbenchParams = p
	s.log.Info("pgbench inside the database's machine", "database", id, "clients", p.Clients, "seconds", p.Seconds,
		"select_only", p.SelectOnly, "tps", res.TPS)
	return res, nil
}

var (
	pgbenchTPS     = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)
	pgbenchTxs     = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
	pgbenchLatency = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
	pgbenchVersion = regexp.MustCompile(`(?m)^pgbench \(PostgreSQL\) ([0-9.]+)|^pgbench \(([0-9.]+)`)
)

// ParsePgbench reads pgbench's summary (the last tps line: pgbench 13 and
// before printed two), from a run in a machine or on the host.
func ParsePgbench(out string) (PgbenchResult, error) {
	var r PgbenchResult
	tps := pgbenchTPS.FindAllStringSubmatch(out, -1)
	if len(tps) == 0 {
		return r, fmt.Errorf("no tps in pgbench's output: %s", tail(out, 400))
	}
	r.TPS, _ = strconv.ParseFloat(tps[len(tps)-1][1], 64)
	if m := pgbenchTxs.FindStringSubmatch(out); m != nil {
		r.Transactions, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := pgbenchLatency.FindStringSubmatch(out); m != nil {
		r.LatencyMs, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := pgbenchVersion.FindStringSubmatch(out); m != nil {
		r.Version = strings.TrimSpace(m[1] + m[2])
	}
	return r, nil
}
