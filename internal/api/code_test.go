package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/api/apitest"
)

// The fake guest runs no kernel (every port refuses), like a sandbox from
// a template other than code-interpreter.
func TestRunCodeWithoutKernel(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	path := "/v1/sandboxes/" + sb.ID + "/code"
	r := call(t, env, req{method: "POST", path: path, key: env.Key, body: map[string]any{"code": "1 + 1"}})
	wantError(t, r, http.StatusConflict, "conflict", "code-interpreter template")
	r = call(t, env, req{method: "POST", path: path, key: env.Key, body: map[string]any{"code": "1"},
		header: map[string]string{"Accept": "application/x-ndjson"}})
	wantError(t, r, http.StatusConflict, "conflict", "no code kernel")
	r = call(t, env, req{method: "GET", path: path + "/contexts", key: env.Key})
	wantError(t, r, http.StatusConflict, "conflict", "code-interpreter template")
}

func TestRunCodeBadInput(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	path := "/v1/sandboxes/" + sb.ID + "/code"
	for _, tt := range []struct {
		name   string
		body   any
		status int
		code   string
		msg    string
	}{
		{"language", map[string]any{"code": "1", "language": "ruby"}, 400, "invalid_argument", "not supported"},
		{"context id", map[string]any{"code": "1", "context_id": "a/b"}, 400, "invalid_argument", "context_id"},
		{"negative timeout", map[string]any{"code": "1", "timeout_seconds": -1}, 400, "invalid_argument", "timeout_seconds"},
		{"unknown field", map[string]any{"code": "1", "lang": "python"}, 400, "invalid_argument", "lang"},
		{"not JSON", []byte("print(1)"), 400, "invalid_argument", ""},
		{"too large", map[string]any{"code": strings.Repeat("x", 5<<20)}, 413, "too_large", "request body"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, req{method: "POST", path: path, key: env.Key, body: tt.body})
			wantError(t, r, tt.status, tt.code, tt.msg)
		})
	}
	r := call(t, env, req{method: "POST", path: "/v1/sandboxes/sbx_0000/code", key: env.Key, body: map[string]any{"code": "1"}})
	wantStatus(t, r, http.StatusNotFound)
}
