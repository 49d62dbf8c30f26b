package storetest

import (
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// sandbox returns a running sandbox of teamID created n seconds after base.
func sandbox(id, teamID string, n int) pandastack.Sandbox {
	return pandastack.Sandbox{
		ID:         id,
		TeamID:     teamID,
		Template:   "python",
		TemplateID: "tpl_3f2a9c",
		State:      pandastack.StateRunning,
		Host:       "host-a",
		Accel:      pandastack.AccelKVM,
		Metadata:   map[string]string{"owner": "alice"},
		Env:        map[string]string{"FOO": "bar"},
		CPUs:       2,
		MemoryMiB:  512,
		CreatedAt:  at(n),
		ExpiresAt:  at(n + 3600),

		TemplateVersion: 3,
		DiskMiB:         4096,
		Defaults:        &pandastack.CommandDefaults{Env: map[string]string{"MODE": "prod"}, Workdir: "/srv/app", User: "app"},
	}
}

func (h *harness) sandboxes(t *testing.T) {
	t.Run("RoundTrip", func(t *testing.T) {
		s := h.newStore(t)
		live := sandbox("sbx_live", "team_1", 0)
		live.OnExpiry = pandastack.OnExpiryHibernate // what its TTL's end does survives a restart
		ended := pandastack.Sandbox{
			ID:         "sbx_ended",
			TeamID:     "team_2",
			Template:   "node",
			TemplateID: "tpl_77",
			State:      pandastack.StateKilled,
			Host:       "host-b",
			Accel:      pandastack.AccelTCG,
			Metadata:   map[string]string{"job": "42", "owner": "bob"},
			Env:        map[string]string{"A": "1", "B": ""},
			CPUs:       8,
			MemoryMiB:  16384,
			CreatedAt:  at(10),
			ExpiresAt:  at(310),
			EndedAt:    ptr(at(100).Add(987 * time.Microsecond)),
			EndReason:  "killed by user",
			// AutoHibernateSeconds survives a restart: the host agent
			// reads it back to keep enforcing it.
			AutoHibernateSeconds: 90,
			// A service machine has no expiry: the zero time round-trips.
			Lifetime: pandastack.LifetimeService,
			// A platform service's machine keeps its owner.
			ManagedBy: "database:db-orders",
		}
		ended.ExpiresAt = time.Time{}
		for _, sb := range []pandastack.Sandbox{live, ended} {
			mustNot(t, s.PutSandbox(t.Context(), sb), "put sandbox "+sb.ID)
		}
		for _, want := range []pandastack.Sandbox{live, ended} {
			got, err := s.GetSandbox(t.Context(), want.ID)
			mustNot(t, err, "get sandbox "+want.ID)
			checkSandbox(t, got, want)
		}
	})

	t.Run("Maps", func(t *testing.T) {
		// Metadata and Env round trip exactly: nil stays nil, empty stays
		// empty, and keys and values are opaque text.
		cases := []struct {
			name     string
			metadata map[string]string
			env      map[string]string
		}{
			{"Nil", nil, nil},
			{"Empty", map[string]string{}, map[string]string{}},
			{"NilMetadataEmptyEnv", nil, map[string]string{}},
			{"Special", map[string]string{
				"a.b":          "x",
				`quote"key`:    `"quoted"`,
				"$[0]":         "path-like",
				"unicode-ключ": "значение ✓",
				"empty":        "",
				"json":         `{"nested": [1, 2]}`,
			}, map[string]string{
				"PATH":  "/usr/local/bin:/usr/bin",
				"MULTI": "line1\nline2\ttab",
			}},
		}
		s := h.newStore(t)
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				want := sandbox("sbx_maps_"+c.name, "team_1", i)
				want.Metadata, want.Env = c.metadata, c.env
				mustNot(t, s.PutSandbox(t.Context(), want), "put sandbox")
				got, err := s.GetSandbox(t.Context(), want.ID)
				mustNot(t, err, "get sandbox")
				checkSandbox(t, got, want)
			})
		}
	})

	t.Run("ZeroTimes", func(t *testing.T) {
		s := h.newStore(t)
		want := sandbox("sbx_zero", "team_1", 0)
		want.CreatedAt, want.ExpiresAt = time.Time{}, time.Time{}
		mustNot(t, s.PutSandbox(t.Context(), want), "put sandbox")
		got, err := s.GetSandbox(t.Context(), want.ID)
		mustNot(t, err, "get sandbox")
		if !got.CreatedAt.IsZero() || !got.ExpiresAt.IsZero() {
			t.Errorf("zero times came back as CreatedAt=%v ExpiresAt=%v", got.CreatedAt, got.ExpiresAt)
		}
		checkSandbox(t, got, want)
	})

	t.Run("NotFound", func(t *testing.T) {
		s := h.newStore(t)
		_, err := s.GetSandbox(t.Context(), "sbx_missing")
		wantCode(t, err, pandastack.ENotFound, "GetSandbox on empty store")
		mustNot(t, s.PutSandbox(t.Context(), sandbox("sbx_1", "team_1", 0)), "put sandbox")
		_, err = s.GetSandbox(t.Context(), "sbx_")
		wantCode(t, err, pandastack.ENotFound, "GetSandbox(prefix)")
		_, err = s.GetSandbox(t.Context(), "SBX_1")
		wantCode(t, err, pandastack.ENotFound, "GetSandbox(other case)")
	})

	t.Run("Upsert", func(t *testing.T) {
		s := h.newStore(t)
		first := sandbox("sbx_1", "team_1", 0)
		first.State = pandastack.StateStarting
		mustNot(t, s.PutSandbox(t.Context(), first), "put sandbox")

		// Every field is replaced, not merged: maps shrink, EndedAt appears.
		second := pandastack.Sandbox{
			ID:         "sbx_1",
			TeamID:     "team_2",
			Template:   "go",
			TemplateID: "tpl_new",
			State:      pandastack.StateExpired,
			Host:       "host-z",
			Accel:      pandastack.AccelTCG,
			Metadata:   map[string]string{"other": "x"},
			Env:        nil,
			CPUs:       1,
			MemoryMiB:  128,
			CreatedAt:  at(5),
			ExpiresAt:  at(6),
			EndedAt:    ptr(at(7)),
			EndReason:  "ttl",
		}
		mustNot(t, s.PutSandbox(t.Context(), second), "put sandbox again")
		got, err := s.GetSandbox(t.Context(), "sbx_1")
		mustNot(t, err, "get sandbox")
		checkSandbox(t, got, second)

		// And back: EndedAt can be cleared again.
		mustNot(t, s.PutSandbox(t.Context(), first), "put sandbox a third time")
		got, err = s.GetSandbox(t.Context(), "sbx_1")
		mustNot(t, err, "get sandbox")
		checkSandbox(t, got, first)

		all, err := s.ListSandboxes(t.Context(), pandastack.SandboxFilter{})
		mustNot(t, err, "list sandboxes")
		if len(all) != 1 {
			t.Errorf("ListSandboxes after 3 puts of one id = %v, want one sandbox", ids(all))
		}
	})

	t.Run("CountLive", func(t *testing.T) {
		s := h.newStore(t)
		count := func(teamID string, want int) {
			t.Helper()
			n, err := s.CountLiveSandboxes(t.Context(), teamID)
			mustNot(t, err, "count live sandboxes")
			if n != want {
				t.Errorf("CountLiveSandboxes(%s) = %d, want %d", teamID, n, want)
			}
		}
		count("team_1", 0)
		for i, st := range allStates {
			mustNot(t, s.PutSandbox(t.Context(), withState(sandbox("sbx_t1_"+string(st), "team_1", i), st)), "put sandbox")
		}
		mustNot(t, s.PutSandbox(t.Context(), sandbox("sbx_t2", "team_2", 0)), "put sandbox")
		count("team_1", 2)
		count("team_2", 1)
		count("team_missing", 0)
		count("", 0)

		// A state change through PutSandbox is reflected.
		mustNot(t, s.PutSandbox(t.Context(), withState(sandbox("sbx_t1_running", "team_1", 1), pandastack.StateKilled)), "kill sandbox")
		count("team_1", 1)
		mustNot(t, s.PutSandbox(t.Context(), withState(sandbox("sbx_t1_failed", "team_1", 4), pandastack.StateRunning)), "revive sandbox")
		count("team_1", 2)
	})

	t.Run("EmptyKey", func(t *testing.T) {
		s := h.newStore(t)
		wantCode(t, s.PutSandbox(t.Context(), sandbox("", "team_1", 0)), pandastack.EInvalid, "empty sandbox id")
		all, err := s.ListSandboxes(t.Context(), pandastack.SandboxFilter{})
		mustNot(t, err, "list sandboxes")
		if len(all) != 0 {
			t.Errorf("ListSandboxes = %v after a rejected put, want none", ids(all))
		}
	})
}

var allStates = []pandastack.SandboxState{
	pandastack.StateStarting,
	pandastack.StateRunning,
	pandastack.StateKilled,
	pandastack.StateExpired,
	pandastack.StateFailed,
}

func withState(sb pandastack.Sandbox, st pandastack.SandboxState) pandastack.Sandbox {
	sb.State = st
	if !st.Live() {
		sb.EndedAt = ptr(sb.CreatedAt.Add(time.Minute))
		sb.EndReason = string(st)
	}
	return sb
}
