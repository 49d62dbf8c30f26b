package api_test

import (
	"net/http"
	"testing"

	"github.com/pandastack/pandastack/internal/api/apitest"
)

type keyJSON struct {
	ID        string `json:"id"`
	Team      string `json:"team"`
	TeamID    string `json:"team_id"`
	Name      string `json:"name"`
	Prefix    string `json:"prefix"`
	Admin     bool   `json:"admin"`
	RevokedAt string `json:"revoked_at"`
}

func listKeys(t *testing.T, env *apitest.Env, key, query string) []keyJSON {
	t.Helper()
	r := call(t, env, req{method: "GET", path: "/v1/keys" + query, key: key})
	wantStatus(t, r, http.StatusOK)
	return decode[struct{ Keys []keyJSON }](t, r).Keys
}

func teamsOf(keys []keyJSON) map[string]int {
	m := map[string]int{}
	for _, k := range keys {
		m[k.Team]++
	}
	return m
}

func TestListKeys(t *testing.T) {
	env := apitest.Start(t)
	all := listKeys(t, env, env.AdminKey, "")
	if got := teamsOf(all); len(all) != 3 || got["admin"] != 1 || got["acme"] != 1 || got["globex"] != 1 {
		t.Fatalf("an admin lists %+v, want every team's key", all)
	}
	for _, k := range all {
		if k.Prefix == "" || k.ID == "" {
			t.Fatalf("key %+v lacks its id or prefix", k)
		}
	}
	if got := listKeys(t, env, env.AdminKey, "?team=globex"); len(got) != 1 || got[0].Team != "globex" {
		t.Fatalf("admin ?team=globex lists %+v", got)
	}
	mine := listKeys(t, env, env.Key, "")
	if len(mine) != 1 || mine[0].ID != env.KeyID || mine[0].Team != "acme" {
		t.Fatalf("a team key lists %+v, want only its own team's", mine)
	}
	// A team key cannot look at another team's keys.
	wantError(t, call(t, env, req{method: "GET", path: "/v1/keys?team=globex", key: env.Key}), 404, "not_found", "team globex not found")
}

func TestRevokeKey(t *testing.T) {
	env := apitest.Start(t)
	newKey := func(team string) (id, secret string) {
		t.Helper()
		r := call(t, env, req{method: "POST", path: "/v1/keys", key: env.AdminKey, body: map[string]any{"team": team, "name": "ci"}})
		wantStatus(t, r, http.StatusCreated)
		k := decode[struct{ ID, Key string }](t, r)
		return k.ID, k.Key
	}
	id, secret := newKey("acme")
	wantStatus(t, call(t, env, req{method: "GET", path: "/v1/sandboxes", key: secret}), http.StatusOK)

	// Another team's key id is not found, and stays valid.
	wantError(t, call(t, env, req{method: "DELETE", path: "/v1/keys/" + id, key: env.OtherKey}), 404, "not_found", "API key "+id+" not found")
	wantStatus(t, call(t, env, req{method: "GET", path: "/v1/sandboxes", key: secret}), http.StatusOK)

	// A key of the same team may revoke it; it fails at once.
	wantStatus(t, call(t, env, req{method: "DELETE", path: "/v1/keys/" + id, key: env.Key}), http.StatusNoContent)
	wantError(t, call(t, env, req{method: "GET", path: "/v1/sandboxes", key: secret}), 401, "unauthorized", "invalid API key")
	// Revoking again is a no-op; the listing shows when it was revoked.
	wantStatus(t, call(t, env, req{method: "DELETE", path: "/v1/keys/" + id, key: env.AdminKey}), http.StatusNoContent)
	for _, k := range listKeys(t, env, env.Key, "") {
		if (k.ID == id) != (k.RevokedAt != "") {
			t.Fatalf("key %+v: revoked_at wrong", k)
		}
	}
	wantError(t, call(t, env, req{method: "DELETE", path: "/v1/keys/key_nope", key: env.AdminKey}), 404, "not_found", "")

	// The last admin key cannot be revoked.
	admin := listKeys(t, env, env.AdminKey, "?team=admin")[0]
	wantError(t, call(t, env, req{method: "DELETE", path: "/v1/keys/" + admin.ID, key: env.AdminKey}), 409, "conflict", "last active admin key")
	wantStatus(t, call(t, env, req{method: "GET", path: "/v1/keys", key: env.AdminKey}), http.StatusOK)
}

func TestRotateKey(t *testing.T) {
	env := apitest.Start(t)
	r := call(t, env, req{method: "POST", path: "/v1/keys/" + env.KeyID + "/rotate", key: env.Key})
	wantStatus(t, r, http.StatusCreated)
	k := decode[struct {
		ID, Key, Team, Name, Prefix string
		Admin                       bool
	}](t, r)
	if k.ID == env.KeyID || k.Team != "acme" || k.Name != "test" || k.Admin || k.Prefix != k.Key[:12] {
		t.Fatalf("rotated key %+v", k)
	}
	// The old secret fails at once; the new one sees the team's sandboxes.
	wantError(t, call(t, env, req{method: "GET", path: "/v1/sandboxes", key: env.Key}), 401, "unauthorized", "")
	sb := newSandbox(t, env, k.Key, nil)
	wantStatus(t, call(t, env, req{method: "GET", path: "/v1/sandboxes/" + sb.ID, key: k.Key}), http.StatusOK)
	// A revoked key cannot be rotated back to life.
	wantError(t, call(t, env, req{method: "POST", path: "/v1/keys/" + env.KeyID + "/rotate", key: env.AdminKey}), 409, "conflict", "revoked")

	// The admin key rotates too (and stays admin).
	admin := listKeys(t, env, env.AdminKey, "?team=admin")[0]
	r = call(t, env, req{method: "POST", path: "/v1/keys/" + admin.ID + "/rotate", key: env.AdminKey})
	wantStatus(t, r, http.StatusCreated)
	na := decode[struct {
		Key   string
		Admin bool
	}](t, r)
	if !na.Admin {
		t.Fatal("the rotated admin key is not admin")
	}
	wantError(t, call(t, env, req{method: "GET", path: "/v1/keys", key: env.AdminKey}), 401, "unauthorized", "")
	wantStatus(t, call(t, env, req{method: "GET", path: "/v1/keys", key: na.Key}), http.StatusOK)
}
