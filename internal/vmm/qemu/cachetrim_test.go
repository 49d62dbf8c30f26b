package qemu_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/vmm"
	"github.com/pandastack/pandastack/internal/vmm/qemu"
)

// A restored VM's RAM file is read ahead whole; once the VM settled, the
// cache its guest never touched is dropped, what it touched stays, and the
// guest goes on answering.
func TestRestoredRAMCacheIsTrimmed(t *testing.T) {
	s := template(t)
	dir := vmDir(t)
	for p := dir; p != "/"; p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o711)
	}
	d, err := qemu.New(qemu.Config{Dir: dir, UIDBase: qemu.DefaultUIDBase, TrimAfter: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	v, err := d.Restore(context.Background(), s, vmm.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(context.Background()) })
	ping(t, v)
	mem := filepath.Join(v.Dir(), vmm.MemFile)
	data := dataSize(t, s.MemFile)
	var read int64
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); { // the read-ahead runs on
		read = max(read, cached(t, mem))
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("snapshot RAM data %d MiB; cached after the restore %d MiB", data>>20, read>>20)
	if read < data/2 {
		t.Fatalf("restore read %d of the snapshot's %d bytes of RAM data ahead", read, data)
	}
	deadline := time.Now().Add(30 * time.Second)
	var kept int64
	for {
		kept = cached(t, mem)
		if kept < read*3/4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("RAM file cache %d MiB 30 s after the restore, %d MiB read: not trimmed", kept>>20, read>>20)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("cached after the trim: %d MiB", kept>>20)
	if kept == 0 {
		t.Fatal("the trim dropped the pages the guest maps too")
	}
	ping(t, v)
}

func cached(t *testing.T, path string) int64 {
	t.Helper()
	n, err := cowfs.Cached(path)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// dataSize is how much data (not holes) path has.
func dataSize(t *testing.T, path string) int64 {
	t.Helper()
	n, err := cowfs.DataSize(path)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
