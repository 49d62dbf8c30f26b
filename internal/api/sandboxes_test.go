package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
)

func TestHealth(t *testing.T) {
	env := apitest.Start(t)
	r := call(t, env, req{method: "GET", path: "/v1/health"})
	wantStatus(t, r, http.StatusOK)
	h := decode[map[string]string](t, r)
	if h["status"] != "ok" || h["accel"] != "tcg" || !strings.Contains(h["isolation"], "NOT a security boundary") {
		t.Fatalf("health = %v", h)
	}
}

func TestCreateSandbox(t *testing.T) {
	big := map[string]string{}
	for i := range 65 {
		big[fmt.Sprint("k", i)] = "v"
	}
	tests := []struct {
		name    string
		body    any
		status  int
		code    string
		message string
		ttl     time.Duration // of a created sandbox
	}{
		{name: "defaults", body: map[string]any{"template": "base"}, status: 201, ttl: 5 * time.Minute},
		{name: "explicit ttl", body: map[string]any{"template": "base", "ttl_seconds": 60}, status: 201, ttl: time.Minute},
		{name: "max ttl", body: map[string]any{"template": "base", "ttl_seconds": 86400}, status: 201, ttl: 24 * time.Hour},
		{name: "ttl zero", body: map[string]any{"template": "base", "ttl_seconds": 0}, status: 400, code: "invalid_argument", message: "ttl_seconds must be between 1 and 86400"},
		{name: "ttl negative", body: map[string]any{"template": "base", "ttl_seconds": -5}, status: 400, code: "invalid_argument", message: "between 1 and 86400"},
		{name: "ttl above max", body: map[string]any{"template": "base", "ttl_seconds": 86401}, status: 400, code: "invalid_argument", message: "between 1 and 86400"},
		{name: "ttl not an integer", body: map[string]any{"template": "base", "ttl_seconds": 1.5}, status: 400, code: "invalid_argument", message: "ttl_seconds"},
		{name: "auto-hibernate off", body: map[string]any{"template": "base", "auto_hibernate_seconds": 0}, status: 201, ttl: 5 * time.Minute},
		{name: "auto-hibernate", body: map[string]any{"template": "base", "auto_hibernate_seconds": 30}, status: 201, ttl: 5 * time.Minute},
		{name: "auto-hibernate negative", body: map[string]any{"template": "base", "auto_hibernate_seconds": -1}, status: 400, code: "invalid_argument", message: "auto_hibernate_seconds must be between 0 (off) and 86400"},
		{name: "auto-hibernate absurd", body: map[string]any{"template": "base", "auto_hibernate_seconds": 1 << 40}, status: 400, code: "invalid_argument", message: "auto_hibernate_seconds must be between 0 (off) and 86400"},
		{name: "auto-hibernate not an integer", body: map[string]any{"template": "base", "auto_hibernate_seconds": "30s"}, status: 400, code: "invalid_argument", message: "auto_hibernate_seconds"},
		{name: "hibernate on expiry", body: map[string]any{"template": "base", "on_expiry": "hibernate"}, status: 201, ttl: 5 * time.Minute},
		{name: "kill on expiry", body: map[string]any{"template": "base", "on_expiry": "kill"}, status: 201, ttl: 5 * time.Minute},
		{name: "on expiry unknown", body: map[string]any{"template": "base", "on_expiry": "pause"}, status: 400, code: "invalid_argument", message: `on_expiry must be "kill" or "hibernate"`},
		{name: "on expiry of a service machine", body: map[string]any{"template": "base", "lifetime": "service", "on_expiry": "hibernate"}, status: 400, code: "invalid_argument", message: "a service machine has no TTL"},
		{name: "no template", body: map[string]any{}, status: 400, code: "invalid_argument", message: "template is required"},
		{name: "unknown template", body: map[string]any{"template": "nope"}, status: 404, code: "not_found", message: `template "nope" not found`},
		{name: "unknown field", body: map[string]any{"template": "base", "colour": "red"}, status: 400, code: "invalid_argument", message: `unknown field "colour"`},
		{name: "malformed JSON", body: `{"template": `, status: 400, code: "invalid_argument", message: "invalid JSON"},
		{name: "trailing data", body: `{"template":"base"} {}`, status: 400, code: "invalid_argument", message: "after the JSON object"},
		{name: "empty body", body: ``, status: 400, code: "invalid_argument", message: "must be a JSON object"},
		{name: "too many metadata keys", body: map[string]any{"template": "base", "metadata": big}, status: 400, code: "invalid_argument", message: "at most 64"},
		{name: "bad env name", body: map[string]any{"template": "base", "env": map[string]string{"A=B": "1"}}, status: 400, code: "invalid_argument", message: "env"},
		{name: "body over 1 MiB", body: `{"template":"` + strings.Repeat("x", 1<<20) + `"}`, status: 413, code: "too_large", message: "exceeds"},
	}
	env := apitest.Start(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, req{method: "POST", path: "/v1/sandboxes", key: env.Key, body: tt.body})
			if tt.code != "" {
				wantError(t, r, tt.status, tt.code, tt.message)
				return
			}
			wantStatus(t, r, tt.status)
			sb := decode[sandbox](t, r)
			created, _ := time.Parse(time.RFC3339, sb.CreatedAt)
			expires, _ := time.Parse(time.RFC3339, sb.ExpiresAt)
			if got := expires.Sub(created); got != tt.ttl {
				t.Fatalf("expires-created = %v, want %v", got, tt.ttl)
			}
			if sb.State != "running" || sb.Template != "base" || sb.Metadata == nil {
				t.Fatalf("sandbox = %+v", sb)
			}
		})
	}
}

