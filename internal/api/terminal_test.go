package api_test

import (
	"net/http"
	"testing"

	"github.com/pandastack/pandastack/internal/api/apitest"
)

// The terminal route's answers before the upgrade are JSON errors; the
// terminal itself is tested with the real guest agent (guestconn) and in
// real sandboxes (e2e TestSandboxShellAndWatch).
func TestTerminalRefusals(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	ws := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	for _, tc := range []struct {
		name   string
		path   string
		key    string
		header map[string]string
		status int
		code   string
		msg    string
	}{
		{"not a websocket", "/v1/sandboxes/" + sb.ID + "/pty", env.Key, nil, 400, "invalid_argument", "WebSocket"},
		{"no key", "/v1/sandboxes/" + sb.ID + "/pty", "", ws, 401, "unauthorized", ""},
		{"another team's sandbox", "/v1/sandboxes/" + sb.ID + "/pty", env.OtherKey, ws, 404, "not_found", "not found"},
		{"rows zero", "/v1/sandboxes/" + sb.ID + "/pty?rows=0", env.Key, ws, 400, "invalid_argument", "rows and cols"},
		{"cols not a number", "/v1/sandboxes/" + sb.ID + "/pty?cols=wide", env.Key, ws, 400, "invalid_argument", "cols"},
		{"bad env", "/v1/sandboxes/" + sb.ID + "/pty?env=NOEQUALS", env.Key, ws, 400, "invalid_argument", "KEY=VALUE"},
		{"unknown session", "/v1/sandboxes/" + sb.ID + "/pty?session=term_nope", env.Key, ws, 404, "not_found", "term_nope"},
		{"plain GET says why an upgrade would fail", "/v1/sandboxes/" + sb.ID + "/pty?session=term_nope", env.Key, nil, 404, "not_found", "term_nope"},
		{"bad offset", "/v1/sandboxes/" + sb.ID + "/pty?session=term_nope&offset=-1", env.Key, ws, 400, "invalid_argument", "offset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, env, req{method: "GET", path: tc.path, key: tc.key, header: tc.header})
			wantError(t, r, tc.status, tc.code, tc.msg)
		})
	}
	// A killed sandbox's terminal is gone.
	wantStatus(t, call(t, env, req{method: "DELETE", path: "/v1/sandboxes/" + sb.ID, key: env.Key}), http.StatusNoContent)
	wantError(t, call(t, env, req{method: "GET", path: "/v1/sandboxes/" + sb.ID + "/pty", key: env.Key, header: ws}), 410, "gone", sb.ID)
}

func TestWatchRefusals(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	base := "/v1/sandboxes/" + sb.ID + "/files/watch"
	for _, tc := range []struct {
		name, path, key string
		status          int
		code, msg       string
	}{
		{"no path", base, env.Key, 400, "invalid_argument", "path"},
		{"relative path", base + "?path=tmp", env.Key, 400, "invalid_argument", "path"},
		{"bad recursive", base + "?path=/tmp&recursive=maybe", env.Key, 400, "invalid_argument", "recursive"},
		{"bad timeout", base + "?path=/tmp&timeout_seconds=-1", env.Key, 400, "invalid_argument", "timeout_seconds"},
		{"another team's sandbox", base + "?path=/tmp", env.OtherKey, 404, "not_found", "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, call(t, env, req{method: "GET", path: tc.path, key: tc.key}), tc.status, tc.code, tc.msg)
		})
	}
}
