package cowfs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fitrim is FITRIM, _IOWR('X', 121, struct fstrim_range): x/sys/unix does
// not define it.
const fitrim = 0xc0185879

// fstrimRange is struct fstrim_range.
type fstrimRange struct {
	Start, Len, MinLen uint64
}

// Trim gives the host back the disk blocks of files removed from the
// loop-mounted image. XFS frees a removed file's blocks inside the image,
// but the sparse image file keeps them allocated on the host's disk until
// the filesystem discards them: FITRIM does, and the loop device turns each
// discard into a hole punched in the image. Without it the image only ever
// grows, to the size of the most the server ever held at once. Trim returns
// the bytes the filesystem discarded (free space it passed down, whether or
// not it was still allocated). Blocks freed in the last few seconds may
// still be busy (not yet through XFS's log) and are skipped: trim again
// later to reach them. On a directory that reflinks by itself (no
// image) it does nothing: that filesystem's own discard policy applies.
func (f *FS) Trim() (int64, error) {
	if f.image == "" {
		return 0, nil
	}
	d, err := os.Open(f.dir)
	if err != nil {
		return 0, fmt.Errorf("cowfs: trim %s: %w", f.dir, err)
	}
	defer d.Close()
	r := fstrimRange{Len: ^uint64(0)}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, d.Fd(), fitrim, uintptr(unsafe.Pointer(&r))); e != 0 {
		return 0, fmt.Errorf("cowfs: trim %s: %w", f.dir, e)
	}
	return int64(r.Len), nil
}

// trimEvery is how often KeepTrimmed looks at the free space, and
// trimAfter how much must have been freed since the last trim to trim
// again: a trim walks every free extent, so it runs only when removals
// have given something back.
const (
	trimEvery = 30 * time.Second
	trimAfter = 256 << 20
)

// KeepTrimmed trims the image at once (what an earlier process freed) and
// then whenever removals have freed trimAfter or more since the last trim,
// until ctx ends. It does nothing when there is no image.
func (f *FS) KeepTrimmed(ctx context.Context, log *slog.Logger) {
	if f.image == "" {
		return
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	trim := func() int64 {
		Settle(f.dir) // removed files' blocks are freed in the background
		free, _ := f.Free()
		if n, err := f.Trim(); err != nil {
			log.Warn("trim vm storage", "err", err)
		} else {
			log.Debug("trimmed vm storage", "discarded_mib", n>>20, "free_mib", free>>20)
		}
		return free
	}
	low := trim()
	again := true // what the last trim skipped as busy
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		free, err := f.Free()
		if err != nil {
			continue
		}
		if free < low {
			low = free
		}
		switch {
		case free-low >= trimAfter:
			low, again = trim(), true
		case again:
			low, again = trim(), false
		}
	}
}