func TestCreateSandboxPassesRequestToEngine(t *testing.T) {
	env := apitest.Start(t)
	newSandbox(t, env, env.Key, map[string]any{
		"ttl_seconds": 30, "metadata": map[string]string{"job": "42"}, "env": map[string]string{"LANG": "C"},
		"auto_hibernate_seconds": 45,
	})
	got := env.Engine.Created()
	if len(got) != 1 {
		t.Fatalf("engine got %d creates", len(got))
	}
	c := got[0]
	team, _ := env.Store.TeamByName(context.Background(), "acme")
	// The template reference reaches the engine resolved: the exact build
	// of the version the team's "base" names.
	if c.TeamID != team.ID || c.Template != "base@tpl_base" || c.TemplateVersion != 1 || c.TTL != 30*time.Second || c.Metadata["job"] != "42" || c.Env["LANG"] != "C" || c.AutoHibernate != 45*time.Second {
		t.Fatalf("CreateRequest = %+v", c)
	}
}

func TestQuota(t *testing.T) {
	env := apitest.Start(t, func(c *api.Config) { c.MaxLiveSandboxesPerTeam = 2 })
	a := newSandbox(t, env, env.Key, nil)
	newSandbox(t, env, env.Key, nil)
	r := call(t, env, req{method: "POST", path: "/v1/sandboxes", key: env.Key, body: map[string]any{"template": "base"}})
	wantError(t, r, http.StatusTooManyRequests, "quota_exceeded", "max_sandboxes is 2; team has 2 live sandboxes and this needs 1 more")

	// Another team has its own quota.
	newSandbox(t, env, env.OtherKey, nil)

	// Killing one frees a slot.
	wantStatus(t, call(t, env, req{method: "DELETE", path: "/v1/sandboxes/" + a.ID, key: env.Key}), http.StatusNoContent)
	newSandbox(t, env, env.Key, nil)
}

func TestEngineErrors(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		status  int
		code    string
		message string
		logged  string
	}{
		{"coded error keeps its message", apitestErr("unavailable", "no capacity on any host"), 503, "unavailable", "no capacity on any host", ""},
		{"plain error is internal", errors.New("qemu: disk on fire"), 500, "internal", "internal error", "qemu: disk on fire"},
		{"internal code hides the message", apitestErr("internal", "secret detail"), 500, "internal", "internal error", "secret detail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := apitest.Start(t)
			env.Engine.CreateErr = tt.err
			r := call(t, env, req{method: "POST", path: "/v1/sandboxes", key: env.Key, body: map[string]any{"template": "base"}})
			wantError(t, r, tt.status, tt.code, tt.message)
			if tt.code == "internal" && strings.Contains(string(r.Body), tt.logged) {
				t.Fatalf("internal detail leaked: %s", r.Body)
			}
			if tt.logged != "" && !strings.Contains(env.Logs.String(), tt.logged) {
				t.Fatalf("log does not contain %q:\n%s", tt.logged, env.Logs)
			}
		})
	}
}

