package jail

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The files a VM's cgroup is capped with, on the unified hierarchy (v2) and
// on the legacy one (v1): this host runs v1, so v2's are checked here.
func TestCgroupSettings(t *testing.T) {
	lim := Limits{CPUs: 2, MemoryBytes: 3 << 30, Pids: 256, IODevice: "7:3", ReadBPS: 512 << 20, WriteBPS: 256 << 20}
	v2 := (&Cgroups{mode: "v2"}).settings("", lim)
	want := []setting{
		{"cpu.max", "200000 100000", false},
		{"memory.max", "3221225472", false},
		{"memory.swap.max", "0", true},
		{"pids.max", "256", false},
		{"io.max", "7:3 rbps=536870912 wbps=268435456", true},
	}
	if !reflect.DeepEqual(v2, want) {
		t.Errorf("v2 settings:\n got %v\nwant %v", v2, want)
	}
	// No read cap (it comes when the guest answers, CapReads): io.max caps
	// writes only.
	lim.ReadBPS = 0
	if got := (&Cgroups{mode: "v2"}).settings("", lim)[4]; got.value != "7:3 rbps=max wbps=268435456" {
		t.Errorf("v2 io.max without a read cap: %q", got.value)
	}
	v1 := map[string][]setting{}
	for _, c := range []string{"cpu", "memory", "pids", "blkio"} {
		v1[c] = (&Cgroups{mode: "v1"}).settings(c, lim)
	}
	wantV1 := map[string][]setting{
		"cpu":    {{"cpu.cfs_period_us", "100000", false}, {"cpu.cfs_quota_us", "200000", false}},
		"memory": {{"memory.limit_in_bytes", "3221225472", false}},
		"pids":   {{"pids.max", "256", false}},
		"blkio":  {{"blkio.throttle.write_bps_device", "7:3 268435456", true}},
	}
	if !reflect.DeepEqual(v1, wantV1) {
		t.Errorf("v1 settings:\n got %v\nwant %v", v1, wantV1)
	}
}

// CapReads writes the read cap into the VM's own cgroup: io.max on v2,
// blkio.throttle.read_bps_device on v1 (nothing without a blkio hierarchy).
func TestCapReads(t *testing.T) {
	for _, tc := range []struct {
		mode, ctrl, file, want string
	}{
		{"v2", "", "io.max", "7:3 rbps=536870912"},
		{"v1", "blkio", "blkio.throttle.read_bps_device", "7:3 536870912"},
	} {
		parent := t.TempDir()
		if err := os.Mkdir(filepath.Join(parent, "vm1"), 0o755); err != nil {
			t.Fatal(err)
		}
		c := &Cgroups{mode: tc.mode, dirs: map[string]string{tc.ctrl: parent}}
		if err := c.CapReads("vm1", "7:3", 512<<20); err != nil {
			t.Fatalf("%s: %v", tc.mode, err)
		}
		if b, err := os.ReadFile(filepath.Join(parent, "vm1", tc.file)); err != nil || string(b) != tc.want {
			t.Errorf("%s: %s = %q, %v; want %q", tc.mode, tc.file, b, err, tc.want)
		}
	}
	if err := (&Cgroups{mode: "v1", dirs: map[string]string{"cpu": t.TempDir()}}).CapReads("vm1", "7:3", 1); err != nil {
		t.Errorf("v1 without blkio: %v, want nothing done", err)
	}
}
