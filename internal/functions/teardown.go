package functions

import (
	"context"
	"log/slog"

	"github.com/pandastack/pandastack"
)

// teardown kills invocation VM id in the background, off the answer's
// path (a kill stops QEMU and removes its files: tens of milliseconds),
// then runs after. The VM is already done with: its reply was read, or
// it timed out and its connection was closed. Wait waits for teardowns;
// a server that stops first leaves the VM to Recover at the next start.
func (s *Service) teardown(ctx context.Context, log *slog.Logger, id string, after func()) {
	s.teardowns.Add(1)
	go func() {
		defer s.teardowns.Done()
		if err := s.cfg.Engine.Kill(ctx, id, pandastack.StateKilled); err != nil {
			log.Error("kill invocation VM", "sandbox", id, "err", err)
		}
		if after != nil {
			after()
		}
	}()
}
