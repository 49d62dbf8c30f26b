package apps

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/router"
)

// releaseStore keeps releases in memory (the sqlite store imports this
// package, so internal tests cannot use it); nothing else is called.
type releaseStore struct {
	Store
	rels []Release // newest first
}

func (m *releaseStore) ListReleases(context.Context, string) ([]Release, error) {
	return slices.Clone(m.rels), nil
}

func (m *releaseStore) DeleteRelease(_ context.Context, id string) error {
	m.rels = slices.DeleteFunc(m.rels, func(r Release) bool { return r.ID == id })
	return nil
}

// recordingEngine stands in for the machine engine (no VMs in unit
// tests): it records what the service asks of it.
type recordingEngine struct {
	pandastack.Engine
	mu                          sync.Mutex
	killed, deleted, hibernated []string
}

func (e *recordingEngine) Kill(_ context.Context, id string, _ pandastack.SandboxState) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.killed = append(e.killed, id)
	return nil
}

func (e *recordingEngine) DeleteSnapshot(_ context.Context, id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.deleted = append(e.deleted, id)
	return nil
}

func (e *recordingEngine) Hibernate(_ context.Context, id string) (pandastack.Sandbox, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hibernated = append(e.hibernated, id)
	return pandastack.Sandbox{ID: id}, nil
}

func (e *recordingEngine) hibernatedNow() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.hibernated)
}

// Pruning keeps the live release and the one live before it — the
// rollback target — even when a newer release exists (after a rollback),
// and drops the rest with their machines and snapshots.
func TestPruneKeepsLiveAndPreviousRelease(t *testing.T) {
	ctx := context.Background()
	st := &releaseStore{}
	eng := &recordingEngine{}
	s := New(Config{Store: st, Engine: eng, Routes: router.NewTable()})
	defer s.Close()
	// Newest first: v3, v2, v1. v1 is live again after a rollback; v3 was
	// just deployed; so the previous live one is v1 and v2 goes.
	for _, v := range []string{"v3", "v2", "v1"} {
		st.rels = append(st.rels, Release{ID: "rel_" + v, AppID: "app_1", DeployID: "dep_" + v, SnapshotID: "snap_" + v,
			MachineID: "sbx_" + v, Port: 8080})
	}
	if err := s.prune(ctx, "app_1", "dep_v3", "dep_v1"); err != nil {
		t.Fatal(err)
	}
	rels, err := st.ListReleases(ctx, "app_1")
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, r := range rels {
		kept = append(kept, r.DeployID)
	}
	slices.Sort(kept)
	if !slices.Equal(kept, []string{"dep_v1", "dep_v3"}) || !slices.Equal(eng.killed, []string{"sbx_v2"}) || !slices.Equal(eng.deleted, []string{"snap_v2"}) {
		t.Fatalf("kept %v, killed %v, deleted snapshots %v; want v1 and v3 kept, v2 gone", kept, eng.killed, eng.deleted)
	}
}

// The replaced release runs on for the rollback window, then hibernates;
// one made live again by a rollback inside the window does not.
func TestKeepWarmHibernatesAfterTheWindowUnlessSwitched(t *testing.T) {
	eng := &recordingEngine{}
	s := New(Config{Engine: eng, Routes: router.NewTable(), Drain: time.Millisecond, RollbackWindow: 50 * time.Millisecond})
	b := &backend{name: "web"}
	b.set("sbx_v1", 8080)
	gen := b.set("sbx_v2", 8080)
	s.keepWarm(b, "sbx_v1", gen)
	if got := eng.hibernatedNow(); len(got) != 0 {
		t.Fatalf("hibernated at once: %v", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(eng.hibernatedNow()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := eng.hibernatedNow(); !slices.Equal(got, []string{"sbx_v1"}) {
		t.Fatalf("after the window: hibernated %v, want sbx_v1", got)
	}

	// A rollback inside the window: v1 is live again, v2 is kept warm.
	eng2 := &recordingEngine{}
	s2 := New(Config{Engine: eng2, Routes: router.NewTable(), Drain: time.Millisecond, RollbackWindow: 50 * time.Millisecond})
	gen = b.set("sbx_v3", 8080)
	s2.keepWarm(b, "sbx_v2", gen)
	gen = b.set("sbx_v2", 8080) // rollback
	s2.keepWarm(b, "sbx_v3", gen)
	for len(eng2.hibernatedNow()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(60 * time.Millisecond) // past sbx_v2's window too
	if got := eng2.hibernatedNow(); !slices.Equal(got, []string{"sbx_v3"}) {
		t.Fatalf("hibernated %v, want only sbx_v3 (sbx_v2 is live again)", got)
	}

	// The server stops inside the window: the release is left running (a
	// service machine outlives the server; Start gives it a new window).
	eng3 := &recordingEngine{}
	s3 := New(Config{Engine: eng3, Routes: router.NewTable(), Drain: time.Millisecond, RollbackWindow: time.Hour})
	s3.keepWarm(b, "sbx_v2", b.set("sbx_v4", 8080))
	s3.Close()
	s2.Close()
	s.Close()
	if got := eng3.hibernatedNow(); len(got) != 0 {
		t.Fatalf("hibernated %v when the server stopped", got)
	}
}
