package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
	"github.com/pandastack/pandastack/internal/auth"
)

func TestCreateKeyEndpoint(t *testing.T) {
	env := apitest.Start(t)
	tests := []struct {
		name    string
		body    any
		status  int
		message string
	}{
		{"new team", map[string]any{"team": "initech", "name": "ci"}, 201, ""},
		{"existing team", map[string]any{"team": "acme"}, 201, ""},
		{"no team", map[string]any{"name": "x"}, 400, "team is required"},
		{"bad team name", map[string]any{"team": "a b"}, 400, "may hold only"},
		{"unknown field", map[string]any{"team": "a", "admin": true}, 400, `unknown field "admin"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, req{method: "POST", path: "/v1/keys", key: env.AdminKey, body: tt.body})
			if tt.status != 201 {
				wantError(t, r, tt.status, "invalid_argument", tt.message)
				return
			}
			wantStatus(t, r, http.StatusCreated)
			k := decode[struct {
				ID, Key, Team, Prefix string
				Admin                 bool
			}](t, r)
			if !strings.HasPrefix(k.Key, "pds_") || k.Prefix != k.Key[:12] || k.Admin {
				t.Fatalf("key %+v", k)
			}
			// The new key works and belongs to its team.
			sb := newSandbox(t, env, k.Key, nil)
			team, err := env.Store.TeamByName(context.Background(), k.Team)
			if err != nil || sb.TeamID != team.ID {
				t.Fatalf("sandbox team %s, want team %s (%v)", sb.TeamID, team.ID, err)
			}
		})
	}
	t.Run("existing team is reused", func(t *testing.T) {
		r := call(t, env, req{method: "POST", path: "/v1/keys", key: env.AdminKey, body: map[string]any{"team": "acme"}})
		k := decode[struct{ Key string }](t, r)
		mine := newSandbox(t, env, env.Key, nil)
		// The new acme key sees the old acme key's sandbox.
		wantStatus(t, call(t, env, req{method: "GET", path: "/v1/sandboxes/" + mine.ID, key: k.Key}), 200)
	})
}

func TestBootstrap(t *testing.T) {
	ctx := context.Background()
	store := apitest.NewStore()
	secret, created, err := api.Bootstrap(ctx, store)
	if err != nil || !created || !strings.HasPrefix(secret, "pds_") {
		t.Fatalf("first Bootstrap = %q, %v, %v", secret, created, err)
	}
	again, created, err := api.Bootstrap(ctx, store)
	if err != nil || created || again != "" {
		t.Fatalf("second Bootstrap = %q, %v, %v; want nothing done", again, created, err)
	}
	team, err := store.TeamByName(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	key, err := store.APIKeyByHash(ctx, auth.Hash(secret))
	if err != nil || !key.Admin || key.TeamID != team.ID {
		t.Fatalf("bootstrap key %+v, %v; want an admin key of team admin", key, err)
	}
	if n, _ := store.CountAPIKeys(ctx); n != 1 {
		t.Fatalf("%d keys after bootstrap", n)
	}
}

func TestCreateKey(t *testing.T) {
	ctx := context.Background()
	store := apitest.NewStore()
	s1, k1, err := api.CreateKey(ctx, store, "acme", "", true)
	if err != nil {
		t.Fatal(err)
	}
	s2, k2, err := api.CreateKey(ctx, store, "acme", "second", false)
	if err != nil {
		t.Fatal(err)
	}
	if s1 == s2 || k1.ID == k2.ID || k1.TeamID != k2.TeamID {
		t.Fatalf("keys %+v %+v", k1, k2)
	}
	if k1.Name != "default" || !k1.Admin || k2.Name != "second" || k2.Admin {
		t.Fatalf("names/admin: %+v %+v", k1, k2)
	}
	stored, err := store.APIKeyByHash(ctx, k1.Hash)
	if err != nil || stored.ID != k1.ID {
		t.Fatalf("stored key %+v, %v", stored, err)
	}
	if strings.Contains(k1.Hash, s1) {
		t.Fatal("the secret is stored")
	}
	if _, _, err := api.CreateKey(ctx, store, "", "x", false); pandastack.ErrorCode(err) != pandastack.EInvalid {
		t.Fatalf("empty team: %v", err)
	}
}
