package databases

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// The benchmark's yardsticks: pgbench run inside a database's machine, on
// PostgreSQL's local socket, as the postgres OS user — what the database
// does with no router, TLS, guest channel or pooler in front of it — and
// pgbench run on the host in the machine's network namespace, straight to
// the guest's address — the NIC path the router's connections ride on.
// `pandastack bench --databases` runs the same pgbench through the router
// and reports the ratios. Only the server's admin reaches them (the
// sandbox exec API refuses a database's machine by design).

// PgbenchParams is a pgbench run on tables `pgbench -i` made in the
// database.
type PgbenchParams struct {
	Clients int `json:"clients"`
	Seconds int `json:"seconds"`
	// SelectOnly runs pgbench's built-in select-only script (-S), else
	// its TPC-B-like default.
	SelectOnly bool `json:"select_only"`
	// Via is where pgbench runs: "inside" (the default) the machine, on
	// PostgreSQL's local socket; or "nic", on the host in the machine's
	// network namespace, over TCP to the guest's address (the guest's
	// NIC and TCP path, no router or TLS): what the router's path rides
	// on, its floor.
	Via string `json:"via,omitempty"`
}

// Where a pgbench run goes.
const (
	ViaInside = "inside"
	ViaNIC    = "nic"
)

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
	if p.Via != "" && p.Via != ViaInside && p.Via != ViaNIC {
		return pandastack.Errorf(pandastack.EInvalid, "via must be %q or %q, got %q", ViaInside, ViaNIC, p.Via)
	}
	return nil
}

// Pgbench runs pgbench against database id (any team's: the caller is
// the server's admin) on the database's own tables, where p.Via says. A
// database that is not running is EConflict.
func (s *Service) Pgbench(ctx context.Context, id string, p PgbenchParams) (PgbenchResult, error) {
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
	run := []string{"-n", "-c", strconv.Itoa(p.Clients), "-T", strconv.Itoa(p.Seconds)}
	if p.SelectOnly {
		run = append(run, "-S")
	}
	var out string
	if p.Via == ViaNIC {
		out, err = s.pgbenchNIC(ctx, d, run)
	} else {
		args := append([]string{"runuser", "-u", "postgres", "--", pgBin + "/pgbench", "-h", pgSocketDir, "-j", "1"}, run...)
		out, err = s.execIn(ctx, d.MachineID, time.Duration(p.Seconds)*time.Second+2*time.Minute, nil, append(args, d.DBName)...)
	}
	if err != nil {
		return PgbenchResult{}, fmt.Errorf("pgbench in database %s: %w", id, err)
	}
	res, err := ParsePgbench(out)
	if err != nil {
		return PgbenchResult{}, fmt.Errorf("pgbench in database %s: %w", id, err)
	}
	res.PgbenchParams = p
	s.log.Info("pgbench on a database", "database", id, "via", cmp.Or(p.Via, ViaInside), "clients", p.Clients, "seconds", p.Seconds,
		"select_only", p.SelectOnly, "tps", res.TPS)
	return res, nil
}

// pgbenchNIC runs this host's pgbench with args in d's machine's network
// namespace against the guest's address, as d's role (its password in
// pgbench's environment, never on its command line).
func (s *Service) pgbenchNIC(ctx context.Context, d pandastack.Database, args []string) (string, error) {
	if s.cfg.NICs == nil {
		return "", pandastack.Errorf(pandastack.EUnavailable, "this server runs no sandbox networking: no NIC to run pgbench over")
	}
	bin, err := exec.LookPath("pgbench")
	if err != nil {
		return "", pandastack.Errorf(pandastack.EUnavailable, "no pgbench on the server's host (Debian: postgresql-client)")
	}
	ns, addr, err := s.cfg.NICs.GuestNetns(d.MachineID)
	if err != nil {
		return "", err
	}
	password, err := s.password(d)
	if err != nil {
		return "", err
	}
	conninfo := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable connect_timeout=60", addr, Port, d.User, d.DBName)
	cmd := exec.CommandContext(ctx, "ip", append(append([]string{"netns", "exec", ns, bin, "-j", "2"}, args...), conninfo)...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("pgbench over the NIC: %v: %s", err, tail(string(b), 600))
	}
	return string(b), nil
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
