// Package storetest is the conformance suite for pandastack.Store. Every
// implementation (SQLite today, Postgres later) runs it from its own tests:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, path string) pandastack.Store {
//			s, err := sqlite.Open(t.Context(), path)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// The suite is the specification of behaviour the rest of PandaStack relies
// on, stated only through the Store interface; nothing in it assumes SQL.
// Times in the suite have microsecond precision (what Postgres keeps), and in
// a non-UTC zone: a store must return the same instant, in UTC.
package storetest

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// OpenFunc opens the store whose data lives at path. The suite picks each
// path inside t.TempDir(); an implementation that does not store files may
// treat path as an opaque name (say, hash it into a schema name). Two calls
// with the same path must see the same data (the suite closes the first store
// before opening it again); different paths must be independent, and a new
// path must start empty. OpenFunc reports failure through t; the suite closes
// every store it opens.
type OpenFunc func(t *testing.T, path string) pandastack.Store

// Run runs the whole suite against the stores open returns.
func Run(t *testing.T, open OpenFunc) {
	h := &harness{open: open}
	t.Run("Teams", h.teams)
	t.Run("APIKeys", h.apiKeys)
	t.Run("APIKeyAdmin", h.apiKeyAdmin)
	t.Run("Quotas", h.quotas)
	t.Run("Sandboxes", h.sandboxes)
	t.Run("ListSandboxes", h.listSandboxes)
	t.Run("Templates", h.templates)
	t.Run("Snapshots", h.snapshots)
	t.Run("Volumes", h.volumes)
	t.Run("Lifecycle", h.lifecycle)
}

type harness struct {
	open OpenFunc
}

// newPath returns a path no store has used yet.
func newPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "store.db")
}

// openAt opens the store at path and closes it when the test ends.
func (h *harness) openAt(t *testing.T, path string) pandastack.Store {
	t.Helper()
	s := h.open(t, path)
	if s == nil {
		t.Fatalf("open(%q) returned a nil store", path)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return s
}

// newStore opens a fresh, empty store.
func (h *harness) newStore(t *testing.T) pandastack.Store {
	t.Helper()
	return h.openAt(t, newPath(t))
}

// base is the reference time of the fixtures: microsecond precision, in a
// zone that is not UTC.
var base = time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.FixedZone("UTC+2", 2*60*60))

// at returns base plus n seconds.
func at(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }

func ptr[T any](v T) *T { return &v }

// wantCode fails the test unless err carries the pandastack error code.
func wantCode(t *testing.T, err error, code, what string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: got no error, want code %s", what, code)
		return
	}
	if got := pandastack.ErrorCode(err); got != code {
		t.Errorf("%s: error %q has code %s, want %s", what, err, got, code)
	}
}

// mustNot fails the test now if err is not nil.
func mustNot(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// checkTime requires the same instant, returned in UTC.
func checkTime(t *testing.T, field string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", field, got, want)
	}
	if got.Location() != time.UTC {
		t.Errorf("%s location = %v, want UTC", field, got.Location())
	}
}

func checkOptTime(t *testing.T, field string, got, want *time.Time) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Errorf("%s = %v, want %v", field, fmtOptTime(got), fmtOptTime(want))
	default:
		checkTime(t, field, *got, *want)
	}
}

func fmtOptTime(p *time.Time) string {
	if p == nil {
		return "nil"
	}
	return p.String()
}

// checkEqual compares every field of got and want: the times by instant and
// zone (after which the fn zeroes them), the rest with reflect.DeepEqual, so
// a nil map and an empty one differ.
func checkEqual[T any](t *testing.T, what string, got, want T, times func(t *testing.T, got, want *T)) {
	t.Helper()
	times(t, &got, &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s mismatch (times aside)\n got: %#v\nwant: %#v", what, got, want)
	}
}

func checkTeam(t *testing.T, got, want pandastack.Team) {
	t.Helper()
	checkEqual(t, "team "+want.ID, got, want, func(t *testing.T, g, w *pandastack.Team) {
		t.Helper()
		checkTime(t, "team CreatedAt", g.CreatedAt, w.CreatedAt)
		g.CreatedAt, w.CreatedAt = time.Time{}, time.Time{}
	})
}

func checkAPIKey(t *testing.T, got, want pandastack.APIKey) {
	t.Helper()
	checkEqual(t, "api key "+want.ID, got, want, func(t *testing.T, g, w *pandastack.APIKey) {
		t.Helper()
		checkTime(t, "api key CreatedAt", g.CreatedAt, w.CreatedAt)
		checkOptTime(t, "api key RevokedAt", g.RevokedAt, w.RevokedAt)
		g.CreatedAt, w.CreatedAt = time.Time{}, time.Time{}
		g.RevokedAt, w.RevokedAt = nil, nil
	})
}

func checkSandbox(t *testing.T, got, want pandastack.Sandbox) {
	t.Helper()
	checkEqual(t, "sandbox "+want.ID, got, want, func(t *testing.T, g, w *pandastack.Sandbox) {
		t.Helper()
		checkTime(t, "sandbox CreatedAt", g.CreatedAt, w.CreatedAt)
		checkTime(t, "sandbox ExpiresAt", g.ExpiresAt, w.ExpiresAt)
		checkOptTime(t, "sandbox EndedAt", g.EndedAt, w.EndedAt)
		g.CreatedAt, w.CreatedAt = time.Time{}, time.Time{}
		g.ExpiresAt, w.ExpiresAt = time.Time{}, time.Time{}
		g.EndedAt, w.EndedAt = nil, nil
	})
}

func checkTemplate(t *testing.T, got, want pandastack.Template) {
	t.Helper()
	checkEqual(t, "template "+want.Name, got, want, func(t *testing.T, g, w *pandastack.Template) {
		t.Helper()
		checkTime(t, "template BuiltAt", g.BuiltAt, w.BuiltAt)
		g.BuiltAt, w.BuiltAt = time.Time{}, time.Time{}
	})
}

// ids returns the IDs of sandboxes, in order.
func ids(sbs []pandastack.Sandbox) []string {
	out := make([]string, len(sbs))
	for i, s := range sbs {
		out[i] = s.ID
	}
	return out
}
