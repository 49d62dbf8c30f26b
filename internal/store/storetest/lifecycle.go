package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/pandastack/pandastack"
)

func (h *harness) lifecycle(t *testing.T) {
	t.Run("Reopen", func(t *testing.T) {
		path := newPath(t)
		tm := team("team_1", "acme")
		key := apiKey("key_1", "team_1", "hash-1")
		key.Admin = true
		live := sandbox("sbx_live", "team_1", 0)
		ended := withState(sandbox("sbx_ended", "team_1", 1), pandastack.StateKilled)
		tpl := template("python")

		first := h.open(t, path)
		if first == nil {
			t.Fatalf("open(%q) returned a nil store", path)
		}
		closed := false
		t.Cleanup(func() {
			if !closed {
				first.Close()
			}
		})
		mustNot(t, first.CreateTeam(t.Context(), tm), "create team")
		mustNot(t, first.CreateAPIKey(t.Context(), key), "create api key")
		putAll(t, first, live, ended)
		tpl = addVersion(t, first, tpl, "bld_1", "prod")
		closed = true
		mustNot(t, first.Close(), "close store")

		s := h.openAt(t, path)
		gotTeam, err := s.TeamByName(t.Context(), tm.Name)
		mustNot(t, err, "team by name after reopen")
		checkTeam(t, gotTeam, tm)
		gotKey, err := s.APIKeyByHash(t.Context(), key.Hash)
		mustNot(t, err, "api key by hash after reopen")
		checkAPIKey(t, gotKey, key)
		got := wantList(t, s, pandastack.SandboxFilter{TeamID: "team_1"}, live.ID, ended.ID)
		if len(got) == 2 {
			checkSandbox(t, got[0], live)
			checkSandbox(t, got[1], ended)
		}
		gotTpl, err := s.GetTemplate(t.Context(), tpl.TeamID, tpl.Name)
		mustNot(t, err, "get template after reopen")
		checkTemplate(t, gotTpl, tpl)

		// Uniqueness still holds against the persisted rows.
		wantCode(t, s.CreateTeam(t.Context(), tm), pandastack.EConflict, "duplicate team after reopen")
		wantCode(t, s.CreateAPIKey(t.Context(), key), pandastack.EConflict, "duplicate key after reopen")
	})

	t.Run("NewPathIsEmpty", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateTeam(t.Context(), team("team_1", "acme")), "create team")
		putAll(t, s, sandbox("sbx_1", "team_1", 0))
		other := h.newStore(t)
		wantList(t, other, pandastack.SandboxFilter{})
		_, err := other.GetTeam(t.Context(), "team_1")
		wantCode(t, err, pandastack.ENotFound, "team in another store")
	})

	t.Run("ConcurrentPutSandbox", func(t *testing.T) {
		s := h.newStore(t)
		const n = 20
		var wg sync.WaitGroup
		want := make([]string, n)
		for i := range n {
			want[i] = fmt.Sprintf("sbx_%02d", i)
			wg.Go(func() {
				sb := sandbox(want[i], "team_1", i)
				if err := s.PutSandbox(t.Context(), sb); err != nil {
					t.Errorf("put sandbox %s: %v", sb.ID, err)
					return
				}
				// Each writer reads its own write back, concurrently with
				// the other writers.
				got, err := s.GetSandbox(t.Context(), sb.ID)
				if err != nil {
					t.Errorf("get sandbox %s: %v", sb.ID, err)
					return
				}
				checkSandbox(t, got, sb)
				if _, err := s.ListSandboxes(t.Context(), pandastack.SandboxFilter{TeamID: "team_1", LiveOnly: true}); err != nil {
					t.Errorf("list sandboxes: %v", err)
				}
			})
		}
		wg.Wait()
		wantList(t, s, pandastack.SandboxFilter{}, want...)
		n2, err := s.CountLiveSandboxes(t.Context(), "team_1")
		mustNot(t, err, "count live sandboxes")
		if n2 != n {
			t.Errorf("CountLiveSandboxes = %d, want %d", n2, n)
		}
	})

	t.Run("ConcurrentUpsertSameID", func(t *testing.T) {
		s := h.newStore(t)
		const n = 20
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				sb := sandbox("sbx_same", "team_1", 0)
				sb.Metadata = map[string]string{"writer": fmt.Sprint(i)}
				sb.CPUs = i + 1
				if err := s.PutSandbox(t.Context(), sb); err != nil {
					t.Errorf("put sandbox (writer %d): %v", i, err)
				}
			})
		}
		wg.Wait()
		got, err := s.GetSandbox(t.Context(), "sbx_same")
		mustNot(t, err, "get sandbox")
		// Whichever write landed last, it landed whole.
		if want := fmt.Sprint(got.CPUs - 1); got.Metadata["writer"] != want {
			t.Errorf("sandbox mixes writes: CPUs=%d metadata=%v", got.CPUs, got.Metadata)
		}
		wantList(t, s, pandastack.SandboxFilter{}, "sbx_same")
	})

	t.Run("CanceledContext", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateTeam(t.Context(), team("team_1", "acme")), "create team")
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		canceled := func(err error, what string) {
			t.Helper()
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s with a canceled context: err = %v, want context.Canceled", what, err)
			}
		}
		canceled(s.PutSandbox(ctx, sandbox("sbx_1", "team_1", 0)), "PutSandbox")
		canceled(s.CreateTeam(ctx, team("team_2", "globex")), "CreateTeam")
		_, err0 := s.AddTemplateVersion(ctx, template("python"), "", "")
		canceled(err0, "AddTemplateVersion")
		_, err := s.GetTeam(ctx, "team_1")
		canceled(err, "GetTeam")
		_, err = s.GetSandbox(ctx, "sbx_1")
		canceled(err, "GetSandbox")
		_, err = s.ListSandboxes(ctx, pandastack.SandboxFilter{})
		canceled(err, "ListSandboxes")
		_, err = s.CountAPIKeys(ctx)
		canceled(err, "CountAPIKeys")

		// Nothing was written.
		_, err = s.GetSandbox(t.Context(), "sbx_1")
		wantCode(t, err, pandastack.ENotFound, "sandbox put with a canceled context")
		_, err = s.GetTeam(t.Context(), "team_2")
		wantCode(t, err, pandastack.ENotFound, "team created with a canceled context")
	})
}
