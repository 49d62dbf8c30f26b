package hostagent

import (
	"context"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
)

// A sandbox whose OnExpiry is hibernate is not ended when its deadline
// passes: it is hibernated, and its deadline cleared, so it sleeps — its
// disk still held — until it is woken (on request or on use; its TTL then
// starts again) or killed. One that was already asleep at its deadline
// just loses the deadline. One that cannot be hibernated (its state could
// not be saved) is ended as any expired sandbox is: a deadline is never
// outlived by a running VM.

// hibernateExpired hibernates each of due (sandboxes past their deadline
// that hibernate on expiry, each marked expiring by the reaper), each in its
// own goroutine so that a slow save does not hold up the reaper.
func (a *Agent) hibernateExpired(ctx context.Context, due []*sandbox) {
	for _, s := range due {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer func() {
				s.mu.Lock()
				s.expiring = false
				s.mu.Unlock()
			}()
			if a.clearDeadlineAsleep(s) {
				return
			}
			if _, err := a.hibernate(ctx, s, hibExpired); err != nil {
				a.log.Error("hibernate at the TTL's end failed; ending the sandbox instead", "sandbox", s.rec.ID, "err", err)
				if _, err := a.end(ctx, s, pandastack.StateExpired, "ttl expired; hibernating it failed", hostapi.EventExpired); err != nil {
					a.log.Error("expire sandbox", "sandbox", s.rec.ID, "err", err)
				}
			}
		}()
	}
}

// clearDeadlineAsleep clears the passed deadline of s when it is already
// hibernated and reports whether it was.
func (a *Agent) clearDeadlineAsleep(s *sandbox) bool {
	s.op.Lock()
	defer s.op.Unlock()
	a.mu.Lock()
	ended := a.sbx[s.rec.ID] != s
	a.mu.Unlock()
	if ended {
		return true
	}
	s.mu.Lock()
	if s.rec.State != pandastack.StateHibernated || !expired(s.rec, time.Now()) {
		s.mu.Unlock()
		return false
	}
	s.rec.ExpiresAt = time.Time{}
	s.rec.Seq++
	m := s.rec
	s.mu.Unlock()
	a.keepState(s)
	a.emit(hostapi.EventHibernated, m, false)
	return true
}

// resumeTTL is the life a sandbox hibernated at its deadline gets when it
// is woken: the TTL it was created with.
func resumeTTL(m hostapi.Machine) time.Duration {
	if m.TTL > 0 {
		return m.TTL
	}
	return hostapi.DefaultResumeTTL
}
