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
