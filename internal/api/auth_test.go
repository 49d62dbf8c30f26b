package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
)

func TestAuthentication(t *testing.T) {
	env := apitest.Start(t)
	revoked, k, err := api.CreateKey(context.Background(), env.Store, "acme", "old", false)
	if err != nil {
		t.Fatal(err)
	}
	env.Store.RevokeKey(k.ID)
	tests := []struct {
		name    string
		header  map[string]string
		status  int
		message string
	}{
		{"bearer", map[string]string{"Authorization": "Bearer " + env.Key}, 200, ""},
		{"bearer, any case", map[string]string{"Authorization": "bearer " + env.Key}, 200, ""},
		{"X-API-Key", map[string]string{"X-API-Key": env.Key}, 200, ""},
		{"missing", nil, 401, "missing API key"},
		{"wrong key", map[string]string{"Authorization": "Bearer pds_" + strings.Repeat("A", 40)}, 401, "invalid API key"},
		{"not a key", map[string]string{"Authorization": "Bearer hunter2"}, 401, "invalid API key"},
		{"basic scheme", map[string]string{"Authorization": "Basic " + env.Key}, 401, "invalid API key"},
		{"revoked", map[string]string{"Authorization": "Bearer " + revoked}, 401, "invalid API key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, req{method: "GET", path: "/v1/sandboxes", header: tt.header})
			if tt.status == 200 {
				wantStatus(t, r, 200)
				return
			}
			wantError(t, r, tt.status, "unauthorized", tt.message)
		})
	}
}

func TestAdminOnlyRoutes(t *testing.T) {
	env := apitest.Start(t)
	tests := []struct {
		name string
		r    req
	}{
		{"create key", req{method: "POST", path: "/v1/keys", body: map[string]any{"team": "x"}}},
		{"build template", req{method: "POST", path: "/v1/templates/base/build"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.r.key = env.Key
			wantError(t, call(t, env, tt.r), http.StatusForbidden, "forbidden", "admin API key")
		})
	}
}
