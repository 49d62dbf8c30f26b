package qemu

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// ksmRun is the switch of the kernel's same-page merging daemon.
const ksmRun = "/sys/kernel/mm/ksm/run"

// setupMerge decides whether VMs' QEMU processes are open to the kernel's
// same-page merging (KSM), and starts its daemon if they are.
//
// Under TCG most of what a VM's QEMU holds is its own private memory: the
// guest code it translated and its tables, ~40 MiB for an idle base
// sandbox. Much of that is the same in every VM of a template (in one
// measurement over 5 idle sandboxes, 56 % of one's pages were in another's
// too): merged, those pages are kept once. The guest's RAM is a file
// mapped shared, which KSM never touches; a VM's own memory is only
// merged with identical pages, copied again on a write.
//
// Only under TCG: under KVM, QEMU's own memory is small, and a host that
// runs untrusted code should not share pages between tenants' processes
// (merging can be timed, and the merged page is hammerable from both);
// TCG is not an isolation boundary for untrusted code in the first place.
// Only for jailed VMs: the jail's child asks for it before it executes
// QEMU. Off with PANDASTACK_KSM=off.
func (d *Driver) setupMerge() {
	switch {
	case d.cfg.Accel != pandastack.AccelTCG:
		d.mergeWhy = "off: only under TCG"
	case !d.jailed:
		d.mergeWhy = "off: VMs are not jailed"
	case os.Getenv("PANDASTACK_KSM") == "off":
		d.mergeWhy = "off: disabled by configuration"
	default:
		started, err := startKSM()
		if err != nil {
			d.mergeWhy = "off: " + err.Error()
			break
		}
		if started {
			d.ksmTune.Add(1)
			go func() {
				defer d.ksmTune.Done()
				d.tuneKSM(d.ctx)
			}()
		}
		d.merge = true
		d.mergeWhy = "on: QEMU's own memory (translated code) merged across VMs by the kernel's KSM"
	}
	d.log.Info("vm memory merging", "status", d.mergeWhy)
}

// startKSM makes sure the kernel's merging daemon runs, and says whether
// it started it; it merges only memory a process opted in, so starting it
// changes nothing for others.
func startKSM() (bool, error) {
	b, err := os.ReadFile(ksmRun)
	if err != nil {
		return false, fmt.Errorf("the kernel has no same-page merging: %w", err)
	}
	switch string(bytes.TrimSpace(b)) {
	case "1":
		return false, nil
	case "0":
		if err := os.WriteFile(ksmRun, []byte("1"), 0); err != nil {
			return false, fmt.Errorf("start the kernel's same-page merging: %w", err)
		}
		return true, nil
	default: // 2: unmerge everything and stop, set by the host's admin
		return false, fmt.Errorf("same-page merging stopped by the host (%s is %q)", ksmRun, bytes.TrimSpace(b))
	}
}

// ksmPagesToScan is how many pages the merging daemon scans each time it
// wakes (every sleep_millisecs, 20 by default).
const ksmPagesToScan = "/sys/kernel/mm/ksm/pages_to_scan"

// scanRate is the pages_to_scan that takes the daemon over n VMs' memory
// in about a minute: each holds ~12k pages open to merging (~45 MiB) under
// TCG, and the daemon wakes 3,000 times a minute. The kernel's default,
// 100, at least; 1,000 at most (~10 % of a host core in one measurement).
// At the default a pass over 150 VMs took 5 minutes and merged next to
// nothing of a burst of them (BENCHMARKS.md, session 17).
func scanRate(n int) int { return min(max(4*n, 100), 1000) }

// tuneKSM, run when this driver started the merging daemon (so no one else
// set it up), keeps its scan rate at scanRate of the VMs running, and puts
// the rate back as it was when the driver closes.
func (d *Driver) tuneKSM(ctx context.Context) {
	b, err := os.ReadFile(ksmPagesToScan)
	if err != nil {
		return
	}
	orig := strings.TrimSpace(string(b))
	defer os.WriteFile(ksmPagesToScan, []byte(orig), 0)
	set := ""
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		d.mu.Lock()
		n := len(d.uids)
		d.mu.Unlock()
		if v := strconv.Itoa(scanRate(n)); v != set {
			if err := os.WriteFile(ksmPagesToScan, []byte(v), 0); err != nil {
				d.log.Warn("ksm scan rate", "err", err)
				return
			}
			set = v
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