func TestListSandboxes(t *testing.T) {
	env := apitest.Start(t)
	a := newSandbox(t, env, env.Key, map[string]any{"metadata": map[string]string{"env": "prod", "app": "x"}})
	b := newSandbox(t, env, env.Key, map[string]any{"metadata": map[string]string{"env": "dev", "app": "x"}})
	c := newSandbox(t, env, env.Key, nil)
	newSandbox(t, env, env.OtherKey, map[string]any{"metadata": map[string]string{"env": "prod"}})
	wantStatus(t, call(t, env, req{method: "DELETE", path: "/v1/sandboxes/" + c.ID, key: env.Key}), http.StatusNoContent)

	tests := []struct {
		name  string
		query string
		want  []string
	}{
		{"live by default", "", []string{a.ID, b.ID}},
		{"state=live", "?state=live", []string{a.ID, b.ID}},
		{"state=all includes ended", "?state=all", []string{a.ID, b.ID, c.ID}},
		{"metadata filter", "?metadata.env=prod", []string{a.ID}},
		{"two filters", "?metadata.env=dev&metadata.app=x", []string{b.ID}},
		{"no match", "?metadata.env=staging", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, req{method: "GET", path: "/v1/sandboxes" + tt.query, key: env.Key})
			wantStatus(t, r, http.StatusOK)
			list := decode[struct{ Sandboxes []sandbox }](t, r)
			got := []string{}
			for _, s := range list.Sandboxes {
				got = append(got, s.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("ids %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("empty list is an array", func(t *testing.T) {
		r := call(t, env, req{method: "GET", path: "/v1/sandboxes?metadata.env=none", key: env.Key})
		if !strings.Contains(string(r.Body), `"sandboxes":[]`) {
			t.Fatalf("body %s", r.Body)
		}
	})
	t.Run("bad state", func(t *testing.T) {
		r := call(t, env, req{method: "GET", path: "/v1/sandboxes?state=dead", key: env.Key})
		wantError(t, r, 400, "invalid_argument", "state must be live or all")
	})
}

// TestTeamIsolation: another team's sandbox answers exactly like a sandbox
// that does not exist, on every per-sandbox route.
func TestTeamIsolation(t *testing.T) {
	env := apitest.Start(t)
	theirs := newSandbox(t, env, env.OtherKey, nil)
	const missing = "sb_doesnotexist"
	for _, rt := range api.Routes() {
		if !strings.HasPrefix(rt.Path, "/v1/sandboxes/{id}") {
			continue
		}
		t.Run(rt.Method+" "+rt.Path, func(t *testing.T) {
			var bodies []any
			switch {
			case strings.HasSuffix(rt.Path, "/ttl"):
				bodies = []any{map[string]any{"ttl_seconds": 10}}
			case strings.HasSuffix(rt.Path, "/exec"):
				bodies = []any{map[string]any{"cmd": "echo"}}
			case strings.HasSuffix(rt.Path, "/signal"):
				bodies = []any{map[string]any{"signal": "TERM"}}
			case strings.HasSuffix(rt.Path, "/mkdir"):
				bodies = []any{map[string]any{"path": "/tmp/x"}}
			case strings.HasSuffix(rt.Path, "/rename"):
				bodies = []any{map[string]any{"from": "/tmp/a", "to": "/tmp/b"}}
			case rt.Method == "PUT":
				bodies = []any{[]byte("data")}
			default:
				bodies = []any{nil}
			}
			var answers []string
			for _, id := range []string{theirs.ID, missing} {
				p := strings.NewReplacer("{id}", id, "{pid}", "1").Replace(rt.Path)
				if strings.Contains(p, "/files") && !strings.HasSuffix(p, "/mkdir") && !strings.HasSuffix(p, "/rename") {
					p += "?path=/tmp/x"
				}
				r := call(t, env, req{method: rt.Method, path: p, key: env.Key, body: bodies[0]})
				wantError(t, r, 404, "not_found", "sandbox "+id+" not found")
				answers = append(answers, strings.ReplaceAll(string(r.Body), id, "ID"))
			}
			if answers[0] != answers[1] {
				t.Fatalf("another team's sandbox answers differently from a missing one:\n%s\n%s", answers[0], answers[1])
			}
		})
	}
	t.Run("list does not show it", func(t *testing.T) {
		r := call(t, env, req{method: "GET", path: "/v1/sandboxes?state=all", key: env.Key})
		if strings.Contains(string(r.Body), theirs.ID) {
			t.Fatalf("list leaks another team's sandbox: %s", r.Body)
		}
	})
	t.Run("it still exists for its owner", func(t *testing.T) {
		wantStatus(t, call(t, env, req{method: "GET", path: "/v1/sandboxes/" + theirs.ID, key: env.OtherKey}), 200)
	})
}

func TestKillSandbox(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	path := "/v1/sandboxes/" + sb.ID

	wantStatus(t, call(t, env, req{method: "DELETE", path: path, key: env.Key}), http.StatusNoContent)
	// Idempotent: killing an ended sandbox is not an error.
	wantStatus(t, call(t, env, req{method: "DELETE", path: path, key: env.Key}), http.StatusNoContent)

	got := decode[sandbox](t, call(t, env, req{method: "GET", path: path, key: env.Key}))
	if got.State != "killed" || got.EndedAt == "" {
		t.Fatalf("after kill: %+v", got)
	}
	ended, err := time.Parse(time.RFC3339, got.EndedAt)
	if err != nil {
		t.Fatal(err)
	}
	r := call(t, env, req{method: "POST", path: path + "/exec", key: env.Key, body: map[string]any{"cmd": "echo hi"}})
	wantError(t, r, http.StatusGone, "gone", "sandbox "+sb.ID+" was killed at "+ended.Format(time.RFC3339))
}

func TestExpiredSandboxIsGone(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	if err := env.Engine.Expire(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		r    req
	}{
		{"exec", req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/exec", body: map[string]any{"cmd": "echo"}}},
		{"read file", req{method: "GET", path: "/v1/sandboxes/" + sb.ID + "/files?path=/etc/hosts"}},
		{"processes", req{method: "GET", path: "/v1/sandboxes/" + sb.ID + "/processes"}},
		{"ttl", req{method: "PUT", path: "/v1/sandboxes/" + sb.ID + "/ttl", body: map[string]any{"ttl_seconds": 5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.r.key = env.Key
			wantError(t, call(t, env, tt.r), http.StatusGone, "gone", "was expired at")
		})
	}
}

func TestSetTTL(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	path := "/v1/sandboxes/" + sb.ID + "/ttl"
	tests := []struct {
		name    string
		body    any
		status  int
		message string
	}{
		{"extend", map[string]any{"ttl_seconds": 3600}, 200, ""},
		{"missing", map[string]any{}, 400, "ttl_seconds is required"},
		{"zero", map[string]any{"ttl_seconds": 0}, 400, "between 1 and 86400"},
		{"too long", map[string]any{"ttl_seconds": 100000}, 400, "between 1 and 86400"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, req{method: "PUT", path: path, key: env.Key, body: tt.body})
			if tt.status != 200 {
				wantError(t, r, tt.status, "invalid_argument", tt.message)
				return
			}
			wantStatus(t, r, 200)
			got := decode[sandbox](t, r)
			exp, _ := time.Parse(time.RFC3339, got.ExpiresAt)
			if d := time.Until(exp); d < 59*time.Minute || d > 61*time.Minute {
				t.Fatalf("expires in %v, want about 1h", d)
			}
		})
	}
}

func apitestErr(code, msg string) error {
	return pandastack.Errorf(code, "%s", msg)
}

// A platform service's machine (here a database's) is listed and readable
// through the sandbox API, but a kill, exec, file write or fork from there
// would leave its service's records wrong: each answers 409 naming the
// service to use.
func TestManagedMachineChangesOnlyThroughItsService(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	rec, err := env.Store.GetSandbox(context.Background(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	rec.ManagedBy = "database:db-orders"
	if err := env.Store.PutSandbox(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	path := "/v1/sandboxes/" + sb.ID
	got := decode[map[string]any](t, call(t, env, req{method: "GET", path: path, key: env.Key}))
	if got["managed_by"] != "database:db-orders" {
		t.Fatalf("GET shows managed_by %v", got["managed_by"])
	}
	msg := "sandbox " + sb.ID + " is a machine of database db-orders: manage it through /v1/databases/db-orders"
	for _, r := range []req{
		{method: "DELETE", path: path},
		{method: "POST", path: path + "/exec", body: map[string]any{"cmd": "echo hi"}},
		{method: "PUT", path: path + "/files?path=/tmp/x", body: []byte("x")},
		{method: "POST", path: path + "/fork", body: map[string]any{}},
		{method: "POST", path: path + "/hibernate"},
		{method: "PUT", path: path + "/ttl", body: map[string]any{"ttl_seconds": 60}},
	} {
		r.key = env.Key
		wantError(t, call(t, env, r), http.StatusConflict, "conflict", msg)
	}
	if rec, err := env.Store.GetSandbox(context.Background(), sb.ID); err != nil || !rec.State.Live() {
		t.Fatalf("after the refused calls: %+v %v", rec, err)
	}
	// Another team still gets 404, not the 409 that would confirm it.
	wantStatus(t, call(t, env, req{method: "DELETE", path: path, key: env.OtherKey}), http.StatusNotFound)
}
