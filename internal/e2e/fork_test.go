package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// memProcess is a background process that keeps a random value only in
// its memory (and in tmpfs at /tmp/v) and prints it on SIGUSR1.
const memProcess = `python3 -c "
import os, signal, time
v = os.urandom(8).hex()
open('/tmp/v', 'w').write(v)
signal.signal(signal.SIGUSR1, lambda *a: print(v, flush=True))
while True: time.sleep(0.05)
"`

// startMemProcess starts memProcess in sb and returns its pid and value.
func startMemProcess(t *testing.T, sb *sdk.Sandbox) (int, string) {
	t.Helper()
	ctx := context.Background()
	pid, err := sb.StartBackground(ctx, memProcess, sdk.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var v string
	eventually(t, 20*time.Second, "the process to write its value", func() bool {
		b, err := sb.Files().Read(ctx, "/tmp/v")
		v = string(b)
		return err == nil && len(v) == 16
	})
	return pid, v
}

// memValue asks the background process for the value it holds in memory.
func memValue(t *testing.T, sb *sdk.Sandbox, pid int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() { time.Sleep(300 * time.Millisecond); _ = sb.Signal(ctx, pid, "USR1") }()
	var out strings.Builder
	_, _ = sb.Attach(ctx, pid, sdk.AttachOptions{OnStdout: func(b []byte) {
		out.Write(b)
		if strings.Count(out.String(), "\n") >= 1 {
			cancel()
		}
	}})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1]
}

func TestFork(t *testing.T) {
	ctx := context.Background()
	c := teamClient(t, "fork")
	parent := newSandbox(t, c, sdk.CreateSandboxParams{Metadata: map[string]string{"exp": "1"}})
	pid, v := startMemProcess(t, parent)
	if _, err := parent.Files().Write(ctx, "/root/shared.txt", []byte("before fork")); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	kids, err := parent.ForkN(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fork of 2 took %v", time.Since(t0))
	for _, k := range kids {
		t.Cleanup(func() { _ = k.Kill(context.Background()) })
		if k.ID == parent.ID || k.Metadata["forked_from"] != parent.ID || k.Metadata["exp"] != "1" {
			t.Fatalf("child %+v", k)
		}
	}
	// Every child has the parent's memory: the same process, the same value.
	for i, k := range kids {
		if got := memValue(t, k, pid); got != v {
			t.Fatalf("child %d: process memory %q, want %s", i, got, v)
		}
		if b, _ := k.Files().Read(ctx, "/root/shared.txt"); string(b) != "before fork" {
			t.Fatalf("child %d: disk %q", i, b)
		}
	}
	// Writes are private to each branch, memory (tmpfs) and disk alike.
	if _, err := kids[0].Files().Write(ctx, "/tmp/v", []byte("child0")); err != nil {
		t.Fatal(err)
	}
	if _, err := kids[0].Files().Write(ctx, "/root/shared.txt", []byte("child0")); err != nil {
		t.Fatal(err)
	}
	for name, sb := range map[string]*sdk.Sandbox{"parent": parent, "sibling": kids[1]} {
		for _, p := range []string{"/tmp/v", "/root/shared.txt"} {
			b, err := sb.Files().Read(ctx, p)
			if err != nil || string(b) == "child0" {
				t.Fatalf("%s sees the child's write to %s: %q %v", name, p, b, err)
			}
		}
	}
	// The parent runs on, and a fork of a fork works.
	if r, err := parent.Exec(ctx, "echo alive", sdk.ExecOptions{}); err != nil || string(r.Stdout) != "alive\n" {
		t.Fatalf("parent after fork: %v", err)
	}
	grand, err := kids[0].Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = grand.Kill(context.Background()) })
	if b, _ := grand.Files().Read(ctx, "/root/shared.txt"); string(b) != "child0" {
		t.Fatalf("grandchild disk %q", b)
	}
	if got := memValue(t, grand, pid); got != v {
		t.Fatalf("grandchild process memory %q", got)
	}
	// Bad input.
	if _, err := parent.ForkN(ctx, 11); !sdk.IsInvalid(err) {
		t.Fatalf("fork count 11: %v", err)
	}
	dead := newSandbox(t, c, sdk.CreateSandboxParams{})
	_ = dead.Kill(ctx)
	if _, err := dead.Fork(ctx); !sdk.IsGone(err) {
		t.Fatalf("fork of a killed sandbox: %v", err)
	}
}
