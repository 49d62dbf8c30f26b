package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// A sandbox created with auto_hibernate_seconds N stays running while it is
// used (execs spread over more than N seconds, and one foreground exec
// longer than N), is hibernated once it has been idle for N seconds, and
// the next exec wakes it with its memory intact.
func TestAutoHibernate(t *testing.T) {
	ctx := context.Background()
	const idle = 3
	c := teamClient(t, "autohibernate")
	sb := newSandbox(t, c, sdk.CreateSandboxParams{AutoHibernateSeconds: idle})
	if sb.AutoHibernateSeconds != idle {
		t.Fatalf("created with auto_hibernate_seconds %d, want %d", sb.AutoHibernateSeconds, idle)
	}
	if got, err := c.GetSandbox(ctx, sb.ID); err != nil || got.AutoHibernateSeconds != idle {
		t.Fatalf("stored auto_hibernate_seconds: %v %+v", err, got)
	}
	if _, err := sb.Exec(ctx, "head -c 4096 /dev/urandom | sha256sum | cut -c1-64 > /dev/shm/mark", sdk.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	mark, err := sb.Files().Read(ctx, "/dev/shm/mark")
	if err != nil || len(mark) != 65 {
		t.Fatalf("mark %q %v", mark, err)
	}
	pid, v := startMemProcess(t, sb)
	qpid := vmPID(main.dataDir, sb.ID)
	if !qemuRunning(qpid) {
		t.Fatalf("no QEMU recorded for %s (pid %d)", sb.ID, qpid)
	}

	// Busy: short execs, back to back, for twice the idle time.
	running := func(what string) {
		t.Helper()
		got, err := c.GetSandbox(ctx, sb.ID)
		if err != nil || got.State != "running" {
			t.Fatalf("%s: state %q (%v), want running", what, got.State, err)
		}
	}
	t0 := time.Now()
	n := 0
	for time.Since(t0) < 2*idle*time.Second {
		if r, err := sb.Exec(ctx, "echo busy", sdk.ExecOptions{}); err != nil || string(r.Stdout) != "busy\n" {
			t.Fatalf("exec %d while busy: %v", n, err)
		}
		running("between execs")
		n++
	}
	t.Logf("%d execs over %v kept it running", n, time.Since(t0))
	// A foreground exec longer than the idle time keeps it running: had it
	// been hibernated under the command, the exec would have failed.
	if r, err := sb.Exec(ctx, "sleep "+strconv.Itoa(2*idle)+"; echo done", sdk.ExecOptions{}); err != nil || string(r.Stdout) != "done\n" {
		t.Fatalf("long exec: %v", err)
	}
	running("after a foreground exec longer than the idle time")

	// Idle: it is hibernated, and its VM ends.
	t0 = time.Now()
	eventually(t, idle*time.Second+2*time.Minute, "the idle sandbox to be hibernated", func() bool {
		got, err := c.GetSandbox(ctx, sb.ID)
		return err == nil && got.State == "hibernated"
	})
	t.Logf("hibernated %v after its last use (idle time %ds)", time.Since(t0), idle)
	checkParked(t, main.dataDir, sb.ID, qpid)

	// Any use wakes it, memory intact: the tmpfs file and the process's value.
	t0 = time.Now()
	r, err := sb.Exec(ctx, "cat /dev/shm/mark", sdk.ExecOptions{})
	if err != nil {
		t.Fatalf("exec after auto-hibernate: %v", err)
	}
	if string(r.Stdout) != string(mark) {
		t.Fatalf("after auto-wake: %q, want %q", r.Stdout, mark)
	}
	t.Logf("exec on the auto-hibernated sandbox (wake + exec) took %v", time.Since(t0))
	if got := memValue(t, sb, pid); got != v {
		t.Fatalf("process memory after wake: %q, want %s", got, v)
	}
	// The setting outlives the wake: idle again, it sleeps again.
	eventually(t, idle*time.Second+2*time.Minute, "the woken sandbox to be hibernated again", func() bool {
		got, err := c.GetSandbox(ctx, sb.ID)
		return err == nil && got.State == "hibernated" && got.AutoHibernateSeconds == idle
	})

	// Bad values are refused up front.
	for _, bad := range []int{-1, 1 << 30} {
		if _, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, AutoHibernateSeconds: bad}); !sdk.IsInvalid(err) {
			t.Fatalf("auto_hibernate_seconds %d: %v, want invalid_argument", bad, err)
		}
	}
}
