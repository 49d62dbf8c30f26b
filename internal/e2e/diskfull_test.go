package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack/internal/cowfs"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// fillDisk fills the filesystem of dir with one preallocated file until
// no more than leave bytes are free, and returns a func that frees it
// again. It fills in halving chunks, down to the first ENOSPC below leave.
func fillDisk(t *testing.T, dir string, leave int64) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "e2e-fill")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	var size int64 // preallocated so far
	// free removes the file. XFS gives its blocks back in the background
	// (until a syncfs): the server must settle the filesystem before it
	// says the disk is full, and the test relies on that.
	free = func() {
		f.Close()
		os.Remove(path)
	}
	t.Cleanup(func() { free(); cowfs.Settle(dir) })
	for {
		left, err := cowfs.Free(dir)
		if err != nil {
			free()
			t.Fatal(err)
		}
		if left <= leave {
			break
		}
		chunk := (left - leave + 4095) &^ 4095
		for {
			err = unix.Fallocate(int(f.Fd()), 0, size, chunk)
			if err == nil || !errors.Is(err, syscall.ENOSPC) || chunk <= 4096 {
				break
			}
			chunk /= 2
		}
		if errors.Is(err, syscall.ENOSPC) {
			break // full to the block
		}
		if err != nil {
			free()
			t.Fatalf("fallocate: %v", err)
		}
		size += chunk
	}
	left, _ := cowfs.Free(dir)
	t.Logf("filled %s: %d MiB preallocated, %d KiB left", dir, size>>20, left>>10)
	return free
}

// Disk full in the snapshot directory: the snapshot and the fork answer
// 507 insufficient_storage, the sandbox keeps running, nothing is listed
// and nothing is left on disk; once there is space again both work.
//
// "Full" here leaves 32 MiB free, less than the sandbox's memory: the
// snapshot directory shares its filesystem with the running VMs' RAM and
// disk files (reflinks need one filesystem), and a VM whose RAM file gets
// ENOSPC on a copy-on-write fault dies (seen here: filled to the last
// block, the sandbox's agent was gone within milliseconds). So the server
// refuses a save, before pausing the VM, once less than the sandbox's
// memory is free; this test fills the disk past that line.
func TestSnapshotDiskFull(t *testing.T) {
	ctx := context.Background()
	c := teamClient(t, "diskfull")
	sb := newSandbox(t, c, sdk.CreateSandboxParams{})
	if _, err := sb.Files().Write(ctx, "/root/keep.txt", []byte("still here")); err != nil {
		t.Fatal(err)
	}
	snapDir := filepath.Join(main.dataDir, "cow", "snapshots")
	snapsBefore := dirEntries(snapDir) // other tests' snapshots may be there
	free := fillDisk(t, filepath.Join(main.dataDir, "cow"), 32<<20)

	_, err := sb.Snapshot(ctx, "on-a-full-disk")
	var ae *sdk.APIError
	if !errors.As(err, &ae) || ae.Status != 507 || ae.Code != "insufficient_storage" {
		free()
		t.Fatalf("snapshot on a full disk: %v, want 507 insufficient_storage", err)
	}
	t.Logf("snapshot on a full disk: %d %s: %s", ae.Status, ae.Code, ae.Message)
	if _, err := sb.Fork(ctx); !errors.Is(err, sdk.ErrInsufficientStorage) {
		free()
		t.Fatalf("fork on a full disk: %v, want insufficient_storage", err)
	}
	// It runs on, and nothing half-made is listed or left behind.
	r, err := sb.Exec(ctx, "cat /root/keep.txt", sdk.ExecOptions{})
	if err != nil || string(r.Stdout) != "still here" {
		free()
		t.Fatalf("exec after the failed snapshot: %v", err)
	}
	if l, err := c.ListSnapshots(ctx); err != nil || len(l) != 0 {
		t.Fatalf("snapshots listed after the failure: %v %+v", err, l)
	}
	if extra := newEntries(snapDir, snapsBefore); len(extra) != 0 {
		t.Fatalf("left in the snapshot dir: %s", strings.Join(extra, " "))
	}
	free()

	// At once: XFS has not given the blocks back yet, so this passes only
	// because the server settles the filesystem before it says "full".
	sn, err := sb.Snapshot(ctx, "on-a-full-disk")
	if err != nil {
		t.Fatalf("snapshot with space again: %v", err)
	}
	t.Cleanup(func() { _ = c.DeleteSnapshot(context.Background(), sn.ID) })
	kid, err := sb.Fork(ctx)
	if err != nil {
		t.Fatalf("fork with space again: %v", err)
	}
	t.Cleanup(func() { _ = kid.Kill(context.Background()) })
	if b, err := kid.Files().Read(ctx, "/root/keep.txt"); err != nil || string(b) != "still here" {
		t.Fatalf("child: %q %v", b, err)
	}
}
