package e2e

import (
	"context"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// A hibernated sandbox holds no VM, and comes back exactly: files on disk,
// files in memory (tmpfs), running processes with their memory.
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
	if qemuRunning(qpid) {
		t.Fatalf("QEMU for %s still runs while hibernated", sb.ID)
	}
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
	// The process survived with its memory.
	if got := memValue(t, sb, pid); got != v {
		t.Fatalf("process memory after wake: %q, want %s", got, v)
	}

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
	if err := sb.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, "true", sdk.ExecOptions{}); !sdk.IsGone(err) {
		t.Fatalf("exec after killing a hibernated sandbox: %v", err)
	}
}
