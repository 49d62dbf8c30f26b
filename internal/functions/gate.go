package functions

import (
	"context"

	"github.com/pandastack/pandastack"
)

// gate holds a function's concurrency: slots running, and a bounded count
// of invocations waiting for one. Closing it (the function was deleted)
// fails the waiting ones.
type gate struct {
	slots   chan struct{}
	waiting int
	closed  chan struct{}
}

// admit takes a slot for function fnID (max running at once), or a place
// in its queue: the returned wait blocks until a slot is free and returns
// the slot's release. A full queue is ERateLimited (429, Retry-After).
func (s *Service) admit(fnID string, max int) (func(ctx context.Context) (func(), error), error) {
	s.mu.Lock()
	g := s.gates[fnID]
	if g == nil || cap(g.slots) != max {
		g = &gate{slots: make(chan struct{}, max), closed: make(chan struct{})}
		s.gates[fnID] = g
	}
	release := func() { <-g.slots }
	select {
	case g.slots <- struct{}{}:
		s.mu.Unlock()
		return func(context.Context) (func(), error) { return release, nil }, nil
	default:
	}
	if g.waiting >= s.cfg.MaxQueue {
		s.mu.Unlock()
		return nil, pandastack.Errorf(pandastack.ERateLimited, "the function is running %d invocations and %d more are queued; retry later", max, g.waiting)
	}
	g.waiting++
	s.mu.Unlock()
	return func(ctx context.Context) (func(), error) {
		defer func() {
			s.mu.Lock()
			g.waiting--
			s.mu.Unlock()
		}()
		select {
		case g.slots <- struct{}{}:
			return release, nil
		case <-g.closed:
			return nil, pandastack.Errorf(pandastack.EGone, "the function was deleted while this invocation was queued")
		case <-ctx.Done():
			return nil, pandastack.Errorf(pandastack.ETimeout, "gave up waiting for a free slot: %v", ctx.Err())
		}
	}, nil
}

// closeGate fails the invocations waiting on function fnID.
func (s *Service) closeGate(fnID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.gates[fnID]; g != nil {
		close(g.closed)
		delete(s.gates, fnID)
	}
}

// gateOpen says whether function fnID's gate is open: false once the
// function was deleted (and before its first invocation).
func (s *Service) gateOpen(fnID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gates[fnID] != nil
}
