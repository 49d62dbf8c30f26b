package cron

import (
	"context"
	"fmt"
	"time"

	"github.com/pandastack/pandastack"
)

// Run delivers again the runs a previous server claimed but did not end
// (same execution ids: the at-least-once window), then fires due
// schedules until ctx is done, and waits for the runs in flight. It looks
// every Tick, and sooner when a schedule is due sooner: a run fires at
// its time, not up to a Tick after it (a fixed tick made a per-second
// schedule's lateness whatever the tick's phase happened to be, 0–200 ms,
// the same for every run of one server).
func (s *Service) Run(ctx context.Context) error {
	open, err := s.cfg.Store.OpenRuns(ctx)
	if err != nil {
		return fmt.Errorf("cron: list open runs: %w", err)
	}
	for _, r := range open {
		sc, err := s.cfg.Store.GetSchedule(ctx, r.ScheduleID)
		if err != nil {
			continue
		}
		s.log.Info("cron: delivering a run again after a restart", "schedule", sc.ID, "execution", r.ID, "status", r.Status)
		s.dispatch(ctx, sc, r)
	}
	t := time.NewTimer(s.cfg.Tick)
	defer t.Stop()
	for {
		wait := s.cfg.Tick
		if next := s.Tick(ctx); !next.IsZero() {
			wait = min(wait, max(next.Sub(s.cfg.Now()), 5*time.Millisecond))
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			s.wg.Wait()
			return nil
		case <-t.C:
		}
	}
}

// Tick fires every schedule that is due, and returns the earliest time a
// schedule is due next (zero: none is).
func (s *Service) Tick(ctx context.Context) (next time.Time) {
	scheds, err := s.cfg.Store.ListSchedules(ctx, "")
	if err != nil {
		s.log.Error("cron: list schedules", "err", err)
		return time.Time{}
	}
	earliest := func(t *time.Time) {
		if t != nil && (next.IsZero() || t.Before(next)) {
			next = *t
		}
	}
	now := s.cfg.Now().UTC()
	for _, sc := range scheds {
		if sc.NextFireAt == nil || sc.NextFireAt.After(now) {
			earliest(sc.NextFireAt)
			continue
		}
		spec, err := Parse(sc.Expr, sc.TZ)
		if err != nil {
			s.log.Error("cron: a stored schedule does not parse", "schedule", sc.ID, "err", err)
			continue
		}
		runs, after := Plan(sc, spec, now, s.cfg.Grace)
		ok, err := s.cfg.Store.ClaimRuns(ctx, sc.ID, sc.NextFireAt, after, runs)
		if err != nil {
			s.log.Error("cron: claim runs", "schedule", sc.ID, "err", err)
			continue
		}
		if !ok {
			continue // claimed by another (or deleted)
		}
		earliest(after)
		for _, r := range runs {
			if r.Status == RunPending {
				s.dispatch(ctx, sc, r)
			}
		}
	}
	return next
}

// Plan decides what schedule sc, due at *sc.NextFireAt, fires at now: the
// runs to record (pending ones fire; skipped ones are history) and the
// next fire time (nil: none). An occurrence more than grace late was
// missed: with MissedSkip the latest missed one is recorded as skipped
// and nothing fires; with MissedCatchUp the latest missed one fires once.
func Plan(sc Schedule, spec Spec, now time.Time, grace time.Duration) ([]Run, *time.Time) {
	due := *sc.NextFireAt
	nextPtr := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	if now.Sub(due) <= grace {
		return []Run{{ID: ExecutionID(sc.ID, due), ScheduleID: sc.ID, FireAt: due, Status: RunPending}}, nextPtr(spec.Next(due))
	}
	// Walk the missed occurrences to the latest; the one after it is the
	// next fire (on the schedule's grid, also for @every).
	latest, missed, following := due, 1, time.Time{}
	for i := 0; i < maxCatchUp; i++ {
		n := spec.Next(latest)
		if n.IsZero() || n.After(now) {
			following = n
			break
		}
		latest, missed = n, missed+1
	}
	if following.IsZero() {
		following = spec.Next(now)
	}
	r := Run{ID: ExecutionID(sc.ID, latest), ScheduleID: sc.ID, FireAt: latest}
	if sc.Missed == MissedCatchUp {
		r.Status, r.Message = RunPending, fmt.Sprintf("catch-up: %d occurrence(s) were missed; this runs the latest once", missed)
	} else {
		end := now
		r.Status, r.Message, r.EndedAt = RunSkipped, fmt.Sprintf("missed: %d occurrence(s) passed while the server was down", missed), &end
	}
	return []Run{r}, nextPtr(following)
}

