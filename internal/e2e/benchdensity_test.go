package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// TestBenchDensity runs `pandastack bench --density --max 3` against the
// suite's server: three idle sandboxes are started, measured and killed,
// and the JSON says so with figures in their ranges (no speeds asserted).
func TestBenchDensity(t *testing.T) {
	out, errOut, code := cli(t, main.admin, "", "bench", "--density", "--template", template, "--max", "3",
		"--margin-mib", "0", "--idle-window", "2", "--json")
	if code != 0 {
		t.Fatalf("bench --density: exit %d\n%s\n%s", code, out, errOut)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench --density --json: %v\n%s", err, out)
	}
	num := func(k string) float64 {
		v, ok := res[k].(float64)
		if !ok {
			t.Fatalf("%s = %v: missing", k, res[k])
		}
		return v
	}
	t.Run("three sandboxes started, and max is what stopped it", func(t *testing.T) {
		if num("count") != 3 || num("answered") != 3 || !strings.Contains(res["stopped_by"].(string), "--max 3") {
			t.Fatalf("count %v, answered %v, stopped by %v", res["count"], res["answered"], res["stopped_by"])
		}
	})
	t.Run("memory per idle sandbox is some MiB and at most its RAM plus QEMU", func(t *testing.T) {
		pss, rss := num("pss_per_sandbox_mib"), num("rss_per_sandbox_mib")
		if pss <= 1 || pss > rss || rss > 512+256 {
			t.Fatalf("pss %v MiB, rss %v MiB per sandbox", pss, rss)
		}
	})
	t.Run("idle CPU and exec latencies were measured", func(t *testing.T) {
		if cpu := num("cpu_per_sandbox_pct"); cpu < 0 || cpu > 200 {
			t.Errorf("cpu per sandbox %v %% of a core", cpu)
		}
		for _, k := range []string{"exec_alone_p50_ms", "exec_alone_p99_ms", "exec_p50_ms", "exec_p99_ms", "exec_p99_alone_ratio", "create_p50_ms", "mem_available_start_mib"} {
			if num(k) <= 0 {
				t.Errorf("%s = %v: not measured", k, res[k])
			}
		}
	})
	t.Run("every density sandbox is gone", func(t *testing.T) {
		sbs, err := main.client(main.admin).ListSandboxes(context.Background(), sdk.ListParams{Metadata: map[string]string{"bench": "density"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(sbs) != 0 {
			t.Fatalf("%d density sandboxes left", len(sbs))
		}
	})
}

// TestBenchFloor measures the restore floor over the admin route: bare
// restores run and leave no VM behind; other keys and bad requests are
// refused with the right status.
func TestBenchFloor(t *testing.T) {
	ctx := context.Background()
	admin := main.client(main.admin)
	f, err := admin.BenchFloor(ctx, template, 2, 3)
	if err != nil {
		t.Fatalf("floor: %v", err)
	}
	if f.RestoreP50Ms <= 0 || len(f.RestoreMs) != 2 || f.Parallel != 3 || f.ParallelMs < f.ParallelP50Ms || f.ParallelP50Ms <= 0 || f.Accel == "" {
		t.Fatalf("floor figures are not sane: %+v", f)
	}
	// Timed until the guest answers, a restore cannot be faster than one
	// timed until the VM runs (same run, same host).
	a, err := admin.BenchAnswerFloor(ctx, template, 2, 2)
	if err != nil {
		t.Fatalf("answer floor: %v", err)
	}
	if !a.Answer || len(a.RestoreMs) != 2 || a.RestoreP50Ms < f.RestoreP50Ms/2 {
		t.Fatalf("answer floor figures are not sane next to the running floor %.0f ms: %+v", f.RestoreP50Ms, a)
	}
	// Each restore is also timed from the state's load (a pooled
	// process's start): never longer than from its exec.
	for i := range a.RestoreMs {
		if len(a.LoadMs) != len(a.RestoreMs) || a.LoadMs[i] <= 0 || a.LoadMs[i] > a.RestoreMs[i] {
			t.Fatalf("answer floor from the load %v against from the exec %v", a.LoadMs, a.RestoreMs)
		}
	}
	// The first-command floor runs /bin/true in each restored guest (a
	// guest that could not would fail the request).
	e, err := admin.BenchExecFloor(ctx, template, 2)
	if err != nil {
		t.Fatalf("first-command floor: %v", err)
	}
	if !e.Exec || !e.Answer || len(e.LoadMs) != 2 || e.LoadP50Ms <= 0 || e.LoadP50Ms > e.RestoreP50Ms {
		t.Fatalf("first-command floor figures are not sane: %+v", e)
	}
	for _, d := range vmDirs(main.dataDir) {
		if strings.HasPrefix(d, "floor_") {
			t.Errorf("bare restore %s left behind", d)
		}
	}
	u, err := admin.BenchUsage(ctx)
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	if u.MemAvailableKB <= 0 || u.MemAvailableKB > u.MemTotalKB || u.CPUs < 1 {
		t.Fatalf("usage figures are not sane: %+v", u)
	}
	for _, tc := range []struct {
		name   string
		c      *sdk.Client
		tpl    string
		seq    int
		status int
	}{
		{"a team key is refused", teamClient(t, "bench-floor"), template, 1, http.StatusForbidden},
		{"an unknown template is not found", admin, "no-such-template", 1, http.StatusNotFound},
		{"too many restores are refused", admin, template, 51, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.BenchFloor(ctx, tc.tpl, tc.seq, 0)
			var ae *sdk.APIError
			if !errors.As(err, &ae) || ae.Status != tc.status {
				t.Fatalf("floor: %v; want status %d", err, tc.status)
			}
		})
	}
}
