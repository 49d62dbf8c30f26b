package qemu

import (
	"context"

	"github.com/pandastack/pandastack/internal/vmm"
)

// RunState is v's QEMU run state, as query-status says it (for tests).
func RunState(ctx context.Context, v vmm.VM) (string, error) { return v.(*vm).runState(ctx) }

// PoolReady is how many processes wait ready in the pool for snapshot key
// (for tests).
func (d *Driver) PoolReady(key string) int {
	d.mu.Lock()
	p := d.pools[key]
	d.mu.Unlock()
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

// IsOurQEMU is isOurQEMU (for tests).
var IsOurQEMU = isOurQEMU

// CgroupGroupDirs are the directories of the driver's cgroup group (for
// tests; none without a jail).
func (d *Driver) CgroupGroupDirs() []string {
	if d.cgroups == nil {
		return nil
	}
	return d.cgroups.GroupDirs()
}

// Merging says whether VMs' QEMU memory is open to same-page merging, and
// why (for tests).
func (d *Driver) Merging() (bool, string) { return d.merge, d.mergeWhy }

// CodeBuffer is codeBuffer: process pid's TCG code buffer, its size and
// how much of it is resident.
var CodeBuffer = codeBuffer

// CodePrefault and HugePage are codePrefault and hugePage.
const CodePrefault, HugePage = codePrefault, hugePage
