package api_test

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/pandastack/pandastack/internal/api/apitest"
)

var e2bKeyShape = regexp.MustCompile(`^e2b_[0-9a-f]{40}$`)

// An E2B-shaped key (POST /v1/keys {"e2b":true}) authenticates as its team
// through our API as Bearer and as X-API-Key (what E2B's SDKs send), and a
// rotated one keeps its shape.
func TestE2BKey(t *testing.T) {
	env := apitest.Start(t)
	r := call(t, env, req{method: "POST", path: "/v1/keys", key: env.AdminKey, body: map[string]any{"team": "acme", "e2b": true}})
	wantStatus(t, r, http.StatusCreated)
	k := decode[struct {
		ID, Key, Prefix string
		TeamID          string `json:"team_id"`
	}](t, r)
	if !e2bKeyShape.MatchString(k.Key) || k.Prefix != k.Key[:12] {
		t.Fatalf("key %+v: want e2b_ + 40 hex", k)
	}
	sb := newSandbox(t, env, k.Key, nil)
	if sb.TeamID != k.TeamID {
		t.Fatalf("sandbox of team %s, want %s", sb.TeamID, k.TeamID)
	}
	r = call(t, env, req{method: "GET", path: "/v1/sandboxes/" + sb.ID, header: map[string]string{"X-API-Key": k.Key}})
	wantStatus(t, r, http.StatusOK)

	wrong := "e2b_" + k.Key[4:43] + "0"
	if wrong == k.Key {
		wrong = "e2b_" + k.Key[4:43] + "1"
	}
	r = call(t, env, req{method: "GET", path: "/v1/sandboxes", header: map[string]string{"X-API-Key": wrong}})
	wantError(t, r, http.StatusUnauthorized, "unauthorized", "invalid API key")

	r = call(t, env, req{method: "POST", path: "/v1/keys/" + k.ID + "/rotate", key: k.Key})
	wantStatus(t, r, http.StatusCreated)
	if nk := decode[struct{ Key string }](t, r); !e2bKeyShape.MatchString(nk.Key) {
		t.Fatalf("rotated key %q lost the e2b shape", nk.Key)
	}
}
