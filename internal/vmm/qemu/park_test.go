package qemu_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/vmm"
	"github.com/pandastack/pandastack/internal/vmm/qemu"
)

// A hibernated VM's process is parked: a wake under the same id continues
// that process, guest memory and all; past the limit the oldest parked
// process ends and its wake restores from disk; a hibernation removed
// ends its parked process; Close ends them all.
func TestHibernatedProcessIsParked(t *testing.T) {
	s := template(t)
	dir := vmDir(t)
	for p := dir; p != "/"; p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o711)
	}
	d, err := qemu.New(qemu.Config{Dir: dir, UIDBase: qemu.DefaultUIDBase, MaxParked: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx := context.Background()
	hib := dir + "-hib"
	if err := os.MkdirAll(hib, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(hib) })

	start := func(id string) vmm.VM {
		t.Helper()
		v, err := d.Restore(ctx, s, vmm.RestoreOptions{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Kill(context.Background()) })
		return v
	}
	// mark writes into the guest's memory (tmpfs) and checks it is there.
	mark := func(v vmm.VM, write bool) {
		t.Helper()
		cl := agent(t, v)
		defer cl.Close()
		script := "cat /dev/shm/mark"
		if write {
			script = "echo " + v.ID() + " > /dev/shm/mark; " + script
		}
		if got := guestShUntil(t, cl, script, v.ID()); !strings.Contains(got, v.ID()) {
			t.Fatalf("%s: guest memory has %q", v.ID(), got)
		}
	}
	hibernate := func(v vmm.VM) {
		t.Helper()
		if err := d.Hibernate(ctx, v, filepath.Join(hib, v.ID())); err != nil {
			t.Fatal(err)
		}
	}
	wake := func(id string) vmm.VM {
		t.Helper()
		snap, err := vmm.LoadSaved(filepath.Join(hib, id))
		if err != nil {
			t.Fatal(err)
		}
		v, err := d.Restore(ctx, snap, vmm.RestoreOptions{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Kill(context.Background()) })
		// As a wake does once the guest answers: the VM runs on its own
		// files now (moved back, or clones).
		if err := os.RemoveAll(filepath.Join(hib, id)); err != nil {
			t.Fatal(err)
		}
		return v
	}
	alive := func(pid int) bool { return syscall.Kill(pid, 0) == nil }
	waitGone := func(pid int, what string) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); alive(pid); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: process %d still runs", what, pid)
			}
		}
	}

	a := start("a")
	mark(a, true)
	pidA := a.PID()
	hibernate(a)
	if !alive(pidA) {
		t.Fatal("a's process ended on hibernate: not parked")
	}
	if ids, _ := d.List(); len(ids) != 0 {
		t.Fatalf("a parked VM is listed as a VM: %v", ids)
	}
	a = wake("a")
	if a.PID() != pidA {
		t.Fatalf("wake started process %d, want the parked %d", a.PID(), pidA)
	}
	mark(a, false)

	// One parked at most: parking b ends a's process; a's wake restores
	// from its hibernation, memory intact.
	b := start("b")
	mark(b, true)
	pidB := b.PID()
	hibernate(a)
	hibernate(b)
	waitGone(pidA, "a, parked before b past the limit")
	if !alive(pidB) {
		t.Fatal("b's process ended: it is the one parked")
	}
	a = wake("a")
	if a.PID() == pidA {
		t.Fatal("a woke in its ended process")
	}
	mark(a, false)

	// A hibernation removed (the sandbox deleted) ends its parked process.
	if err := os.RemoveAll(filepath.Join(hib, "b")); err != nil {
		t.Fatal(err)
	}
	waitGone(pidB, "b, its hibernation removed")

	// Close ends the parked processes; their hibernations stay.
	pidA = a.PID()
	hibernate(a)
	if !alive(pidA) {
		t.Fatal("a's process ended on hibernate: not parked")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(pidA, "a, parked when the driver closed")
	if _, err := vmm.LoadSaved(filepath.Join(hib, "a")); err != nil {
		t.Fatalf("a's hibernation after close: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".park-*")); len(left) > 0 {
		t.Fatalf("parked directories left: %v", left)
	}
}
