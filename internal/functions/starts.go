package functions

import (
	"context"
	"runtime"

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

// DefaultMaxStarting is how many invocation VMs start at once, per core.
const DefaultMaxStarting = 2

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
