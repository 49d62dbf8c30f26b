package functions

import (
	"context"
	"time"

	"github.com/pandastack/pandastack"
)

// Isolation modes.
const (
	IsolationFresh = "fresh" // a new microVM per invocation (default)
	IsolationWarm  = "warm"  // microVMs reused between invocations of a version
)

// warmTTL is the life of a warm microVM: past it (less the function's
// timeout) the pool lets it go; the sandbox TTL reaps one the pool lost
// (a crash).
const warmTTL = 10 * time.Minute

// warmVM is an idle warm microVM.
type warmVM struct {
	id      string
	expires time.Time
}

// pool holds one function's idle warm microVMs, of one version.
type pool struct {
	snapshot string
	idle     []warmVM
}

// takeWarm returns an idle warm VM of function fnID's version snapshot
// (one that has at least timeout of life left), or "".
func (s *Service) takeWarm(ctx context.Context, fnID, snapshot string, timeout time.Duration) string {
	s.mu.Lock()
	p := s.pools[fnID]
	if p == nil {
		p = &pool{snapshot: snapshot}
		s.pools[fnID] = p
	}
	var stale []string
	id := ""
	if p.snapshot == snapshot {
		for len(p.idle) > 0 && id == "" {
			vm := p.idle[len(p.idle)-1]
			p.idle = p.idle[:len(p.idle)-1]
			if time.Until(vm.expires) > timeout+time.Minute {
				id = vm.id
			} else {
				stale = append(stale, vm.id)
			}
		}
	}
	s.mu.Unlock()
	s.killVMs(ctx, stale)
	return id
}

// putWarm keeps VM id idle for the next invocation of the same version
// (at most max idle); it reports false when the caller must kill it: the
// pool is full, a newer version serves, or the function was deleted (a
// pool is made by takeWarm, dropped by drainWarm).
func (s *Service) putWarm(fnID, snapshot, id string, expires time.Time, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pools[fnID]
	if p == nil || p.snapshot != snapshot || len(p.idle) >= max {
		return false
	}
	p.idle = append(p.idle, warmVM{id: id, expires: expires})
	return true
}

// drainWarm kills function fnID's idle warm VMs unless they are of
// version keep (a deploy keeps none of the old; a delete keeps none).
func (s *Service) drainWarm(ctx context.Context, fnID, keep string) {
	s.mu.Lock()
	p := s.pools[fnID]
	var ids []string
	if p != nil && p.snapshot != keep {
		for _, vm := range p.idle {
			ids = append(ids, vm.id)
		}
		delete(s.pools, fnID)
		if keep != "" {
			s.pools[fnID] = &pool{snapshot: keep}
		}
	}
	s.mu.Unlock()
	s.killVMs(ctx, ids)
}

func (s *Service) killVMs(ctx context.Context, ids []string) {
	for _, id := range ids {
		if err := s.cfg.Engine.Kill(context.WithoutCancel(ctx), id, pandastack.StateKilled); err != nil {
			s.log.Error("kill a warm function VM", "sandbox", id, "err", err)
		}
	}
}
