package functions

import (
	"context"
	"slices"
	"testing"

	"github.com/pandastack/pandastack"
)

type snapshotList []pandastack.Snapshot

func (l snapshotList) ListSnapshots(ctx context.Context, teamID string) ([]pandastack.Snapshot, error) {
	return l, nil
}

// deletingEngine records DeleteSnapshot; other Engine methods are not used.
type deletingEngine struct {
	pandastack.Engine
	deleted []string
}

func (e *deletingEngine) DeleteSnapshot(ctx context.Context, id string) error {
	e.deleted = append(e.deleted, id)
	return nil
}

func resolveTo(t pandastack.Template) func(context.Context, string, string) (pandastack.Template, error) {
	return func(context.Context, string, string) (pandastack.Template, error) { return t, nil }
}

// A deploy finds the platform's base of its runtime, template build, size
// and shim; bases of the same family baked from another build are dropped,
// and no team's snapshot is taken for a base or dropped, whatever its name.
func TestRuntimeBaseFindsThePlatformsBase(t *testing.T) {
	shims := newShimSet(nil).hash
	k := baseKey{runtime: RuntimeNode, template: "base", build: "b2", shims: shims}
	stale := baseKey{runtime: RuntimeNode, template: "base", build: "b1", shims: shims}
	oldShims := baseKey{runtime: RuntimeNode, template: "base", build: "b2", shims: "an older shim set"}
	python := baseKey{runtime: RuntimePython, template: "base", build: "b2", shims: shims}
	snaps := snapshotList{
		{ID: "snap_team", TeamID: "acme", Name: k.prefix() + "x"},
		{ID: "snap_stale", Name: stale.prefix() + "y"},
		{ID: "snap_old_shims", Name: oldShims.prefix() + "v"},
		{ID: "snap_base", Name: k.prefix() + "z"},
		{ID: "snap_py", Name: python.prefix() + "w"},
	}
	e := &deletingEngine{}
	s := New(Config{Engine: e, Snapshots: snaps, Resolve: resolveTo(pandastack.Template{Name: "base", ID: "b2"})})
	if got := s.runtimeBase(t.Context(), "acme", "base", RuntimeNode, 0); got != "snap_base" {
		t.Fatalf("base = %q, want snap_base", got)
	}
	slices.Sort(e.deleted)
	if !slices.Equal(e.deleted, []string{"snap_old_shims", "snap_stale"}) {
		t.Fatalf("deleted %v, want the stale node bases only", e.deleted)
	}
	// Known now: no second look.
	if got := s.runtimeBase(t.Context(), "globex", "base", RuntimeNode, 0); got != "snap_base" || len(e.deleted) != 2 {
		t.Fatalf("second deploy: base %q, deleted %v", got, e.deleted)
	}
}

// A team's own template gets no shared base: its deploys start the runtime.
func TestRuntimeBaseNotForATeamsTemplate(t *testing.T) {
	k := baseKey{runtime: RuntimePython, template: "mine", build: "b1", shims: newShimSet(nil).hash}
	s := New(Config{Engine: &deletingEngine{}, Snapshots: snapshotList{{ID: "snap_base", Name: k.prefix() + "z"}},
		Resolve: resolveTo(pandastack.Template{TeamID: "acme", Name: "mine", ID: "b1"})})
	if got := s.runtimeBase(t.Context(), "acme", "mine", RuntimePython, 0); got != "" {
		t.Fatalf("base for a team's template = %q, want none", got)
	}
}

// Bases differ by everything they are baked from.
func TestBaseKeyPrefixes(t *testing.T) {
	k := baseKey{runtime: RuntimeNode, template: "base", build: "b1"}
	for _, o := range []baseKey{
		{runtime: RuntimePython, template: "base", build: "b1"},
		{runtime: RuntimeNode, template: "other", build: "b1"},
		{runtime: RuntimeNode, template: "base", build: "b2"},
		{runtime: RuntimeNode, template: "base", build: "b1", memMiB: 1024},
		{runtime: RuntimeNode, template: "base", build: "b1", shims: newShimSet([]byte("addon")).hash},
	} {
		if o.prefix() == k.prefix() {
			t.Fatalf("%+v and %+v share a base name prefix %s", k, o, k.prefix())
		}
	}
}
