package e2e

import (
	"context"
	"encoding/json"
	"testing"
)

// TestBench runs `pandastack bench --json` the way BENCHMARKS.md is made,
// with few samples: every figure it reports must have been measured (a
// broken step, such as the fork with 200 MiB dirty, fails the command), and
// it must name the accelerator the server runs under. Speeds are not
// asserted, except the one ratio the product rests on: a create restores a
// snapshot, so it is faster than a cold boot of the same template.
func TestBench(t *testing.T) {
	out, errOut, code := cli(t, main.admin, "", "bench", "--template", template, "--n", "3", "--cold", "1", "--json")
	if code != 0 {
		t.Fatalf("bench: exit %d\n%s", code, errOut)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	h, err := main.client(main.admin).Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res["accel"] != h.Accel || h.Accel == "" {
		t.Errorf("bench says accel %v, the server runs %q", res["accel"], h.Accel)
	}
	for _, k := range []string{"create_p50_ms", "create_p99_ms", "create_exec_p50_ms", "exec_p50_ms",
		"agent_ping_p50_ms", "python_start_p50_ms", "node_start_p50_ms", "parallel20_ms", "cold_boot_ms", "create_cold_ratio", "proxy_http_p50_ms",
		"proxy_rps", "hibernate_ms", "wake_p50_ms", "fork_p50_ms", "fork_dirty200_p50_ms",
		"restore_floor_ms", "parallel20_floor_ms", "spawn_floor_ms", "create_floor_ratio", "create_exec_floor_ratio",
		"exec_floor_ratio", "parallel20_floor_ratio", "wake_floor_ratio", "fork_floor_ratio",
		"answer_floor_ms", "pooled_answer_floor_ms", "first_exec_floor_ms", "create_pooled_floor_ratio",
		"create_exec_first_exec_floor_ratio"} {
		v, ok := res[k].(float64)
		if !ok || v <= 0 {
			t.Errorf("%s = %v: not measured", k, res[k])
		}
	}
	if r, _ := res["create_cold_ratio"].(float64); r >= 1 {
		t.Errorf("create_cold_ratio %v: a create from the pool was not faster than a cold boot", r)
	}
	if res["machine"] == "" || res["date"] == "" {
		t.Errorf("bench does not say where and when it ran: %v", res)
	}
}
