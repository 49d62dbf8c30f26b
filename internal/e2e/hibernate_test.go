package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// A hibernated sandbox runs no guest (its QEMU is parked, stopped, for a
// quick wake, or gone), and comes back exactly: files on disk, files in
// memory (tmpfs), running processes with their memory — from its parked
// process or, that gone, from its hibernation on disk.
func TestHibernateWake(t *testing.T) {
	ctx := context.Background()
	c := teamClient(t, "hibernate")
	sb := newSandbox(t, c, sdk.CreateSandboxParams{})
	if _, err := sb.Files().Write(ctx, "/root/disk.txt", []byte("on disk")); err != nil {
		t.Fatal(err)
	}
	pid, v := startMemProcess(t, sb)

	qpid := vmPID(main.dataDir, sb.ID)
	if !qemuRunning(qpid) {
		t.Fatalf("no QEMU recorded for %s (pid %d)", sb.ID, qpid)
	}
	t0 := time.Now()
	if err := sb.Hibernate(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("hibernate took %v", time.Since(t0))
	if sb.State != "hibernated" {
		t.Fatalf("state %q after hibernate", sb.State)
	}
	checkParked(t, main.dataDir, sb.ID, qpid)
	got, _ := c.GetSandbox(ctx, sb.ID)
	if got.State != "hibernated" || !got.Live() {
		t.Fatalf("stored state %q", got.State)
	}

	// Any use wakes it: this exec does.
	t0 = time.Now()
	r, err := sb.Exec(ctx, "cat /root/disk.txt /tmp/v", sdk.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exec on a hibernated sandbox (wake + exec) took %v", time.Since(t0))
	if string(r.Stdout) != "on disk"+v {
		t.Fatalf("after wake: %q, want disk file and %s", r.Stdout, v)
	}
	if got, _ := c.GetSandbox(ctx, sb.ID); got.State != "running" {
		t.Fatalf("state %q after auto-wake", got.State)
	}
	// The process survived with its memory, in the same QEMU: it was
	// parked, and continued.
	if got := memValue(t, sb, pid); got != v {
		t.Fatalf("process memory after wake: %q, want %s", got, v)
	}
	if got := vmPID(main.dataDir, sb.ID); got != qpid {
		t.Fatalf("woken from parked QEMU %d, but the VM runs in %d", qpid, got)
	}

	// A parked QEMU that ends (the host's memory wanted, a crash) leaves
	// the hibernation whole: the wake restores it from disk.
	if err := sb.Hibernate(ctx); err != nil {
		t.Fatal(err)
	}
	checkParked(t, main.dataDir, sb.ID, qpid)
	if err := syscall.Kill(qpid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the parked QEMU to end", func() bool { return !qemuRunning(qpid) })
	t0 = time.Now()
	if err := sb.Wake(ctx); err != nil {
		t.Fatalf("wake after the parked QEMU ended: %v", err)
	}
	t.Logf("wake from disk took %v", time.Since(t0))
	if got := memValue(t, sb, pid); got != v {
		t.Fatalf("process memory after a wake from disk: %q, want %s", got, v)
	}
	if r, err := sb.Exec(ctx, "cat /root/disk.txt /tmp/v", sdk.ExecOptions{}); err != nil || string(r.Stdout) != "on disk"+v {
		t.Fatalf("after a wake from disk: %q %v", r.Stdout, err)
	}
	qpid = vmPID(main.dataDir, sb.ID)

	// Explicit hibernate and wake, twice, and kill while hibernated.
	for i := 0; i < 2; i++ {
		if err := sb.Hibernate(ctx); err != nil {
			t.Fatal(err)
		}
		t0 = time.Now()
		if err := sb.Wake(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("wake took %v", time.Since(t0))
		if sb.State != "running" {
			t.Fatalf("state %q after wake", sb.State)
		}
	}
	if err := sb.Hibernate(ctx); err != nil {
		t.Fatal(err)
	}
	qpid = vmPID(main.dataDir, ".park-"+sb.ID)
	if err := sb.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	// Its parked QEMU ends with it.
	eventually(t, 10*time.Second, "the killed sandbox's parked QEMU to end", func() bool { return !qemuRunning(qpid) })
	if _, err := sb.Exec(ctx, "true", sdk.ExecOptions{}); !sdk.IsGone(err) {
		t.Fatalf("exec after killing a hibernated sandbox: %v", err)
	}
}
