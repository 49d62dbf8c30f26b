package hostagent

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// hibDir is where a hibernated sandbox's state and disk are kept.
func (a *Agent) hibDir(id string) string { return filepath.Join(a.cfg.HibernateDir, id) }

// Hibernate saves a running sandbox whole — memory, devices, disk — and ends
// its VM. Its TTL keeps counting while it sleeps. Hibernating a hibernated
// sandbox does nothing.
func (a *Agent) Hibernate(ctx context.Context, id string) (hostapi.Machine, error) {
	s, err := a.get(ctx, id)
	if err != nil {
		return hostapi.Machine{}, err
	}
	return a.hibernate(ctx, s, hibAsked)
}

// hibCause is why a sandbox is hibernated.
type hibCause int

const (
	hibAsked   hibCause = iota // on request
	hibIdle                    // auto-hibernate: idle for its time
	hibExpired                 // its deadline passed and it hibernates on expiry
)

// hibernate saves s whole and ends its VM. For an idle sandbox
// (auto-hibernate) it does nothing unless s is still idle once it holds
// s.op: a use that came in since the reaper looked keeps it running. For an
// expired one likewise unless its deadline is still past (a new TTL may
// have come in); its deadline is then cleared: it sleeps until woken.
func (a *Agent) hibernate(ctx context.Context, s *sandbox, cause hibCause) (hostapi.Machine, error) {
	onlyIfIdle := cause == hibIdle
	s.op.Lock()
	defer s.op.Unlock()
	a.mu.Lock()
	ended := a.sbx[s.rec.ID] != s
	a.mu.Unlock()
	s.mu.Lock()
	id := s.rec.ID
	if ended || s.rec.State == pandastack.StateHibernated || (onlyIfIdle && !s.idleLocked(time.Now())) ||
		(cause == hibExpired && !expired(s.rec, time.Now())) {
		rec := s.rec
		s.mu.Unlock()
		return rec, nil
	}
	v, client := s.vm, s.client
	s.mu.Unlock()
	t0 := time.Now()
	if err := client.Sync(ctx); err != nil {
		return hostapi.Machine{}, fmt.Errorf("hibernate %s: sync guest disks: %w", id, err)
	}
	s.mu.Lock()
	s.sleeping = true // the VM's exit is expected
	s.mu.Unlock()
	client.Close()
	if err := a.cfg.Driver.Hibernate(ctx, v, a.hibDir(id)); err != nil {
		s.mu.Lock()
		s.sleeping = false
		s.mu.Unlock()
		// The VM runs on: reconnect to it.
		if c, cerr := a.connect(ctx, v); cerr == nil {
			s.mu.Lock()
			s.client = c
			s.mu.Unlock()
		}
		return hostapi.Machine{}, saveError(err, a.cfg.HibernateDir, id, "could not hibernate the sandbox; it keeps running")
	}
	s.mu.Lock()
	s.vm, s.client = nil, nil
	if s.unwatch != nil {
		close(s.unwatch)
		s.unwatch = nil
	}
	s.rec.State = pandastack.StateHibernated
	if cause == hibExpired {
		s.rec.ExpiresAt = time.Time{}
	}
	s.rec.Seq++
	rec := s.rec
	s.mu.Unlock()
	a.keepState(s)
	a.emit(hostapi.EventHibernated, rec, onlyIfIdle)
	a.log.Info("sandbox hibernated", "sandbox", id, "auto", onlyIfIdle, "expired", cause == hibExpired, "ms", ms(time.Since(t0)))
	return rec, nil
}

// Wake brings a hibernated sandbox back exactly as it was. Waking a running
// sandbox does nothing.
func (a *Agent) Wake(ctx context.Context, id string) (hostapi.Machine, error) {
	s, err := a.get(ctx, id)
	if err != nil {
		return hostapi.Machine{}, err
	}
	if err := a.wake(ctx, s); err != nil {
		return hostapi.Machine{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec, nil
}

func (a *Agent) wake(ctx context.Context, s *sandbox) error {
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	if s.rec.State != pandastack.StateHibernated {
		s.mu.Unlock()
		return nil
	}
	id := s.rec.ID
	s.mu.Unlock()
	end, err := a.starts.begin()
	if err != nil {
		return err
	}
	defer end()
	t0 := time.Now()
	snap, err := vmm.LoadSaved(a.hibDir(id))
	if err != nil {
		return &pandastack.Error{Code: pandastack.EUnavailable, Message: "the hibernated sandbox's state is missing", Err: err}
	}
	// Its durable volumes stayed attached while it slept: the VM opens
	// them again (its volume copies were kept with its state).
	s.mu.Lock()
	vols := s.rec.Volumes
	s.mu.Unlock()
	if n := a.durableSlots(vols, &snap); n > 0 {
		s.mu.Lock()
		s.volumes = true
		s.mu.Unlock()
	}
	v, err := a.cfg.Driver.Restore(ctx, snap, vmm.RestoreOptions{ID: id, Network: a.policy(id)})
	if err != nil {
		return &pandastack.Error{Code: pandastack.EUnavailable, Message: "the sandbox could not be woken", Err: err}
	}
	client, err := a.connect(ctx, v)
	if err != nil {
		v.Kill(context.Background())
		return &pandastack.Error{Code: pandastack.EUnavailable, Message: "the woken sandbox did not answer", Err: err}
	}
	a.discard(a.hibDir(id)) // the VM runs on clones of these files
	s.mu.Lock()
	s.vm, s.client, s.sleeping = v, client, false
	s.rec.State = pandastack.StateRunning
	if s.rec.ExpiresAt.IsZero() && s.rec.OnExpiry.Hibernates() && !s.rec.Lifetime.IsService() {
		s.rec.ExpiresAt = time.Now().UTC().Add(resumeTTL(s.rec))
	}
	s.rec.Seq++
	s.lastUsed = time.Now()
	rec := s.rec
	s.mu.Unlock()
	a.keepState(s)
	go a.watch(s)
	a.emit(hostapi.EventWoken, rec, false)
	a.log.Info("sandbox woken", "sandbox", id, "ms", ms(time.Since(t0)))
	return nil
}
