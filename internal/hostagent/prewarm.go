package hostagent

import (
	"context"

	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// PrewarmSnapshot keeps n QEMU processes ready for snapshot ref, each with
// the snapshot's RAM and disk already cloned and its RAM read into the page
// cache, so a create from it only loads device state: for snapshots
// restored again and again, such as a function's. A clone has a page cache
// of its own, so without this every restore's guest takes its first touch
// of each page from the filesystem. n 0 drops them (the snapshot's files
// may be gone already). Every prepared process is a new QEMU that has run
// nothing: no state passes from one create to the next.
func (a *Agent) PrewarmSnapshot(ctx context.Context, ref hostapi.SnapshotRef, n int) error {
	if n <= 0 {
		a.cfg.Driver.Prewarm(vmm.Snapshot{Key: a.snapDir(ref.ID)}, 0)
		return nil
	}
	snap, err := a.loadSnapshot(ctx, ref)
	if err != nil {
		return err
	}
	a.cfg.Driver.Prewarm(snap, n)
	return nil
}
