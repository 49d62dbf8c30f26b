package pandastack

import (
	"context"
	"net/url"
)

// PgbenchParams is a pgbench run on tables `pgbench -i` made in a
// database.
type PgbenchParams struct {
	Clients    int  `json:"clients"`
	Seconds    int  `json:"seconds"`
	SelectOnly bool `json:"select_only"` // pgbench -S
	// Via is where pgbench runs: "" or "inside" (the machine, on
	// PostgreSQL's local socket), or "nic" (the server's host, in the
	// machine's network namespace, straight to the guest's address).
	Via string `json:"via,omitempty"`
}

// Pgbench is what a pgbench run reported.
type Pgbench struct {
	Clients      int     `json:"clients"`
	Seconds      int     `json:"seconds"`
	SelectOnly   bool    `json:"select_only"`
	TPS          float64 `json:"tps"` // without the connections' start
	Transactions int64   `json:"transactions"`
	LatencyMs    float64 `json:"latency_avg_ms"`
	Version      string  `json:"pgbench_version"`
}

// BenchDatabasePgbench runs pgbench inside database id's machine on its
// local socket (admin keys only): the yardstick for pgbench through the
// router.
func (c *Client) BenchDatabasePgbench(ctx context.Context, id string, p PgbenchParams) (*Pgbench, error) {
	var out Pgbench
	err := c.do(ctx, request{method: "POST", path: "/v1/admin/bench/databases/" + url.PathEscape(id) + "/pgbench", body: p}, &out)
	return &out, err
}

// DatabaseForkFloor is what a database fork stands on, measured on the
// server's host: the engine's fork of the machine, then the child's first
// query with the parent's password (no route, no password of its own).
type DatabaseForkFloor struct {
	ForkMs       float64 `json:"fork_ms"`
	FirstQueryMs float64 `json:"first_query_ms"`
	TotalMs      float64 `json:"total_ms"`
}

// BenchDatabaseForkFloor measures running database id's fork floor once
// (admin keys only); the child is removed after.
func (c *Client) BenchDatabaseForkFloor(ctx context.Context, id string) (*DatabaseForkFloor, error) {
	var out DatabaseForkFloor
	err := c.do(ctx, request{method: "POST", path: "/v1/admin/bench/databases/" + url.PathEscape(id) + "/fork-floor"}, &out)
	return &out, err
}
