package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// TestIdleGuestStaysQuiet: an idle sandbox's kernel wakes for nothing
// periodic that the VMM's kernel command line turned off
// (internal/vmm/qemu KernelCmdline). Every wake of an idle guest is host
// CPU, and under TCG a costly one, times every sandbox on the host.
//   - Proactive compaction is off: kcompactd, which woke every 500 ms to
//     score the guest's fragmentation, sleeps through a 5 s idle window.
//   - The clocksource is a stable one (tsc under TCG, kvm-clock under KVM),
//     not jiffies: with jiffies the guest never stops its 250 Hz tick.
func TestIdleGuestStaysQuiet(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t, teamClient(t, "idle-guest"), sdk.CreateSandboxParams{})
	const script = `p=$(grep -l '^kcompactd0$' /proc/[0-9]*/comm | cut -d/ -f3)
wakes() { awk '/^voluntary_ctxt_switches/ {print $2}' /proc/$p/status; }
a=$(wakes); sleep 5; b=$(wakes)
echo "$(cat /proc/sys/vm/compaction_proactiveness) $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource) $((b-a))"`
	r, err := sb.Exec(ctx, script, sdk.ExecOptions{TimeoutSeconds: 60})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("read the guest's idle state: %v %+v", err, r)
	}
	var proactiveness, wakes int
	var clock string
	if _, err := fmt.Sscan(string(r.Stdout), &proactiveness, &clock, &wakes); err != nil {
		t.Fatalf("parse %q: %v", r.Stdout, err)
	}
	if proactiveness != 0 {
		t.Errorf("vm.compaction_proactiveness = %d in the guest, want 0", proactiveness)
	}
	// At 20 (the kernel's default) kcompactd woke 10 times in this window.
	if wakes > 2 {
		t.Errorf("kcompactd woke %d times in 5 s of an idle guest, want at most 2", wakes)
	}
	if strings.Contains(clock, "jiffies") {
		t.Errorf("guest clocksource %q: it cannot go tickless", clock)
	}
}
