package qemu_test

import (
	"testing"
	"time"
)

// A pool's size can go down: a lower n kills the ready processes above
// it, and 0 drops the pool, killing what it holds (a function's version is
// replaced or deleted; its snapshot's files may be gone by then).
func TestPoolShrinksAndDrops(t *testing.T) {
	s := template(t)
	dir := vmDir(t)
	d := newDriver(t, dir)
	d.Prewarm(s, 2)
	waitPool(t, d, s.Key, 2)
	waitProcs := func(want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for qemuPIDs(dir) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d qemu processes, want %d", qemuPIDs(dir), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitProcs(2)
	d.Prewarm(s, 1)
	if n := d.PoolReady(s.Key); n != 1 {
		t.Fatalf("%d ready after the pool went down to 1", n)
	}
	waitProcs(1)
	d.Prewarm(s, 0)
	if n := d.PoolReady(s.Key); n != 0 {
		t.Fatalf("%d ready after the pool was dropped", n)
	}
	waitProcs(0)
	if ids, _ := d.List(); len(ids) != 0 {
		t.Fatalf("vm dirs left after the pool was dropped: %v", ids)
	}
}
