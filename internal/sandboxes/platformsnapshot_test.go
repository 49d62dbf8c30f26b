package sandboxes_test

import (
	"context"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// A team starts machines from its own snapshots only; a platform
// service's machine (ManagedBy, which no request sets) may also start from
// a platform snapshot (no team's, such as a functions runtime base), but
// never from another team's.
func TestCreateFromPlatformSnapshot(t *testing.T) {
	host := newFakeHost()
	e, st := startEngine(t, host)
	ctx := context.Background()
	now := time.Now().UTC()
	for _, sn := range []pandastack.Snapshot{
		{ID: "snap_platform", Name: "fn-base-x", Host: "local", CreatedAt: now},
		{ID: "snap_other", Name: "theirs", TeamID: "team_2", Host: "local", CreatedAt: now},
		{ID: "snap_own", Name: "mine", TeamID: "team_1", Host: "local", CreatedAt: now},
	} {
		if err := st.CreateSnapshot(ctx, sn); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		snapshot, managedBy string
		ok                  bool
	}{
		{"snap_own", "", true},
		{"snap_platform", "", false},
		{"snap_other", "", false},
		{"snap_platform", "function:hello", true},
		{"snap_other", "function:hello", false},
	} {
		_, err := e.Create(ctx, pandastack.CreateRequest{TeamID: "team_1", Snapshot: tc.snapshot, ManagedBy: tc.managedBy, TTL: time.Minute})
		if tc.ok != (err == nil) || (err != nil && pandastack.ErrorCode(err) != pandastack.ENotFound) {
			t.Errorf("team_1 creates from %s (managed by %q): %v; want ok=%v, else not found", tc.snapshot, tc.managedBy, err, tc.ok)
		}
	}
}
