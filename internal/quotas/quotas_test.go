package quotas_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
	"github.com/pandastack/pandastack/internal/store/sqlite"
)

func ptr[T any](v T) *T { return &v }

func TestCheck(t *testing.T) {
	l := quotas.Limits{MaxSandboxes: 20, MaxVCPUs: 8, MaxMemoryMiB: 4096, MaxSnapshots: 2}
	tests := []struct {
		name       string
		have, want quotas.Usage
		msg        string // "" fits
	}{
		{"fits", quotas.Usage{Sandboxes: 3}, quotas.Usage{Sandboxes: 1, VCPUs: 1}, ""},
		{"up to the limit fits", quotas.Usage{Sandboxes: 19}, quotas.Usage{Sandboxes: 1}, ""},
		{"one over names the limit and the numbers", quotas.Usage{Sandboxes: 20}, quotas.Usage{Sandboxes: 1},
			"max_sandboxes is 20; team has 20 live sandboxes and this needs 1 more"},
		{"a fork of several needs room for all", quotas.Usage{Sandboxes: 18}, quotas.Usage{Sandboxes: 3},
			"max_sandboxes is 20; team has 18 live sandboxes and this needs 3 more"},
		{"vCPUs", quotas.Usage{Sandboxes: 2, VCPUs: 8}, quotas.Usage{Sandboxes: 1, VCPUs: 1}, "max_vcpus is 8"},
		{"memory", quotas.Usage{MemoryMiB: 4000}, quotas.Usage{MemoryMiB: 512}, "max_memory_mib is 4096; team has 4000"},
		{"snapshots", quotas.Usage{Snapshots: 2}, quotas.Usage{Snapshots: 1}, "max_snapshots is 2"},
		{"0 is no limit", quotas.Usage{Volumes: 1000}, quotas.Usage{Volumes: 1}, ""},
		{"only what is asked is checked", quotas.Usage{Sandboxes: 50, MemoryMiB: 1 << 20}, quotas.Usage{Snapshots: 1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := quotas.Check(l, tt.have, tt.want)
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("Check = %v, want it to fit", err)
				}
				return
			}
			if pandastack.ErrorCode(err) != pandastack.EQuota || !strings.Contains(pandastack.ErrorMessage(err), tt.msg) {
				t.Fatalf("Check = %v (code %s), want quota_exceeded containing %q", err, pandastack.ErrorCode(err), tt.msg)
			}
		})
	}
}

