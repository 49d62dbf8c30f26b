package cli

import (
	"math"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

func TestDensityStop(t *testing.T) {
	l := densityLimits{Max: 200, MarginKB: 6 << 20, PressurePct: 5}
	for _, tc := range []struct {
		name           string
		count          int
		availKB, perKB int64
		pressure       float64
		want           string // "" or a fragment of the reason
	}{
		{"first sandbox on a roomy host", 0, 20 << 20, 0, 0, ""},
		{"room for one more", 50, 8 << 20, 100 << 10, 0, ""},
		{"at max", 200, 20 << 20, 100 << 10, 0, "--max 200"},
		{"below the margin already", 10, 5 << 20, 0, 0, "margin of 6144 MiB"},
		{"one more would cross the margin", 10, (6 << 20) + (50 << 10), 100 << 10, 0, "~100 MiB"},
		{"memory pressure with MemAvailable to spare", 120, 14 << 20, 100 << 10, 31.1, "pressure 31.1 %"},
		{"pressure just under the limit", 120, 14 << 20, 100 << 10, 4.9, ""},
		{"a kernel without pressure information", 120, 14 << 20, 100 << 10, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := densityStop(l, tc.count, tc.availKB, tc.perKB, tc.pressure)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("densityStop = %q; want %q", got, tc.want)
			}
		})
	}
	if got := densityStop(densityLimits{Max: 200}, 10, 14<<20, 0, 99); got != "" {
		t.Fatalf("--pressure 0 stopped at pressure 99: %q", got)
	}
}

func TestIdleCost(t *testing.T) {
	before := &sdk.BenchUsage{HostBusyMs: 1000, HostTotalMs: 10000, Machines: []sdk.BenchProcess{
		{ID: "sbx_a", CPUMs: 100}, {ID: "sbx_b", CPUMs: 200}, {ID: "vm_pool", CPUMs: 0}}}
	after := &sdk.BenchUsage{HostBusyMs: 6000, HostTotalMs: 30000, Machines: []sdk.BenchProcess{
		{ID: "sbx_a", CPUMs: 150, PSSKB: 60 << 10, RSSKB: 90 << 10},
		{ID: "sbx_b", CPUMs: 350, PSSKB: 80 << 10, RSSKB: 90 << 10},
		{ID: "sbx_new", CPUMs: 9999, PSSKB: 70 << 10, RSSKB: 90 << 10}, // not in before: no CPU delta
		{ID: "vm_pool", CPUMs: 5000, PSSKB: 1 << 20}}}                  // not ours
	ids := map[string]bool{"sbx_a": true, "sbx_b": true, "sbx_new": true}
	pss, rss, cpu, host, n := idleCost(before, after, ids, 10*time.Second)
	if n != 3 || pss != 70 || rss != 90 {
		t.Fatalf("n %d, pss %v, rss %v; want 3 sandboxes of 70 MiB PSS, 90 MiB RSS", n, pss, rss)
	}
	// (50 + 150) ms over 10 s, ÷ 3 sandboxes, as % of a core.
	if want := 200.0 / 10000 * 100 / 3; math.Abs(cpu-want) > 1e-9 {
		t.Fatalf("cpu per sandbox %v %%; want %v", cpu, want)
	}
	if host != 25 {
		t.Fatalf("host busy %v %%; want 25", host)
	}
	if _, _, _, _, n := idleCost(before, after, map[string]bool{"sbx_x": true}, time.Second); n != 0 {
		t.Fatalf("counted %d sandboxes that are not there", n)
	}
}

func TestFloorRatios(t *testing.T) {
	res := &benchResult{CreateP50: 90, CreateExecP50: 200, ExecP50: 30, Parallel20: 6000, WakeP50: 120, ForkP50: 150}
	res.RestoreFloor, res.SpawnFloor, res.Parallel20Floor = 30, 10, 2000
	res.setRatios()
	f := res.benchFloors
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"create", f.CreateFloorRatio, 3},
		{"create+exec", f.CreateExecFloorRatio, 5},
		{"exec", f.ExecFloorRatio, 3},
		{"parallel20", f.Parallel20FloorRatio, 3},
		{"wake", f.WakeFloorRatio, 4},
		{"fork", f.ForkFloorRatio, 5},
	} {
		if c.got != c.want {
			t.Errorf("%s floor ratio = %v; want %v", c.name, c.got, c.want)
		}
	}
	// A floor that was not measured leaves its ratios out (0), which
	// bench --compare skips.
	res = &benchResult{CreateP50: 90, CreateExecP50: 200}
	res.SpawnFloor = 10
	res.setRatios()
	if res.CreateFloorRatio != 0 || res.CreateExecFloorRatio != 0 {
		t.Fatalf("ratios without a restore floor: %+v", res.benchFloors)
	}
}
