package functions

import (
	"context"
	"testing"

	"github.com/pandastack/pandastack"
)

// A function runs at most its max concurrency at once; up to MaxQueue
// more wait; past that an invoke is rate_limited (429); deleting the
// function fails the waiting ones.
func TestConcurrencyGate(t *testing.T) {
	s := New(Config{MaxQueue: 2})
	ctx := context.Background()
	wait, err := s.admit("fn_1", 1)
	if err != nil {
		t.Fatal(err)
	}
	release, err := wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var waits []func(context.Context) (func(), error)
	for range 2 {
		w, err := s.admit("fn_1", 1)
		if err != nil {
			t.Fatalf("queued admit: %v", err)
		}
		waits = append(waits, w)
	}
	if _, err := s.admit("fn_1", 1); pandastack.ErrorCode(err) != pandastack.ERateLimited {
		t.Fatalf("admit past the queue: %v, want rate_limited", err)
	}
	got := make(chan error, 2)
	go func() {
		r, err := waits[0](ctx)
		if err == nil {
			r()
		}
		got <- err
	}()
	release()
	if err := <-got; err != nil {
		t.Fatalf("the queued invocation got no slot: %v", err)
	}
	// Another function has its own slots.
	if w, err := s.admit("fn_2", 1); err != nil {
		t.Fatal(err)
	} else if r, err := w(ctx); err != nil {
		t.Fatal(err)
	} else {
		r()
	}
	// Hold the slot again, queue one, delete: the queued one fails.
	w, _ := s.admit("fn_1", 1)
	hold, _ := w(ctx)
	defer hold()
	queued, err := s.admit("fn_1", 1)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, err := queued(ctx); got <- err }()
	s.closeGate("fn_1")
	if err := <-got; pandastack.ErrorCode(err) != pandastack.EGone {
		t.Fatalf("a queued invocation of a deleted function: %v, want gone", err)
	}
}
