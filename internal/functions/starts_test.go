package functions

import (
	"testing"
	"time"
)

// A start slot held past the VM's start goes back when the call ends, once
// however often that is said, or by itself after startHold when the call
// runs on (a long handler does not hold the line).
func TestHoldStartGivesTheSlotBack(t *testing.T) {
	s := New(Config{MaxStarting: 1})
	release, err := s.startSlot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	done := holdStart(release)
	done()
	done()
	release, err = s.startSlot(t.Context()) // the one slot is free again
	if err != nil {
		t.Fatal(err)
	}
	if len(s.starting) != 1 {
		t.Fatalf("%d slots taken, want 1", len(s.starting))
	}
	holdStart(release) // never called: the call runs on
	deadline := time.Now().Add(10 * startHold)
	for len(s.starting) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the slot was not given back %v after the start", 10*startHold)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
