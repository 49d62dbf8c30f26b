package qemu

import (
	"time"

	"github.com/pandastack/pandastack/internal/cowfs"
)

// DefaultTrimAfter is how long a restored VM runs before the page cache of
// its RAM file that its guest has not touched is dropped (Config.TrimAfter).
//
// A restore reads the snapshot's RAM data ahead whole (cowfs.Prefetch,
// cowfs.Readahead): the guest's first touches then take minor faults, not
// reads through the filesystem. But a clone has a page cache of its own,
// and an idle base sandbox touches about half of what was read (~90 of
// ~190 MiB under TCG): the rest is clean cache, per sandbox, that no one
// reads again soon. Under many idle sandboxes it was what ran the host out
// of free memory first (BENCHMARKS.md, session 17); sandboxes started at a
// burst's pace hold it until their trim, hence a short delay: a guest's
// first command has run by then. A page the guest touches later comes
// from the filesystem, in one read.
const DefaultTrimAfter = 10 * time.Second

// trimLater drops, once v has run for the driver's trim delay, the clean
// page cache of v's RAM file that no process maps. It does nothing if v
// ends first or the driver closes.
func (d *Driver) trimLater(v *vm) {
	after := d.cfg.TrimAfter
	if after == 0 {
		after = DefaultTrimAfter
	}
	if after < 0 {
		return
	}
	mem, id := v.mem, v.id
	go func() {
		t := time.NewTimer(after)
		defer t.Stop()
		select {
		case <-t.C:
		case <-v.exited:
			return
		case <-d.ctx.Done():
			return
		}
		before, _ := cowfs.Cached(mem)
		if err := cowfs.DropCache(mem); err != nil {
			d.log.Debug("trim ram cache", "vm", id, "err", err) // renamed or gone since: nothing to trim
			return
		}
		left, _ := cowfs.Cached(mem)
		d.log.Debug("trimmed ram cache", "vm", id, "cached_mib", before>>20, "kept_mib", left>>20)
	}()
}
