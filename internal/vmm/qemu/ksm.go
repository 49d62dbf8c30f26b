package qemu

import (
	"bytes"
	"fmt"
	"os"

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
		if err := startKSM(); err != nil {
			d.mergeWhy = "off: " + err.Error()
			break
		}
		d.merge = true
		d.mergeWhy = "on: QEMU's own memory (translated code) merged across VMs by the kernel's KSM"
	}
	d.log.Info("vm memory merging", "status", d.mergeWhy)
}

// startKSM makes sure the kernel's merging daemon runs; it merges only
// memory a process opted in, so starting it changes nothing for others.
func startKSM() error {
	b, err := os.ReadFile(ksmRun)
	if err != nil {
		return fmt.Errorf("the kernel has no same-page merging: %w", err)
	}
	switch string(bytes.TrimSpace(b)) {
	case "1":
		return nil
	case "0":
		if err := os.WriteFile(ksmRun, []byte("1"), 0); err != nil {
			return fmt.Errorf("start the kernel's same-page merging: %w", err)
		}
		return nil
	default: // 2: unmerge everything and stop, set by the host's admin
		return fmt.Errorf("same-page merging stopped by the host (%s is %q)", ksmRun, bytes.TrimSpace(b))
	}
}
