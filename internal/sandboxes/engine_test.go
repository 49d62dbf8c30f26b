package sandboxes_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/sandboxes"
	"github.com/pandastack/pandastack/internal/store/sqlite"
)

// startEngine starts an Engine over host and a fresh SQLite store that
// already holds recs (the records an earlier server left).
func startEngine(t *testing.T, host *fakeHost, recs ...pandastack.Sandbox) (*sandboxes.Engine, *sqlite.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, rec := range recs {
		if err := st.PutSandbox(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	e := sandboxes.NewEngine(sandboxes.EngineConfig{Store: st, Host: host})
	if err := e.Start(ctx); err != nil {
		t.Fatalf("start engine: %v", err)
	}
	t.Cleanup(func() {
		close(host.events)
		e.Wait()
	})
	return e, st
}

// running is a live sandbox record of team_1 on host host.
func running(id, host string) pandastack.Sandbox {
	now := time.Now().UTC()
	return pandastack.Sandbox{ID: id, TeamID: "team_1", Template: "base", State: pandastack.StateRunning, Host: host,
		Metadata: map[string]string{"k": "v"}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
}

func get(t *testing.T, st pandastack.Store, id string) pandastack.Sandbox {
	t.Helper()
	rec, err := st.GetSandbox(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return rec
}

// waitFor waits until sandbox id's record satisfies ok.
func waitFor(t *testing.T, st pandastack.Store, id string, ok func(pandastack.Sandbox) bool) pandastack.Sandbox {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec := get(t, st, id)
		if ok(rec) {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s stayed %+v", id, rec)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Reconcile at start, from what the host reports: lost machines are
// recorded ended with the host's reason, asleep ones hibernated; a live
// sandbox of this host that the host does not report is recorded failed
// (never silently gone); another host's sandboxes are not touched; the
// host settles with this host's volumes, and the volume of an ended
// sandbox is freed.
func TestReconcileRecordsWhatTheHostFound(t *testing.T) {
	host := newFakeHost()
	kept, asleep, lost, missing, elsewhere := running("sbx_kept", "local"), running("sbx_asleep", "local"),
		running("sbx_lost", "local"), running("sbx_missing", "local"), running("sbx_elsewhere", "other")
	lostAt := time.Now().UTC()
	host.inv = hostapi.Inventory{
		Machines: []hostapi.Machine{
			{ID: kept.ID, Host: "local", State: pandastack.StateRunning, Template: "base", Seq: 3},
			{ID: asleep.ID, Host: "local", State: pandastack.StateHibernated, Template: "base", Seq: 4},
		},
		Ended: []hostapi.Machine{{ID: lost.ID, Host: "local", State: pandastack.StateFailed, Template: "base",
			EndedAt: &lostAt, EndReason: "the VM was gone after a host restart", Seq: 2}},
	}
	_, st := startEngine(t, host, kept, asleep, lost, missing, elsewhere)

	if rec := get(t, st, kept.ID); rec.State != pandastack.StateRunning || rec.TeamID != "team_1" || rec.Metadata["k"] != "v" {
		t.Fatalf("re-attached sandbox: %+v", rec)
	}
	if rec := get(t, st, asleep.ID); rec.State != pandastack.StateHibernated {
		t.Fatalf("asleep sandbox: %s", rec.State)
	}
	if rec := get(t, st, lost.ID); rec.State != pandastack.StateFailed || rec.EndReason != "the VM was gone after a host restart" || rec.EndedAt == nil {
		t.Fatalf("lost sandbox: %s %q", rec.State, rec.EndReason)
	}
	if rec := get(t, st, missing.ID); rec.State != pandastack.StateFailed || rec.EndReason != "the VM was gone after a host restart" ||
		rec.Template != "base" || rec.TeamID != "team_1" {
		t.Fatalf("sandbox the host did not report: %+v", rec)
	}
	if rec := get(t, st, elsewhere.ID); rec.State != pandastack.StateRunning {
		t.Fatalf("another host's sandbox: %s", rec.State)
	}
	if host.settled == nil {
		t.Fatal("the host was not settled")
	}
}

// A fresh host (no records of its own) is asked to adopt the live
// sandboxes the store places on it; those it has nothing of are failed.
func TestReconcileFreshHostAdopts(t *testing.T) {
	host := newFakeHost()
	back, gone := running("sbx_back", "local"), running("sbx_gone", "local")
	host.inv = hostapi.Inventory{Fresh: true, Unclaimed: []string{back.ID}}
	host.adopt[back.ID] = true
	_, st := startEngine(t, host, back, gone)

	if len(host.adopted) != 1 || host.adopted[0] != back.ID {
		t.Fatalf("adopted %v, want [%s]", host.adopted, back.ID)
	}
	if rec := get(t, st, back.ID); rec.State != pandastack.StateRunning {
		t.Fatalf("adopted sandbox: %s %q", rec.State, rec.EndReason)
	}
	if rec := get(t, st, gone.ID); rec.State != pandastack.StateFailed || rec.EndReason == "" {
		t.Fatalf("sandbox the fresh host had nothing of: %s %q", rec.State, rec.EndReason)
	}
}

// What the host reports on its own becomes the record: a VM that exited
// fails the sandbox with the host's reason, an idle hibernation is
// recorded, an older report never overwrites a newer one, and an ended
// record is final.
func TestEventsBecomeRecords(t *testing.T) {
	ctx := context.Background()
	host := newFakeHost()
	e, st := startEngine(t, host)
	sb, err := e.Create(ctx, pandastack.CreateRequest{TeamID: "team_1", Template: "base", TTL: time.Hour, Metadata: map[string]string{"a": "b"}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if rec := get(t, st, sb.ID); rec.State != pandastack.StateRunning || rec.Metadata["a"] != "b" || rec.Host != "local" {
		t.Fatalf("created: %+v", rec)
	}

	hib, _ := host.Hibernate(ctx, sb.ID)
	host.events <- hostapi.Event{Kind: hostapi.EventHibernated, Machine: hib, Idle: true}
	waitFor(t, st, sb.ID, func(r pandastack.Sandbox) bool { return r.State == pandastack.StateHibernated })

	woke, _ := host.Wake(ctx, sb.ID)
	host.events <- hostapi.Event{Kind: hostapi.EventWoken, Machine: woke}
	host.events <- hostapi.Event{Kind: hostapi.EventHibernated, Machine: hib} // stale: older than the wake
	flush(t, e, host, st)
	if rec := get(t, st, sb.ID); rec.State != pandastack.StateRunning {
		t.Fatalf("an older report overwrote a newer one: %s", rec.State)
	}

	host.end(sb.ID, hostapi.EventExited, pandastack.StateFailed, "the VM process exited")
	rec := waitFor(t, st, sb.ID, func(r pandastack.Sandbox) bool { return r.State == pandastack.StateFailed })
	if rec.EndReason != "the VM process exited" || rec.EndedAt == nil || rec.Metadata["a"] != "b" {
		t.Fatalf("after the VM exited: %+v", rec)
	}
	woke.Seq += 10 // even a newer live report does not revive an ended sandbox
	host.events <- hostapi.Event{Kind: hostapi.EventWoken, Machine: woke}
	flush(t, e, host, st)
	if _, err := e.Guest(ctx, sb.ID); pandastack.ErrorCode(err) != pandastack.EGone {
		t.Fatalf("guest of the failed sandbox: %v, want gone", err)
	}
	if err := e.Kill(ctx, sb.ID, pandastack.StateKilled); err != nil {
		t.Fatalf("kill of an ended sandbox: %v", err)
	}
	if rec := get(t, st, sb.ID); rec.State != pandastack.StateFailed {
		t.Fatalf("ended record changed to %s", rec.State)
	}
}

// A report that overtakes the create's result (the VM died at once) is
// kept until the sandbox's first record is written, then applied.
func TestEventBeforeTheFirstRecord(t *testing.T) {
	ctx := context.Background()
	host := newFakeHost()
	e, st := startEngine(t, host)
	sent := make(chan struct{})
	host.onCreate = func(m hostapi.Machine) {
		go func() {
			host.end(m.ID, hostapi.EventExited, pandastack.StateFailed, "the VM process exited")
			close(sent)
		}()
		<-sent
		time.Sleep(20 * time.Millisecond) // let the engine see the event first
	}
	sb, err := e.Create(ctx, pandastack.CreateRequest{TeamID: "team_1", Template: "base", TTL: time.Hour})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	rec := waitFor(t, st, sb.ID, func(r pandastack.Sandbox) bool { return r.State == pandastack.StateFailed })
	if rec.EndReason != "the VM process exited" {
		t.Fatalf("record: %+v", rec)
	}
}

// flush returns once every event sent before it is recorded: it sends
// one of its own, for a new sandbox, behind them and waits for it.
func flush(t *testing.T, e *sandboxes.Engine, host *fakeHost, st pandastack.Store) {
	t.Helper()
	sb, err := e.Create(context.Background(), pandastack.CreateRequest{TeamID: "team_1", Template: "base", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := host.Hibernate(context.Background(), sb.ID)
	host.events <- hostapi.Event{Kind: hostapi.EventHibernated, Machine: m}
	waitFor(t, st, sb.ID, func(r pandastack.Sandbox) bool { return r.State == pandastack.StateHibernated })
}
