package qemu_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/vmm"
)

// Memory a guest used and freed goes back to the host: the guest reports
// its free pages, QEMU punches them out of the RAM file.
func TestGuestFreedMemoryLeavesTheRAMFile(t *testing.T) {
	s := template(t)
	if !s.Machine.FreePageReporting {
		t.Fatal("the template's machine does not report free pages")
	}
	d := newDriver(t, vmDir(t))
	v, err := d.Restore(context.Background(), s, vmm.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(context.Background()) })
	cl := agent(t, v)
	mem := filepath.Join(v.Dir(), vmm.MemFile)
	before := dataSize(t, mem)
	// 160 MiB written by a process that then exits: its pages are free.
	if out := guestShUntil(t, cl, `python3 -c "x = b'x' * (160 << 20); print('done', len(x) >> 20)"`, "done 160"); out == "" {
		t.Fatal("the guest did not run the allocation")
	}
	used := dataSize(t, mem)
	t.Logf("RAM file data: %d MiB restored, %d MiB after the guest used 160 MiB", before>>20, used>>20)
	if used < before+64<<20 {
		t.Fatalf("the RAM file grew by %d MiB only: the guest did not touch new memory", (used-before)>>20)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		now := dataSize(t, mem)
		if now < used-96<<20 {
			t.Logf("%d MiB after the guest freed it", now>>20)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("RAM file still holds %d MiB of data 60 s after the guest freed 160 MiB (%d MiB while used)", now>>20, used>>20)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The guest goes on, on pages that are holes now.
	if out := guestShUntil(t, cl, `python3 -c "x = b'y' * (64 << 20); print('again', x.count(b'y') >> 20)"`, "again 64"); out == "" {
		t.Fatal("the guest did not run after its pages were reported")
	}
}
