package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/api/apitest"
)

func TestRequestID(t *testing.T) {
	env := apitest.Start(t)
	tests := []struct {
		name   string
		sent   string
		reused bool
	}{
		{"generated", "", false},
		{"client's id is echoed", "trace-123.abc", true},
		{"unsafe id is replaced", "bad id\twith spaces", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{}
			if tt.sent != "" {
				h["X-Request-Id"] = tt.sent
			}
			r := call(t, env, req{method: "GET", path: "/v1/health", header: h})
			got := r.Header.Get("X-Request-Id")
			if got == "" || (got == tt.sent) != tt.reused {
				t.Fatalf("X-Request-Id %q (sent %q)", got, tt.sent)
			}
		})
	}
}

func TestRequestLog(t *testing.T) {
	env := apitest.Start(t)
	r := call(t, env, req{method: "GET", path: "/v1/sandboxes", key: env.Key, header: map[string]string{"X-Request-Id": "req-42"}})
	wantStatus(t, r, 200)
	var line string
	for _, l := range strings.Split(env.Logs.String(), "\n") {
		if strings.Contains(l, "request_id=req-42") {
			line = l
		}
	}
	for _, want := range []string{"msg=request", "method=GET", "path=/v1/sandboxes", "status=200", "duration=", "team=acme"} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %q", line, want)
		}
	}
	if strings.Contains(env.Logs.String(), env.Key) {
		t.Error("the API key appears in the log")
	}
}

func TestUnknownRoutes(t *testing.T) {
	env := apitest.Start(t)
	tests := []struct {
		name    string
		method  string
		path    string
		status  int
		code    string
		message string
		allow   string
	}{
		{"unknown path", "GET", "/v1/nothing", 404, "not_found", "no route for GET /v1/nothing", ""},
		{"root", "GET", "/", 404, "not_found", "no route", ""},
		{"wrong method", "PATCH", "/v1/sandboxes/abc", 405, "method_not_allowed", "PATCH is not allowed", "DELETE, GET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, req{method: tt.method, path: tt.path, key: env.Key})
			wantError(t, r, tt.status, tt.code, tt.message)
			if got := r.Header.Get("Allow"); got != tt.allow {
				t.Fatalf("Allow %q, want %q", got, tt.allow)
			}
			if r.Status == http.StatusMethodNotAllowed && r.Header.Get("Content-Type") != "application/json" {
				t.Fatal("405 is not JSON")
			}
		})
	}
}
