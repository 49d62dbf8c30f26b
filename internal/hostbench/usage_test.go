package hostbench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
)

// A smaps_rollup as Linux 6.1 writes it for a QEMU process.
const smapsRollup = `55d0c0a00000-7ffd5a5f7000 ---p 00000000 00:00 0                          [rollup]
Rss:               91644 kB
Pss:               69851 kB
Pss_Dirty:         41234 kB
Pss_Anon:          20480 kB
Pss_File:          49371 kB
Pss_Shmem:             0 kB
Shared_Clean:      30012 kB
Shared_Dirty:          0 kB
Private_Clean:      20398 kB
Private_Dirty:     41234 kB
Referenced:        91644 kB
Anonymous:         20480 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
`

func TestParseKBReadsSmapsRollup(t *testing.T) {
	m := parseKB([]byte(smapsRollup))
	if m["Pss"] != 69851 || m["Rss"] != 91644 || m["Swap"] != 0 {
		t.Fatalf("parseKB = Pss %d Rss %d; want 69851 and 91644", m["Pss"], m["Rss"])
	}
	if _, ok := m["55d0c0a00000-7ffd5a5f7000 ---p 00000000 00"]; ok {
		t.Fatalf("the header line was read as a figure")
	}
}

func TestParseProcCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       float64
	}{
		{"plain name", "4242 (qemu-system-x86) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 130 0 0 39 19 4 0 100 1 1 18446744073709551615", 3800},
		{"name with spaces and parentheses", "7 (a) b (c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 1 1", 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcCPU([]byte(tc.stat))
			if err != nil || got != tc.want {
				t.Fatalf("parseProcCPU = %v, %v; want %v ms", got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"", "12 (x) S 1 2", "12 (x) S 1 2 3 4 5 6 7 8 9 x y"} {
		if _, err := parseProcCPU([]byte(bad)); err == nil {
			t.Errorf("parseProcCPU(%q) accepted it", bad)
		}
	}
}

func TestParseHostCPU(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	busy, total, err := parseHostCPU([]byte("cpu  100 20 30 800 50 0 0 0 7 0\ncpu0 50 10 15 400 25 0 0 0 3 0\n"))
	if err != nil || busy != 1500 || total != 10000 {
		t.Fatalf("parseHostCPU = %v, %v, %v; want 1500 ms busy of 10000", busy, total, err)
	}
	if _, _, err := parseHostCPU([]byte("intr 1 2 3\n")); err == nil {
		t.Fatal("parseHostCPU accepted a file without a cpu line")
	}
}

// procs is a Restorer that only lists processes.
type procs map[string]int

func (p procs) BareRestores(context.Context, vmm.Snapshot, int, vmm.FloorAnswer) ([]vmm.RestoreTime, time.Duration, error) {
	return nil, 0, nil
}
func (p procs) Processes() (map[string]int, error) { return p, nil }
func (p procs) Accel() pandastack.Accel            { return pandastack.AccelTCG }

// TestUsageReadsRealProcesses reads this test's own process from the real
// /proc as if it were a VM, and skips a process that is gone.
func TestUsageReadsRealProcesses(t *testing.T) {
	b := New(Config{Driver: procs{"sbx_self": os.Getpid(), "sbx_gone": 1 << 30}})
	u, err := b.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if u.MemTotalKB <= 0 || u.MemAvailableKB <= 0 || u.MemAvailableKB > u.MemTotalKB || u.CPUs < 1 || u.HostTotalMs <= u.HostBusyMs {
		t.Fatalf("host figures are not sane: %+v", u)
	}
	if u.AnonKB <= 0 || u.CachedKB <= 0 || u.DirtyKB < 0 || u.MemPressurePct < -1 || u.MemPressurePct > 100 {
		t.Fatalf("host memory figures are not sane: %+v", u)
	}
	if len(u.Machines) != 1 || u.Machines[0].ID != "sbx_self" {
		t.Fatalf("machines = %+v; want only sbx_self", u.Machines)
	}
	m := u.Machines[0]
	if m.PSSKB <= 0 || m.RSSKB < m.PSSKB || m.PID != os.Getpid() {
		t.Fatalf("process figures are not sane: %+v", m)
	}
}

func TestParsePressure(t *testing.T) {
	psi := "some avg10=12.50 avg60=3.10 avg300=0.70 total=123456\nfull avg10=1.00 avg60=0.20 avg300=0.00 total=2345\n"
	if got, err := parsePressure([]byte(psi)); err != nil || got != 12.5 {
		t.Fatalf("parsePressure = %v, %v; want 12.5 (some, not full)", got, err)
	}
	for _, bad := range []string{"", "full avg10=1.00\n", "some avg60=1.00\n", "some avg10=x\n"} {
		if _, err := parsePressure([]byte(bad)); err == nil {
			t.Errorf("parsePressure(%q) accepted it", bad)
		}
	}
}

func TestFloorRequestValidate(t *testing.T) {
	r := FloorRequest{}
	if err := r.Validate(); err != nil || r.Template != "base" || r.Sequential != 5 || r.Parallel != 0 {
		t.Fatalf("defaults: %+v, %v", r, err)
	}
	for _, bad := range []FloorRequest{{Sequential: -1}, {Sequential: 51}, {Parallel: -1}, {Parallel: 51}} {
		if err := bad.Validate(); pandastack.ErrorCode(err) != pandastack.EInvalid {
			t.Errorf("Validate(%+v) = %v; want invalid", bad, err)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2}} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v; want %v", tc.xs, got, tc.want)
		}
	}
}
