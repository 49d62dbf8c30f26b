package templates

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/pandastack/pandastack/internal/cowfs"
)

// settleFreePages waits until the guest has reported the pages it freed
// while it booted and warmed up, so that the template's RAM file holds only
// memory in use: every restore reads it ahead. The guest reports 2 s after
// pages were freed, in batches 2 s apart, and QEMU punches each batch out
// of the file; the wait ends when the file's data has not shrunk for 3 s,
// 20 s at most (a guest without the driver reports nothing: 3 s lost).
func settleFreePages(ctx context.Context, mem string, progress io.Writer) {
	const quiet, most = 3 * time.Second, 20 * time.Second
	t0 := time.Now()
	first, err := cowfs.DataSize(mem)
	if err != nil {
		return
	}
	last, changed := first, t0
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for time.Since(changed) < quiet && time.Since(t0) < most {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n, err := cowfs.DataSize(mem)
		if err != nil {
			return
		}
		if n != last {
			last, changed = n, time.Now()
		}
	}
	fmt.Fprintf(progress, "free pages reported: RAM data %d → %d MiB in %s\n", first>>20, last>>20, time.Since(t0).Round(100*time.Millisecond))
}
