package cron_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cron"
	"github.com/pandastack/pandastack/internal/store/sqlite"
)

// invoker is a stand-in for the functions service (which needs VMs): it
// records each delivery and, when gate is set, holds each until released.
type invoker struct {
	mu    sync.Mutex
	calls []string // execution ids, in delivery order
	gate  chan struct{}
	began chan string
}

func (f *invoker) Check(context.Context, string, string) error { return nil }

func (f *invoker) InvokeScheduled(ctx context.Context, team, fn string, data []byte, exe string, at time.Time) (string, string, string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, exe)
	f.mu.Unlock()
	if f.began != nil {
		f.began <- exe
	}
	if f.gate != nil {
		<-f.gate
	}
	return "inv_" + exe, cron.RunSucceeded, "", nil
}

func (f *invoker) delivered() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// clock is a settable Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func newStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), t.TempDir()+"/ps.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTeam(t.Context(), pandastack.Team{ID: "team_1", Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	return st
}

var t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

func newService(st cron.Store, inv cron.Invoker, c *clock) *cron.Service {
	return cron.New(cron.Config{Store: st, Invoker: inv, Now: c.now, Grace: time.Minute})
}

func create(t *testing.T, svc *cron.Service, expr, overlap string) cron.Schedule {
	t.Helper()
	sc, err := svc.Create(t.Context(), "team_1", cron.CreateParams{Function: "f", Schedule: expr, Overlap: overlap, Data: json.RawMessage(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func runs(t *testing.T, st cron.Store, id string) []cron.Run {
	t.Helper()
	rs, err := st.ListRuns(t.Context(), id, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// Two schedulers over one store (two ticks racing, or two replicas) claim
// each occurrence once: one delivery per execution id.
func TestEachOccurrenceIsClaimedOnce(t *testing.T) {
	st := newStore(t)
	c := &clock{t: t0}
	inv := &invoker{}
	a, b := newService(st, inv, c), newService(st, inv, c)
	sc := create(t, a, "* * * * * *", cron.OverlapAllow)
	for i := 1; i <= 20; i++ {
		c.set(t0.Add(time.Duration(i) * time.Second))
		var wg sync.WaitGroup
		for _, s := range []*cron.Service{a, b, a, b} {
			wg.Add(1)
			go func() { defer wg.Done(); s.Tick(t.Context()) }()
		}
		wg.Wait()
	}
	a.Wait()
	b.Wait()
	got := inv.delivered()
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("execution %s delivered twice: %v", id, got)
		}
		seen[id] = true
	}
	if len(got) != 20 {
		t.Fatalf("%d deliveries for 20 occurrences: %v", len(got), got)
	}
	rs := runs(t, st, sc.ID)
	for _, r := range rs {
		if r.Status != cron.RunSucceeded || r.ID != cron.ExecutionID(sc.ID, r.FireAt) || r.InvocationID != "inv_"+r.ID {
			t.Fatalf("run %+v", r)
		}
	}
}

// A run claimed (pending) or started (running) when the server died is
// delivered again at the next start, with the same execution id; a run
// that ended is not.
func TestRestartDeliversOpenRunsAgain(t *testing.T) {
	st := newStore(t)
	c := &clock{t: t0}
	svc := newService(st, &invoker{}, c)
	sc := create(t, svc, "@every 10s", cron.OverlapAllow)
	due := *sc.NextFireAt
	next := due.Add(10 * time.Second)
	pending := cron.Run{ID: cron.ExecutionID(sc.ID, due), ScheduleID: sc.ID, FireAt: due, Status: cron.RunPending}
	if ok, err := st.ClaimRuns(t.Context(), sc.ID, &due, &next, []cron.Run{pending}); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	// A second claim of the same occurrence is refused.
	if ok, err := st.ClaimRuns(t.Context(), sc.ID, &due, &next, []cron.Run{pending}); ok || err != nil {
		t.Fatalf("second claim: %v %v", ok, err)
	}
	started := t0
	running := cron.Run{ID: cron.ExecutionID(sc.ID, next), ScheduleID: sc.ID, FireAt: next, Status: cron.RunPending}
	after := next.Add(10 * time.Second)
	if ok, err := st.ClaimRuns(t.Context(), sc.ID, &next, &after, []cron.Run{running}); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	running.Status, running.StartedAt, running.Attempts = cron.RunRunning, &started, 1
	if err := st.UpdateRun(t.Context(), running); err != nil {
		t.Fatal(err)
	}

	// The "restarted" server.
	inv := &invoker{}
	restart := func(inv *invoker, want int) {
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- newService(st, inv, c).Run(ctx) }()
		for deadline := time.Now().Add(10 * time.Second); len(inv.delivered()) < want && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // a delivery too many would show
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	restart(inv, 2)
	got := inv.delivered()
	if len(got) != 2 || !(got[0] == pending.ID || got[1] == pending.ID) || !(got[0] == running.ID || got[1] == running.ID) {
		t.Fatalf("delivered %v, want %s and %s again", got, pending.ID, running.ID)
	}
	for _, r := range runs(t, st, sc.ID) {
		want := 1
		if r.ID == running.ID {
			want = 2
		}
		if r.Status != cron.RunSucceeded || r.Attempts != want {
			t.Fatalf("run %+v: want succeeded after %d attempt(s)", r, want)
		}
	}
	// Nothing is open any more: another restart delivers nothing.
	inv2 := &invoker{}
	restart(inv2, 0)
	if len(inv2.delivered()) != 0 {
		t.Fatalf("ended runs delivered again: %v", inv2.delivered())
	}
}

func TestOverlapPolicies(t *testing.T) {
	for _, tc := range []struct {
		overlap      string
		wantStatuses map[string]int // once the first run is released
		concurrent   int            // deliveries while the first is held
	}{
		{cron.OverlapSkip, map[string]int{cron.RunSucceeded: 1, cron.RunSkipped: 2}, 1},
		{cron.OverlapQueue, map[string]int{cron.RunSucceeded: 3}, 1},
		{cron.OverlapAllow, map[string]int{cron.RunSucceeded: 3}, 3},
	} {
		t.Run(tc.overlap, func(t *testing.T) {
			st := newStore(t)
			c := &clock{t: t0}
			inv := &invoker{gate: make(chan struct{}), began: make(chan string, 10)}
			svc := newService(st, inv, c)
			sc := create(t, svc, "* * * * * *", tc.overlap)
			for i := 1; i <= 3; i++ {
				c.set(t0.Add(time.Duration(i) * time.Second))
				svc.Tick(t.Context())
			}
			for range tc.concurrent {
				<-inv.began
			}
			select {
			case exe := <-inv.began:
				t.Fatalf("%s delivered while the first run still runs", exe)
			case <-time.After(100 * time.Millisecond):
			}
			go func() {
				for range inv.began {
				}
			}()
			close(inv.gate)
			svc.Wait()
			close(inv.began)
			got := map[string]int{}
			for _, r := range runs(t, st, sc.ID) {
				got[r.Status]++
			}
			for k, v := range tc.wantStatuses {
				if got[k] != v {
					t.Fatalf("statuses %v, want %v", got, tc.wantStatuses)
				}
			}
			if tc.overlap == cron.OverlapQueue {
				d := inv.delivered()
				for i := 1; i < len(d); i++ {
					if d[i] == d[i-1] {
						t.Fatalf("queue delivered %v", d)
					}
				}
			}
		})
	}
}

// A run in flight when the server stops (Stop, then the invocation ends,
// cut short by the stop) is left open, not recorded as ended: the next
// start delivers it again with the same execution id.
func TestStopLeavesTheRunInFlightOpen(t *testing.T) {
	st := newStore(t)
	c := &clock{t: t0}
	inv := &invoker{gate: make(chan struct{}), began: make(chan string, 1)}
	svc := newService(st, inv, c)
	sc := create(t, svc, "@every 10s", cron.OverlapAllow)
	c.set(*sc.NextFireAt)
	svc.Tick(t.Context())
	var id string
	select {
	case id = <-inv.began:
	case <-time.After(10 * time.Second):
		t.Fatal("the due run was not delivered")
	}
	svc.Stop()
	close(inv.gate)
	svc.Wait()
	rs := runs(t, st, sc.ID)
	if len(rs) != 1 || rs[0].ID != id || rs[0].Status != cron.RunRunning || rs[0].EndedAt != nil {
		t.Fatalf("after the stop: %+v, want %s still running", rs, id)
	}
	again := &invoker{}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- newService(st, again, c).Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); len(again.delivered()) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got := again.delivered(); len(got) != 1 || got[0] != id {
		t.Fatalf("the next start delivered %v, want %s again", got, id)
	}
	if rs := runs(t, st, sc.ID); rs[0].Status != cron.RunSucceeded || rs[0].Attempts != 2 {
		t.Fatalf("after the next start: %+v, want succeeded on its second attempt", rs[0])
	}
}

// Tick says when a schedule is due next — the one it fired included —
// so Run wakes at that time, not up to a tick after it.
func TestTickReturnsTheNextDueTime(t *testing.T) {
	st := newStore(t)
	c := &clock{t: t0}
	svc := newService(st, &invoker{}, c)
	if next := svc.Tick(t.Context()); !next.IsZero() {
		t.Fatalf("with no schedules Tick said %v is due next", next)
	}
	create(t, svc, "* * * * * *", cron.OverlapAllow)    // every second
	create(t, svc, "*/10 * * * * *", cron.OverlapAllow) // every ten seconds
	c.set(t0.Add(300 * time.Millisecond))
	if next := svc.Tick(t.Context()); !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("at %v Tick said %v is due next, want %v", c.now(), next, t0.Add(time.Second))
	}
	c.set(t0.Add(time.Second + 20*time.Millisecond)) // the per-second one is due and fires
	if next := svc.Tick(t.Context()); !next.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("after firing at %v Tick said %v is due next, want %v", c.now(), next, t0.Add(2*time.Second))
	}
	svc.Wait()
}