// dispatch runs r as sc's overlap policy says.
func (s *Service) dispatch(ctx context.Context, sc Schedule, r Run) {
	s.mu.Lock()
	busy := s.running[sc.ID] > 0
	switch {
	case busy && sc.Overlap == OverlapSkip:
		s.mu.Unlock()
		now := s.cfg.Now().UTC()
		r.Status, r.Message, r.EndedAt = RunSkipped, "the previous run was still running (overlap skip)", &now
		s.update(ctx, r)
		return
	case busy && sc.Overlap == OverlapQueue:
		s.queued[sc.ID] = append(s.queued[sc.ID], r)
		s.mu.Unlock()
		r.Status = RunQueued
		s.update(ctx, r)
		return
	}
	s.running[sc.ID]++
	s.mu.Unlock()
	s.wg.Add(1)
	go s.execute(context.WithoutCancel(ctx), sc, r)
}

// execute runs r, records how it ended, then starts the next queued run.
func (s *Service) execute(ctx context.Context, sc Schedule, r Run) {
	defer s.wg.Done()
	for {
		start := s.cfg.Now().UTC()
		r.Status, r.StartedAt, r.EndedAt, r.Attempts = RunRunning, &start, nil, r.Attempts+1
		s.update(ctx, r)
		var inv, status, msg string
		var err error
		if _, gerr := s.cfg.Store.GetSchedule(ctx, sc.ID); pandastack.ErrorCode(gerr) == pandastack.ENotFound {
			err = fmt.Errorf("the schedule was deleted before this run started")
		} else {
			inv, status, msg, err = s.cfg.Invoker.InvokeScheduled(ctx, sc.TeamID, sc.Function, sc.Data, r.ID, r.FireAt)
		}
		if s.stopping.Load() {
			// The server's stop may be what ended it: left open, it is
			// delivered again at the next start (Stop).
			s.log.Info("cron: run left open at the server's stop, to be delivered again", "schedule", sc.ID, "execution", r.ID)
			return
		}
		end := s.cfg.Now().UTC()
		r.InvocationID, r.EndedAt, r.DurationMs = inv, &end, end.Sub(start).Milliseconds()
		switch {
		case err != nil:
			r.Status, r.Message = RunFailed, err.Error()
		case status == RunSucceeded || status == RunTimedOut:
			r.Status, r.Message = status, msg
		default:
			r.Status, r.Message = RunFailed, msg
		}
		s.update(ctx, r)
		s.mu.Lock()
		q := s.queued[sc.ID]
		if len(q) == 0 {
			s.running[sc.ID]--
			if s.running[sc.ID] == 0 {
				delete(s.running, sc.ID)
			}
			delete(s.queued, sc.ID)
			s.mu.Unlock()
			return
		}
		r, s.queued[sc.ID] = q[0], q[1:]
		s.mu.Unlock()
	}
}

func (s *Service) update(ctx context.Context, r Run) {
	if err := s.cfg.Store.UpdateRun(ctx, r); err != nil {
		s.log.Error("cron: record run", "execution", r.ID, "err", err)
	}
}

// Wait waits for the runs in flight.
func (s *Service) Wait() { s.wg.Wait() }

// Stop, at the server's stop and before the invocations in flight are
// ended, leaves every run that ends from then on open (running, its end
// not recorded) and starts no queued one: the next start delivers them
// again with their execution ids, the at-least-once window a crash has,
// instead of recording as failed what the stop itself cut short.
func (s *Service) Stop() { s.stopping.Store(true) }
