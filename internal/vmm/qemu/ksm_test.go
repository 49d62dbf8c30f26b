package qemu_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
)

// TestVMMemoryMerging: under TCG, a jailed VM's QEMU is open to the
// kernel's same-page merging, and two VMs of one template end up sharing
// pages (their translated code is mostly the same); under KVM no VM is.
func TestVMMemoryMerging(t *testing.T) {
	s := template(t)
	d := newDriver(t, vmDir(t))
	on, why := d.Merging()
	if want := d.Accel() == pandastack.AccelTCG && d.Jailed(); on != want {
		t.Fatalf("merging %v (%s) under %s, jailed %v; want %v", on, why, d.Accel(), d.Jailed(), want)
	}
	ctx := context.Background()
	var pids []int
	for i := 0; i < 2; i++ {
		v, err := d.Restore(ctx, s, vmm.RestoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Kill(context.Background()) })
		agent(t, v).Close() // the guest ran: QEMU translated its code
		pids = append(pids, v.PID())
	}
	for _, pid := range pids {
		st := ksmStat(t, pid)
		if got, want := st["ksm_merge_any"], map[bool]string{true: "yes", false: "no"}[on]; got != want {
			t.Fatalf("QEMU %d: ksm_merge_any %q, want %q (%s)", pid, got, want, why)
		}
	}
	if !on {
		return
	}
	// The kernel's daemon needs two passes over the pages to merge them,
	// and how long a pass takes depends on everything else on the host
	// open to merging (other servers' VMs, other tests'): count passes,
	// not seconds.
	start := fullScans(t)
	deadline := time.Now().Add(10 * time.Minute)
	for {
		merged := 0
		for _, pid := range pids {
			n, _ := strconv.Atoi(ksmStat(t, pid)["ksm_merging_pages"])
			merged += n
		}
		if merged > 0 {
			t.Logf("%d pages of the two QEMUs merged after %d full scans", merged, fullScans(t)-start)
			return
		}
		if n := fullScans(t) - start; n >= 4 {
			t.Fatalf("no page of two VMs of one template merged in %d full scans of ksmd", n)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no page of two VMs of one template merged in 10 min (%d full scans)", fullScans(t)-start)
		}
		time.Sleep(time.Second)
	}
}

// fullScans is how many passes ksmd has made over the memory open to it.
func fullScans(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/sys/kernel/mm/ksm/full_scans")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ksmStat reads /proc/PID/ksm_stat ("name value" lines, or "name: value").
func ksmStat(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/ksm_stat", pid))
	if err != nil {
		t.Fatalf("read QEMU's same-page merging state: %v", err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(strings.Replace(line, ":", " ", 1)); len(f) == 2 {
			out[f[0]] = f[1]
		}
	}
	return out
}
