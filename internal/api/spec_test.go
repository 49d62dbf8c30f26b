package api_test

import (
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
)

// TestSpecMatchesRoutes: every served route is in api/openapi.yaml and every
// operation in the spec is served, with the same authentication.
func TestSpecMatchesRoutes(t *testing.T) {
	s := loadSpec(t)
	served := map[string]api.Route{}
	for _, r := range api.Routes() {
		served[r.Method+" "+r.Path] = r
	}
	documented := map[string]map[string]any{}
	for path, ops := range s.paths {
		for method, op := range ops {
			documented[strings.ToUpper(method)+" "+path] = op.(map[string]any)
		}
	}
	var missing, unserved []string
	for k := range served {
		if _, ok := documented[k]; !ok {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if _, ok := served[k]; !ok {
			unserved = append(unserved, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(unserved)
	if len(missing) > 0 {
		t.Errorf("routes served but missing from api/openapi.yaml:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(unserved) > 0 {
		t.Errorf("operations in api/openapi.yaml that the server does not serve:\n  %s", strings.Join(unserved, "\n  "))
	}
	for k, r := range served {
		op, ok := documented[k]
		if !ok {
			continue
		}
		sec, hasSec := op["security"].([]any)
		public := hasSec && len(sec) == 0
		if public != (r.Access == "public") {
			t.Errorf("%s: spec says public=%v, server access is %s", k, public, r.Access)
		}
		resps, _ := op["responses"].(map[string]any)
		// Admin-only routes document 403; so may team routes that refuse
		// part of what they do to non-admin keys (template builds).
		if _, ok := resps["403"]; (r.Access == "admin" && !ok) || (r.Access == "public" && ok) {
			t.Errorf("%s: admin-only routes must document 403, public ones must not; access is %s", k, r.Access)
		}
		// A public route with its own authentication (a webhook's
		// signature) names it in x-authenticated-by and documents 401.
		_, selfAuth := op["x-authenticated-by"]
		if _, ok := resps["401"]; (r.Access != "public" || selfAuth) != ok {
			t.Errorf("%s: authenticated routes (and only they) must document 401; access is %s", k, r.Access)
		}
	}
}

// TestSpecResponses calls a handful of endpoints and validates each answer
// against the spec (call does the validation; this test makes sure each
// documented shape is exercised at least once).
func TestSpecResponses(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, map[string]any{"metadata": map[string]string{"owner": "ci"}, "env": map[string]string{"A": "1"}})
	base := "/v1/sandboxes/" + sb.ID
	call(t, env, req{method: "PUT", path: base + "/files?path=/tmp/a.txt", key: env.Key, body: []byte("hello")})
	bg := call(t, env, req{method: "POST", path: base + "/exec", key: env.Key, body: map[string]any{"cmd": "echo bg", "background": true}})
	wantStatus(t, bg, http.StatusAccepted)

	tests := []struct {
		name   string
		r      req
		status int
	}{
		{"health", req{method: "GET", path: "/v1/health"}, 200},
		{"list sandboxes", req{method: "GET", path: "/v1/sandboxes?state=all", key: env.Key}, 200},
		{"get sandbox", req{method: "GET", path: base, key: env.Key}, 200},
		{"set ttl", req{method: "PUT", path: base + "/ttl", key: env.Key, body: map[string]any{"ttl_seconds": 60}}, 200},
		{"exec buffered", req{method: "POST", path: base + "/exec", key: env.Key, body: map[string]any{"cmd": "echo hi; err oops; hex ff00"}}, 200},
		{"exec streamed", req{method: "POST", path: base + "/exec", key: env.Key, body: map[string]any{"cmd": "echo hi; err oops"},
			header: map[string]string{"Accept": "application/x-ndjson"}}, 200},
		{"processes", req{method: "GET", path: base + "/processes", key: env.Key}, 200},
		{"stat", req{method: "GET", path: base + "/files/stat?path=/tmp/a.txt", key: env.Key}, 200},
		{"list dir", req{method: "GET", path: base + "/files/list?path=/tmp", key: env.Key}, 200},
		{"write file", req{method: "PUT", path: base + "/files?path=/tmp/b.txt&mode=0600", key: env.Key, body: []byte("x")}, 200},
		{"templates", req{method: "GET", path: "/v1/templates", key: env.Key}, 200},
		{"create key", req{method: "POST", path: "/v1/keys", key: env.AdminKey, body: map[string]any{"team": "initech", "name": "ci"}}, 201},
		{"build template", req{method: "POST", path: "/v1/templates/python/build", key: env.AdminKey}, 200},
		{"error: not found", req{method: "GET", path: "/v1/sandboxes/sb_nope", key: env.Key}, 404},
		{"error: unauthorized", req{method: "GET", path: "/v1/sandboxes"}, 401},
		{"error: unknown route", req{method: "GET", path: "/v2/nothing"}, 404},
		{"error: wrong method", req{method: "PATCH", path: "/v1/sandboxes", key: env.Key}, 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, tt.r)
			wantStatus(t, r, tt.status)
			if tt.status < 300 && r.Header.Get("Content-Type") == "" {
				t.Fatalf("no Content-Type")
			}
		})
	}
}

// TestErrorCodesDocumented: the spec's error code enum lists every code the
// status table knows.
func TestErrorCodesDocumented(t *testing.T) {
	s := loadSpec(t)
	detail := s.resolve(s.schemaRef("ErrorDetail"))
	enum := asList(detail["properties"].(map[string]any)["code"].(map[string]any)["enum"])
	for _, code := range allCodes {
		if !slices.Contains(enum, any(code)) {
			t.Errorf("error code %q is missing from ErrorDetail.code in the spec", code)
		}
	}
}
