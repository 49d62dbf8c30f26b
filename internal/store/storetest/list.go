package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// wantList runs ListSandboxes(f) and requires exactly the sandboxes want, in
// that order, and a non-nil slice.
func wantList(t *testing.T, s pandastack.Store, f pandastack.SandboxFilter, want ...string) []pandastack.Sandbox {
	t.Helper()
	got, err := s.ListSandboxes(t.Context(), f)
	mustNot(t, err, "list sandboxes")
	if got == nil {
		t.Errorf("ListSandboxes(%+v) returned a nil slice, want an empty one", f)
	}
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(ids(got), want) {
		t.Errorf("ListSandboxes(%+v) = %q, want %q", f, ids(got), want)
	}
	return got
}

func putAll(t *testing.T, s pandastack.Store, sbs ...pandastack.Sandbox) {
	t.Helper()
	for _, sb := range sbs {
		mustNot(t, s.PutSandbox(t.Context(), sb), "put sandbox "+sb.ID)
	}
}

func withMeta(sb pandastack.Sandbox, m map[string]string) pandastack.Sandbox {
	sb.Metadata = m
	return sb
}

func withHost(sb pandastack.Sandbox, host string) pandastack.Sandbox {
	sb.Host = host
	return sb
}

type kv = map[string]string

func (h *harness) listSandboxes(t *testing.T) {
	t.Run("Empty", func(t *testing.T) {
		s := h.newStore(t)
		wantList(t, s, pandastack.SandboxFilter{})
		wantList(t, s, pandastack.SandboxFilter{TeamID: "team_1", LiveOnly: true, Host: "h", Metadata: kv{"k": "v"}})
	})

	t.Run("FullRecords", func(t *testing.T) {
		s := h.newStore(t)
		a := sandbox("sbx_a", "team_1", 0)
		b := withState(sandbox("sbx_b", "team_1", 1), pandastack.StateFailed)
		b.Metadata, b.Env = nil, kv{}
		putAll(t, s, a, b)
		got := wantList(t, s, pandastack.SandboxFilter{}, "sbx_a", "sbx_b")
		if len(got) == 2 {
			checkSandbox(t, got[0], a)
			checkSandbox(t, got[1], b)
		}
	})

	t.Run("Order", func(t *testing.T) {
		// Oldest first by instant, ties broken by id; insertion order and
		// the zone a time was given in do not matter.
		s := h.newStore(t)
		east := time.FixedZone("UTC+9", 9*60*60)
		west := time.FixedZone("UTC-5", -5*60*60)
		t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
		mk := func(id string, created time.Time) pandastack.Sandbox {
			sb := sandbox(id, "team_1", 0)
			sb.CreatedAt, sb.ExpiresAt = created, created.Add(time.Hour)
			return sb
		}
		putAll(t, s,
			mk("sbx_c", t0),
			mk("sbx_late_west", t0.Add(2*time.Hour).In(west)), // 09:00 local
			mk("sbx_a", t0.Add(time.Microsecond)),
			mk("sbx_b", t0),
			mk("sbx_early_east", t0.Add(-time.Hour).In(east)), // 20:00 local
			mk("sbx_sub_second", t0.Add(time.Second+500*time.Millisecond)),
			mk("sbx_second", t0.Add(time.Second)),
		)
		wantList(t, s, pandastack.SandboxFilter{},
			"sbx_early_east", "sbx_b", "sbx_c", "sbx_a", "sbx_second", "sbx_sub_second", "sbx_late_west")
	})

	t.Run("TeamIsolation", func(t *testing.T) {
		s := h.newStore(t)
		putAll(t, s,
			sandbox("sbx_1a", "team_1", 0),
			sandbox("sbx_2a", "team_2", 1),
			sandbox("sbx_1b", "team_1", 2),
			sandbox("sbx_10", "team_10", 3), // a team id that extends another
		)
		wantList(t, s, pandastack.SandboxFilter{TeamID: "team_1"}, "sbx_1a", "sbx_1b")
		wantList(t, s, pandastack.SandboxFilter{TeamID: "team_2"}, "sbx_2a")
		wantList(t, s, pandastack.SandboxFilter{TeamID: "team_10"}, "sbx_10")
		wantList(t, s, pandastack.SandboxFilter{TeamID: "team_"})
		wantList(t, s, pandastack.SandboxFilter{TeamID: "team_3"})
		wantList(t, s, pandastack.SandboxFilter{}, "sbx_1a", "sbx_2a", "sbx_1b", "sbx_10")
	})

	t.Run("Lifetime", func(t *testing.T) {
		s := h.newStore(t)
		svc := sandbox("sbx_svc", "team_1", 1)
		svc.Lifetime, svc.ExpiresAt = pandastack.LifetimeService, time.Time{}
		explicit := sandbox("sbx_explicit", "team_1", 2)
		explicit.Lifetime = pandastack.LifetimeSandbox
		putAll(t, s, sandbox("sbx_old", "team_1", 0), svc, explicit)
		wantList(t, s, pandastack.SandboxFilter{TeamID: "team_1", Lifetime: pandastack.LifetimeService}, "sbx_svc")
		// A record made before lifetimes existed is a sandbox.
		wantList(t, s, pandastack.SandboxFilter{TeamID: "team_1", Lifetime: pandastack.LifetimeSandbox}, "sbx_old", "sbx_explicit")
		wantList(t, s, pandastack.SandboxFilter{TeamID: "team_1"}, "sbx_old", "sbx_svc", "sbx_explicit")
	})

	t.Run("LiveOnly", func(t *testing.T) {
		s := h.newStore(t)
		for i, st := range allStates {
			putAll(t, s, withState(sandbox("sbx_"+string(st), "team_1", i), st))
		}
		putAll(t, s, sandbox("sbx_other_team", "team_2", 10))
		wantList(t, s, pandastack.SandboxFilter{TeamID: "team_1", LiveOnly: true}, "sbx_starting", "sbx_running")
		wantList(t, s, pandastack.SandboxFilter{TeamID: "team_1"},
			"sbx_starting", "sbx_running", "sbx_killed", "sbx_expired", "sbx_failed")
		wantList(t, s, pandastack.SandboxFilter{LiveOnly: true}, "sbx_starting", "sbx_running", "sbx_other_team")
	})

	t.Run("Host", func(t *testing.T) {
		s := h.newStore(t)
		putAll(t, s,
			withHost(sandbox("sbx_1", "team_1", 0), "host-a"),
			withHost(sandbox("sbx_2", "team_2", 1), "host-b"),
			withHost(withState(sandbox("sbx_3", "team_1", 2), pandastack.StateKilled), "host-a"),
			withHost(sandbox("sbx_4", "team_1", 3), "host-ab"),
		)
		wantList(t, s, pandastack.SandboxFilter{Host: "host-a"}, "sbx_1", "sbx_3")
		wantList(t, s, pandastack.SandboxFilter{Host: "host-b"}, "sbx_2")
		wantList(t, s, pandastack.SandboxFilter{Host: "host-c"})
		wantList(t, s, pandastack.SandboxFilter{Host: "host-a", LiveOnly: true}, "sbx_1")
		wantList(t, s, pandastack.SandboxFilter{Host: "host-b", TeamID: "team_1"})
	})

	t.Run("Metadata", func(t *testing.T) {
		s := h.newStore(t)
		putAll(t, s,
			withMeta(sandbox("sbx_a", "team_1", 0), kv{"env": "prod", "owner": "alice"}),
			withMeta(sandbox("sbx_b", "team_1", 1), kv{"env": "prod", "owner": "bob"}),
			withMeta(sandbox("sbx_c", "team_1", 2), kv{"env": "dev"}),
			withMeta(sandbox("sbx_d", "team_1", 3), nil),
			withMeta(sandbox("sbx_e", "team_1", 4), kv{}),
			withMeta(sandbox("sbx_f", "team_1", 5), kv{"a.b": "x", `q"k`: "y", "$.env": "prod", "blank": ""}),
			withMeta(sandbox("sbx_g", "team_2", 6), kv{"env": "prod", "owner": "alice"}),
		)
		all := []string{"sbx_a", "sbx_b", "sbx_c", "sbx_d", "sbx_e", "sbx_f"}
		cases := []struct {
			name string
			meta kv
			want []string
		}{
			{"NilFilter", nil, all},
			{"EmptyFilter", kv{}, all},
			{"Match", kv{"env": "prod"}, []string{"sbx_a", "sbx_b"}},
			{"Mismatch", kv{"env": "staging"}, nil},
			{"ValueCase", kv{"env": "PROD"}, nil},
			{"ValuePrefix", kv{"owner": "ali"}, nil},
			{"KeyCase", kv{"ENV": "prod"}, nil},
			{"MultipleKeys", kv{"env": "prod", "owner": "alice"}, []string{"sbx_a"}},
			{"MultipleKeysOneMismatch", kv{"env": "dev", "owner": "alice"}, nil},
			{"KeyAbsent", kv{"region": "eu"}, nil},
			{"KeyAbsentWithMatch", kv{"env": "prod", "region": "eu"}, nil},
			{"EmptyValueNeedsKey", kv{"owner": ""}, nil},
			{"EmptyValue", kv{"blank": ""}, []string{"sbx_f"}},
			{"DottedKey", kv{"a.b": "x"}, []string{"sbx_f"}},
			{"QuotedKey", kv{`q"k`: "y"}, []string{"sbx_f"}},
			{"PathLikeKey", kv{"$.env": "prod"}, []string{"sbx_f"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				wantList(t, s, pandastack.SandboxFilter{TeamID: "team_1", Metadata: c.meta}, c.want...)
			})
		}
		t.Run("AcrossTeams", func(t *testing.T) {
			wantList(t, s, pandastack.SandboxFilter{Metadata: kv{"owner": "alice"}}, "sbx_a", "sbx_g")
			wantList(t, s, pandastack.SandboxFilter{TeamID: "team_2", Metadata: kv{"owner": "bob"}})
		})
		t.Run("WithLiveOnly", func(t *testing.T) {
			putAll(t, s, withState(withMeta(sandbox("sbx_h", "team_1", 7), kv{"env": "prod"}), pandastack.StateExpired))
			wantList(t, s, pandastack.SandboxFilter{TeamID: "team_1", Metadata: kv{"env": "prod"}}, "sbx_a", "sbx_b", "sbx_h")
			wantList(t, s, pandastack.SandboxFilter{TeamID: "team_1", LiveOnly: true, Metadata: kv{"env": "prod"}}, "sbx_a", "sbx_b")
		})
		t.Run("AfterUpsert", func(t *testing.T) {
			putAll(t, s, withMeta(sandbox("sbx_b", "team_1", 1), kv{"env": "dev"}))
			wantList(t, s, pandastack.SandboxFilter{TeamID: "team_1", LiveOnly: true, Metadata: kv{"env": "prod"}}, "sbx_a")
			wantList(t, s, pandastack.SandboxFilter{TeamID: "team_1", Metadata: kv{"env": "dev"}}, "sbx_b", "sbx_c")
		})
	})
}