// env is a real (in-memory SQLite) store with teams acme and globex.
type env struct {
	store *sqlite.Store
	n     int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := sqlite.Open(t.Context(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, id := range []string{"acme", "globex"} {
		if err := st.CreateTeam(t.Context(), pandastack.Team{ID: id, Name: id, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	return &env{store: st}
}

func (e *env) sandbox(t *testing.T, team string, state pandastack.SandboxState, cpus, mem int) {
	t.Helper()
	e.n++
	sb := pandastack.Sandbox{ID: fmt.Sprintf("sbx_%d", e.n), TeamID: team, Template: "base", State: state,
		CPUs: cpus, MemoryMiB: mem, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), Metadata: map[string]string{}}
	if err := e.store.PutSandbox(t.Context(), sb); err != nil {
		t.Fatal(err)
	}
}

func TestReserveCountsWhatIsLive(t *testing.T) {
	e := newEnv(t)
	svc := quotas.New(quotas.Config{Store: e.store, Defaults: quotas.Limits{MaxSandboxes: 4, MaxMemoryMiB: 2048}})
	ctx := t.Context()
	e.sandbox(t, "acme", pandastack.StateRunning, 1, 512)
	e.sandbox(t, "acme", pandastack.StateHibernated, 1, 512) // wakes on use: counts
	e.sandbox(t, "acme", pandastack.StateKilled, 8, 8192)    // ended: does not
	e.sandbox(t, "globex", pandastack.StateRunning, 8, 8192) // another team's

	u, err := svc.Usage(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if u.Sandboxes != 2 || u.VCPUs != 2 || u.MemoryMiB != 1024 {
		t.Fatalf("usage %+v, want 2 sandboxes, 2 vCPUs, 1024 MiB", u)
	}
	// A fork of 2 children of a 512 MiB sandbox fills the team.
	release, err := svc.Reserve(ctx, "acme", quotas.Usage{Sandboxes: 2, VCPUs: 2, MemoryMiB: 1024})
	if err != nil {
		t.Fatal(err)
	}
	// While the fork runs, its children count.
	_, err = svc.Reserve(ctx, "acme", quotas.Usage{Sandboxes: 1, VCPUs: 1, MemoryMiB: 128})
	if msg := pandastack.ErrorMessage(err); pandastack.ErrorCode(err) != pandastack.EQuota || msg != "max_sandboxes is 4; team has 4 live sandboxes and this needs 1 more" {
		t.Fatalf("reserve over the limit = %v", err)
	}
	// Another team is not affected.
	if r, err := svc.Reserve(ctx, "globex", quotas.Usage{Sandboxes: 1}); err != nil {
		t.Fatalf("globex: %v", err)
	} else {
		r()
	}
	// A failed fork releases what it held; releasing twice changes nothing.
	release()
	release()
	r, err := svc.Reserve(ctx, "acme", quotas.Usage{Sandboxes: 1, MemoryMiB: 512})
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	r()
	_, err = svc.Reserve(ctx, "acme", quotas.Usage{Sandboxes: 1, MemoryMiB: 1536})
	if !strings.Contains(pandastack.ErrorMessage(err), "max_memory_mib is 2048; team has 1024 MiB of memory in live sandboxes and this needs 1536 more") {
		t.Fatalf("memory over the limit = %v", err)
	}
}

func TestReserveCountsSnapshotsAndVolumes(t *testing.T) {
	e := newEnv(t)
	svc := quotas.New(quotas.Config{Store: e.store, Defaults: quotas.Limits{MaxSnapshots: 1, MaxVolumes: 1}})
	ctx := t.Context()
	if err := e.store.CreateSnapshot(ctx, pandastack.Snapshot{ID: "snap_1", TeamID: "acme", Name: "a", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.CreateVolume(ctx, pandastack.Volume{ID: "vol_1", TeamID: "acme", Name: "v", SizeMiB: 16, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reserve(ctx, "acme", quotas.Usage{Snapshots: 1}); !strings.Contains(pandastack.ErrorMessage(err), "max_snapshots is 1; team has 1 snapshots") {
		t.Fatalf("snapshot over the limit = %v", err)
	}
	if _, err := svc.Reserve(ctx, "acme", quotas.Usage{Volumes: 1}); !strings.Contains(pandastack.ErrorMessage(err), "max_volumes is 1; team has 1 volumes") {
		t.Fatalf("volume over the limit = %v", err)
	}
	if _, err := svc.Reserve(ctx, "globex", quotas.Usage{Snapshots: 1, Volumes: 1}); err != nil {
		t.Fatalf("globex: %v", err)
	}
}

func TestCountersAddUsage(t *testing.T) {
	e := newEnv(t)
	machines := func(ctx context.Context, team string) (quotas.Usage, error) {
		return quotas.Usage{ServiceMachines: 2, MemoryMiB: 1024}, nil
	}
	svc := quotas.New(quotas.Config{Store: e.store, Defaults: quotas.Limits{MaxServiceMachines: 2}, Counters: []quotas.Counter{machines}})
	_, err := svc.Reserve(t.Context(), "acme", quotas.Usage{ServiceMachines: 1})
	if !strings.Contains(pandastack.ErrorMessage(err), "max_service_machines is 2; team has 2 service machines") {
		t.Fatalf("reserve = %v", err)
	}
}

func TestConcurrentReservationsNeverOvershoot(t *testing.T) {
	e := newEnv(t)
	svc := quotas.New(quotas.Config{Store: e.store, Defaults: quotas.Limits{MaxConcurrentBuilds: 3}})
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Builds are held for their whole run: never released here.
			if _, err := svc.Reserve(t.Context(), "acme", quotas.Usage{Builds: 1}); err == nil {
				ok.Add(1)
			} else if pandastack.ErrorCode(err) == pandastack.EQuota {
				refused.Add(1)
			} else {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 3 || refused.Load() != 9 {
		t.Fatalf("%d reservations passed and %d were refused; want 3 and 9", ok.Load(), refused.Load())
	}
}

func TestOverrides(t *testing.T) {
	e := newEnv(t)
	svc := quotas.New(quotas.Config{Store: e.store, Defaults: quotas.Defaults})
	ctx := t.Context()
	l, err := svc.Limits(ctx, "acme")
	if err != nil || l != quotas.Defaults {
		t.Fatalf("limits with no overrides = %+v, %v; want the defaults", l, err)
	}
	l, err = svc.Set(ctx, "acme", pandastack.QuotaOverrides{MaxSandboxes: ptr(1), RequestsPerSecond: ptr(0.5)})
	if err != nil {
		t.Fatal(err)
	}
	want := quotas.Defaults
	want.MaxSandboxes, want.RequestsPerSecond = 1, 0.5
	if l != want {
		t.Fatalf("Set = %+v, want %+v", l, want)
	}
	// The new limit holds at once.
	e.sandbox(t, "acme", pandastack.StateRunning, 1, 512)
	if _, err := svc.Reserve(ctx, "acme", quotas.Usage{Sandboxes: 1}); !strings.Contains(pandastack.ErrorMessage(err), "max_sandboxes is 1") {
		t.Fatalf("reserve after Set = %v", err)
	}
	// Another server on the same store sees them too.
	other := quotas.New(quotas.Config{Store: e.store, Defaults: quotas.Defaults})
	if l, err := other.Limits(ctx, "acme"); err != nil || l != want {
		t.Fatalf("limits from the store = %+v, %v", l, err)
	}
	// nil goes back to the default; 0 is no limit.
	l, err = svc.Set(ctx, "acme", pandastack.QuotaOverrides{MaxVolumes: ptr(0)})
	want = quotas.Defaults
	want.MaxVolumes = 0
	if err != nil || l != want {
		t.Fatalf("Set = %+v, %v; want %+v", l, err, want)
	}
	for _, bad := range []pandastack.QuotaOverrides{
		{MaxSandboxes: ptr(-1)},
		{RequestsPerSecond: ptr(-0.1)},
		{Burst: ptr(1 << 30)},
	} {
		if _, err := svc.Set(ctx, "acme", bad); pandastack.ErrorCode(err) != pandastack.EInvalid {
			t.Errorf("Set(%+v) = %v, want invalid_argument", bad, err)
		}
	}
	if _, err := svc.Set(ctx, "nobody", pandastack.QuotaOverrides{}); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Errorf("Set on a missing team = %v, want not_found", err)
	}
}

func TestNoTeamIsRefused(t *testing.T) {
	e := newEnv(t)
	svc := quotas.New(quotas.Config{Store: e.store})
	if _, err := svc.Reserve(t.Context(), "", quotas.Usage{Sandboxes: 1}); err == nil {
		t.Fatal("a reservation with no team passed: the store would count every team")
	}
}
