package functions

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
)

// A fresh invocation's VM start (a QEMU process restoring the version's
// snapshot, the guest running its first code after the restore, the
// agent's handshake) is CPU-bound: under TCG a core runs one or two of
// them at a time. A burst that starts every VM at once shares the cores
// among all of them, so each start takes as long as the whole burst, and
// a guest starved for seconds can miss its agent's and the host's
// deadlines. The starts are admitted a few at a time instead; the others
// wait for a place in line (still bounded per function by its gate, which
// answers 429 past its queue), so a burst finishes no later and every
// invocation in it answers.
//
// A start is more than the create: after its agent answered, the restored
// guest still runs code for the first time in its QEMU process (under TCG
// each path is translated on its first run) to take the dial and run the
// shim's call, as much CPU again as the restore and handshake took
// (measured: create ~200 ms, dial ~200 ms, call ~130 ms of one invocation
// on a loaded 2-core host). An invocation keeps its place in line through
// its call, until it answered or for startHold after its VM started,
// whichever comes first: a burst then has a few guests starting at a time
// instead of every guest past its create starving the others of CPU, and
// a handler that runs long does not hold the line.

// DefaultMaxStarting is how many invocation VMs start at once, per core.
const DefaultMaxStarting = 2

// startHold is the longest an invocation keeps its start slot after its VM
// started (its dial and call running on).
const startHold = time.Second

// holdStart gives back a start slot (release) when the returned func is
// called or startHold has passed, whichever is first.
func holdStart(release func()) func() {
	var once sync.Once
	done := func() { once.Do(release) }
	t := time.AfterFunc(startHold, done)
	return func() {
		t.Stop()
		done()
	}
}

// startSlot waits for a place among the VM starts in progress and
// returns its release. ctx ending first is ETimeout.
func (s *Service) startSlot(ctx context.Context) (func(), error) {
	select {
	case s.starting <- struct{}{}:
		return func() { <-s.starting }, nil
	case <-ctx.Done():
		return nil, pandastack.Errorf(pandastack.ETimeout, "gave up waiting to start the function's VM: %v", ctx.Err())
	}
}

func defaultMaxStarting() int { return DefaultMaxStarting * runtime.NumCPU() }
