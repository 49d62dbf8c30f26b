package e2e

import (
	"context"
	"strings"
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
	// A process that keeps a random value only in its memory and prints it on SIGUSR1.
	pid, err := sb.StartBackground(ctx, `python3 -c "
import os, signal, sys, time
v = os.urandom(8).hex()
open('/tmp/v', 'w').write(v)
signal.signal(signal.SIGUSR1, lambda *a: (print(v, flush=True)))
while True: time.sleep(0.05)
"`, sdk.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var v string
	eventually(t, 20*time.Second, "the process to write its value", func() bool {
		b, err := sb.Files().Read(ctx, "/tmp/v")
		v = string(b)
		return err == nil && len(v) == 16
	})

	t0 := time.Now()
	if err := sb.Hibernate(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("hibernate took %v", time.Since(t0))
	if sb.State != "hibernated" {
		t.Fatalf("state %q after hibernate", sb.State)
	}
	for _, pid := range qemuProcesses(main.dataDir) {
		if strings.Contains(cmdline(pid), sb.ID) {
			t.Fatalf("QEMU for %s still runs while hibernated", sb.ID)
		}
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
	go func() { time.Sleep(500 * time.Millisecond); _ = sb.Signal(ctx, pid, "USR1") }()
	var out strings.Builder
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, _ = sb.Attach(actx, pid, sdk.AttachOptions{OnStdout: func(b []byte) {
		out.Write(b)
		if strings.Contains(out.String(), "\n") {
			cancel()
		}
	}})
	if strings.TrimSpace(out.String()) != v {
		t.Fatalf("process memory after wake: %q, want %s", out.String(), v)
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
