package pandastack

import (
	"context"
	"net/url"
)

// Ping measures one round trip from the server to the sandbox's guest agent
// and returns it in milliseconds (measured on the server).
func (s *Sandbox) Ping(ctx context.Context) (float64, error) {
	var out struct {
		RTTMs float64 `json:"rtt_ms"`
	}
	err := s.c.do(ctx, request{method: "POST", path: sandboxPath(s.ID) + "/ping"}, &out)
	return out.RTTMs, err
}

// ColdBoot boots a template from its disk image without its snapshot (admin
// keys only) and returns the milliseconds until its guest agent answered: the
// baseline a create is compared with.
func (c *Client) ColdBoot(ctx context.Context, template string) (float64, error) {
	var out struct {
		ColdBootMs float64 `json:"cold_boot_ms"`
	}
	err := c.do(ctx, request{method: "POST", path: "/v1/templates/" + url.PathEscape(template) + "/coldboot"}, &out)
	return out.ColdBootMs, err
}

// BenchFloor is what the VMM alone takes to restore a template on the
// server's host (POST /v1/admin/bench/floor).
type BenchFloor struct {
	Template     string    `json:"template"`
	Accel        string    `json:"accel"`
	Answer       bool      `json:"answer"` // timed until the guest answered
	Exec         bool      `json:"exec"`   // and until its first command exited
	RestoreP50Ms float64   `json:"restore_p50_ms"`
	RestoreMs    []float64 `json:"restore_ms"`
	// LoadP50Ms and LoadMs time the same restores from the moment the
	// process was up and handed the state, as a pooled one is at a create.
	LoadP50Ms     float64   `json:"load_p50_ms"`
	LoadMs        []float64 `json:"load_ms"`
	Parallel      int       `json:"parallel"`
	ParallelMs    float64   `json:"parallel_ms"`
	ParallelP50Ms float64   `json:"parallel_p50_ms"`
}

// BenchFloor restores template bare on the server's host (no network, no
// guest agent; admin keys only): sequential restores one at a time, then
// parallel at once, each timed from QEMU's exec until the VM runs.
func (c *Client) BenchFloor(ctx context.Context, template string, sequential, parallel int) (*BenchFloor, error) {
	return c.benchFloor(ctx, map[string]any{"template": template, "sequential": sequential, "parallel": parallel})
}

// BenchAnswerFloor is BenchFloor with each restore timed until the guest's
// agent answered a hello instead of until the VM runs: the VMM's and the
// guest's own cost of a create, without the pool, the network, the records
// or the API around it.
func (c *Client) BenchAnswerFloor(ctx context.Context, template string, sequential, parallel int) (*BenchFloor, error) {
	return c.benchFloor(ctx, map[string]any{"template": template, "sequential": sequential, "parallel": parallel, "answer": true})
}

// BenchExecFloor is BenchAnswerFloor with each restore also running
// /bin/true in its guest, timed until it exited: the floor under a create
// and its first command. Restores are one at a time only.
func (c *Client) BenchExecFloor(ctx context.Context, template string, sequential int) (*BenchFloor, error) {
	return c.benchFloor(ctx, map[string]any{"template": template, "sequential": sequential, "exec": true})
}

func (c *Client) benchFloor(ctx context.Context, body map[string]any) (*BenchFloor, error) {
	var out BenchFloor
	err := c.do(ctx, request{method: "POST", path: "/v1/admin/bench/floor", body: body}, &out)
	return &out, err
}

// BenchUsage is one reading of the server host's memory and CPU and of
// every VM process on it (GET /v1/admin/bench/usage).
type BenchUsage struct {
	CPUs           int   `json:"cpus"`
	MemTotalKB     int64 `json:"mem_total_kb"`
	MemAvailableKB int64 `json:"mem_available_kb"`
	AnonKB         int64 `json:"anon_kb"`
	CachedKB       int64 `json:"cached_kb"`
	DirtyKB        int64 `json:"dirty_kb"`
	// MemPressurePct is the host's memory pressure: the share of the last
	// 10 s some task stalled waiting for memory (-1: not reported).
	MemPressurePct float64        `json:"mem_pressure_pct"`
	HostBusyMs     float64        `json:"host_busy_ms"`
	HostTotalMs    float64        `json:"host_total_ms"`
	Machines       []BenchProcess `json:"machines"`
}

// BenchProcess is one VM's QEMU process: its proportional set size (pages
// shared with other VMs count divided among them) and its user+system CPU
// time since it started.
type BenchProcess struct {
	ID    string  `json:"id"`
	PID   int     `json:"pid"`
	PSSKB int64   `json:"pss_kb"`
	RSSKB int64   `json:"rss_kb"`
	CPUMs float64 `json:"cpu_ms"`
}

// BenchUsage reads the server host's memory and CPU and each VM process's
// proportional set size and CPU time so far (admin keys only).
func (c *Client) BenchUsage(ctx context.Context) (*BenchUsage, error) {
	var out BenchUsage
	err := c.do(ctx, request{method: "GET", path: "/v1/admin/bench/usage"}, &out)
	return &out, err
}
