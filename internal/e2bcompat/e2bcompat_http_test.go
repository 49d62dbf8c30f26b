package e2bcompat_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
	"github.com/pandastack/pandastack/internal/e2bcompat"
	"github.com/pandastack/pandastack/internal/router"
)

// start runs the API over apitest's FAKE engine (no VMs) with the E2B
// surface on its port. The real-VM run of the stock SDKs is internal/e2e
// TestE2BCompat; this checks status codes and bodies of bad input fast.
func start(t *testing.T) *apitest.Env {
	return apitest.Start(t, func(c *api.Config) {
		c.E2B = e2bcompat.New(e2bcompat.Config{Store: c.Store, Engine: c.Engine, Secret: []byte("test secret"),
			IDPrefix: "sb_"}) // the fake engine's ids
	})
}

type result struct {
	status int
	body   map[string]any
	raw    string
	header http.Header
}

func do(t *testing.T, env *apitest.Env, method, path, body string, hdr ...string) result {
	t.Helper()
	req, err := http.NewRequest(method, env.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := result{status: resp.StatusCode, raw: string(b), header: resp.Header}
	_ = json.Unmarshal(b, &r.body)
	return r
}

// wantAPIError checks E2B's control-plane error: the status, and a body
// {"code": status, "message": "..."} (the SDKs branch on the number; an
// empty error body reads as success to older SDKs).
func wantAPIError(t *testing.T, r result, status int, msg string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	code, _ := r.body["code"].(float64)
	m, _ := r.body["message"].(string)
	if int(code) != status || m == "" || !strings.Contains(m, msg) {
		t.Fatalf("body %s: want {\"code\":%d,\"message\":\"...%s...\"}", r.raw, status, msg)
	}
}

func TestControlPlaneErrors(t *testing.T) {
	env := start(t)
	key := []string{"X-API-Key", env.Key}
	created := do(t, env, "POST", "/v2/sandboxes", `{"templateID":"base","metadata":{"a":"b"}}`, key...)
	if created.status != 201 {
		t.Fatalf("create: %d %s", created.status, created.raw)
	}
	id, _ := created.body["sandboxID"].(string)
	if id == "" || strings.Contains(id, "_") || created.body["envdAccessToken"] == "" || created.body["envdVersion"] != e2bcompat.EnvdVersion {
		t.Fatalf("create answered %s", created.raw)
	}
	tests := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		msg                      string
	}{
		{"no key", "GET", "/v2/sandboxes", "", nil, 401, "missing API key"},
		{"wrong key", "GET", "/v2/sandboxes", "", []string{"X-API-Key", "e2b_" + strings.Repeat("0", 40)}, 401, "invalid API key"},
		{"unknown template", "POST", "/sandboxes", `{"templateID":"nope"}`, key, 404, "nope"},
		{"a domain denied", "POST", "/sandboxes", `{"templateID":"base","network":{"denyOut":["example.com"]}}`, key, 400, "denyOut"},
		{"header rules", "POST", "/sandboxes", `{"templateID":"base","network":{"rules":{"a.example.com":[{"transform":{"headers":{"x":"y"}}}]}}}`, key, 400, "rules"},
		{"auto resume without auto pause", "POST", "/sandboxes", `{"templateID":"base","autoResume":{"enabled":true}}`, key, 400, "autoResume"},
		{"reserved metadata", "POST", "/sandboxes", `{"templateID":"base","metadata":{"pandastack.e2b.public":"x"}}`, key, 400, "reserved"},
		{"reserved metadata prefix", "POST", "/sandboxes", `{"templateID":"base","metadata":{"pandastack.e2b.auto_resume":"true"}}`, key, 400, "reserved"},
		{"negative timeout", "POST", "/sandboxes", `{"templateID":"base","timeout":-1}`, key, 400, ""},
		{"bad JSON", "POST", "/sandboxes", `{`, key, 400, "JSON"},
		{"unknown sandbox", "GET", "/sandboxes/abc123", "", key, 404, "abc123"},
		{"not an E2B id", "GET", "/sandboxes/sbx_abc", "", key, 404, ""},
		{"another team's info", "GET", "/sandboxes/" + id, "", []string{"X-API-Key", env.OtherKey}, 404, ""},
		{"another team's kill", "DELETE", "/sandboxes/" + id, "", []string{"X-API-Key", env.OtherKey}, 404, ""},
		{"another team's connect", "POST", "/v2/sandboxes/" + id + "/connect", `{}`, []string{"X-API-Key", env.OtherKey}, 404, ""},
		{"timeout without a value", "POST", "/sandboxes/" + id + "/timeout", `{}`, key, 400, "timeout"},
		{"bad limit", "GET", "/v2/sandboxes?limit=0", "", key, 400, "limit"},
		{"bad state", "GET", "/v2/sandboxes?state=dead", "", key, 400, "state"},
		{"unserved route", "POST", "/sandboxes/" + id + "/snapshots", `{}`, key, 404, "not part of the E2B API"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantAPIError(t, do(t, env, tt.method, tt.path, tt.body, tt.hdr...), tt.status, tt.msg)
		})
	}

	// Pause is 204, then 409; connect resumes it (201); kill is 204, then 404.
	if r := do(t, env, "POST", "/sandboxes/"+id+"/pause", `{}`, key...); r.status != 204 {
		t.Fatalf("pause: %d %s", r.status, r.raw)
	}
	wantAPIError(t, do(t, env, "POST", "/sandboxes/"+id+"/pause", `{}`, key...), 409, "already paused")
	if r := do(t, env, "POST", "/v2/sandboxes/"+id+"/connect", `{}`, key...); r.status != 201 || r.body["envdAccessToken"] != created.body["envdAccessToken"] {
		t.Fatalf("connect to a paused sandbox: %d %s", r.status, r.raw)
	}
	if r := do(t, env, "POST", "/sandboxes/"+id+"/connect", `{"timeout":60}`, key...); r.status != 200 {
		t.Fatalf("connect to a running sandbox: %d %s", r.status, r.raw)
	}
	if r := do(t, env, "DELETE", "/sandboxes/"+id, "", key...); r.status != 204 {
		t.Fatalf("kill: %d %s", r.status, r.raw)
	}
	wantAPIError(t, do(t, env, "DELETE", "/sandboxes/"+id, "", key...), 404, "")
}

func TestEnvdErrors(t *testing.T) {
	env := start(t)
	created := do(t, env, "POST", "/v2/sandboxes", `{}`, "X-API-Key", env.Key)
	id, _ := created.body["sandboxID"].(string)
	token, _ := created.body["envdAccessToken"].(string)
	rpc := func(id, token, path, body string) result {
		return do(t, env, "POST", path, body, "E2b-Sandbox-Id", id, "E2b-Sandbox-Port", "49983",
			"X-Access-Token", token, "Connect-Protocol-Version", "1")
	}
	r := rpc("doesnotexist0", token, "/filesystem.Filesystem/Stat", `{"path":"/"}`)
	if r.status != 502 || r.body["code"] != float64(502) || r.body["sandboxId"] != "doesnotexist0" {
		t.Fatalf("unknown sandbox: %d %s, want 502 JSON", r.status, r.raw)
	}
	r = rpc(id, "wrong", "/filesystem.Filesystem/Stat", `{"path":"/"}`)
	if r.status != 401 || r.body["code"] != "unauthenticated" {
		t.Fatalf("wrong token: %d %s, want 401 unauthenticated", r.status, r.raw)
	}
	r = rpc(id, token, "/process.Process/StreamInput", `{}`)
	if r.status != 501 || r.body["code"] != "unimplemented" || !strings.Contains(r.raw, "process.Process/StreamInput") {
		t.Fatalf("unserved method: %d %s, want 501 unimplemented naming it", r.status, r.raw)
	}
	r = rpc(id, token, "/process.Process/Update", `{"process":{"pid":4242},"pty":{"size":{"cols":80,"rows":24}}}`)
	if r.status != 404 || r.body["code"] != "not_found" || !strings.Contains(r.raw, "no pty") {
		t.Fatalf("resize of a process without a pty: %d %s, want 404 not_found", r.status, r.raw)
	}
	r = rpc(id, token, "/filesystem.Filesystem/Stat", `{"path":"/nope"}`)
	if r.status != 404 || r.body["code"] != "not_found" {
		t.Fatalf("missing path: %d %s, want 404 not_found", r.status, r.raw)
	}
	r = rpc(id, token, "/filesystem.Filesystem/Stat", `{"path":`)
	if r.status != 400 || r.body["code"] != "invalid_argument" {
		t.Fatalf("bad JSON: %d %s, want 400 invalid_argument", r.status, r.raw)
	}
	if r := do(t, env, "GET", "/health", "", "E2b-Sandbox-Id", id); r.status != 204 {
		t.Fatalf("health: %d %s", r.status, r.raw)
	}
	if r := do(t, env, "GET", "/files?path=/x", "", "E2b-Sandbox-Id", id); r.status != 401 || r.body["code"] != float64(401) {
		t.Fatalf("download without a token or signature: %d %s, want 401", r.status, r.raw)
	}
	// A streaming call that is not served ends its stream with the error.
	env2 := do(t, env, "POST", "/process.Process/StreamInput", string(envelope(`{}`)),
		"E2b-Sandbox-Id", id, "X-Access-Token", token, "Content-Type", "application/connect+json")
	if env2.status != 200 || !strings.Contains(env2.raw, `"unimplemented"`) || !strings.Contains(env2.raw, "StreamInput") || env2.raw[0] != 0x02 {
		t.Fatalf("StreamInput: %d %q, want an end-stream envelope with unimplemented", env2.status, env2.raw)
	}
	// Connect to a pid the guest does not know: the stream ends with
	// not_found before any start event (the SDK's connect rejects).
	conn := do(t, env, "POST", "/process.Process/Connect", string(envelope(`{"process":{"pid":4242}}`)),
		"E2b-Sandbox-Id", id, "X-Access-Token", token, "Content-Type", "application/connect+json")
	if conn.status != 200 || conn.raw == "" || conn.raw[0] != 0x02 || !strings.Contains(conn.raw, `"not_found"`) {
		t.Fatalf("Connect to an unknown pid: %d %q, want an end-stream envelope with not_found", conn.status, conn.raw)
	}
}

func envelope(msg string) []byte {
	var b bytes.Buffer
	n := len(msg)
	b.Write([]byte{0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	b.WriteString(msg)
	return b.Bytes()
}

// E2B's paths and routing headers belong to the API's host only: an app's
// registered hostname keeps its own /sandboxes.
func TestRegisteredHostsKeepTheirPaths(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "the app's "+r.URL.Path)
	}))
	defer app.Close()
	table := router.NewTable()
	if err := table.Register(router.Route{Host: "web.apps.test", Kind: router.HTTP, Access: router.Access{Public: true},
		Backend: router.Addr{Network: "tcp", Address: strings.TrimPrefix(app.URL, "http://")}}); err != nil {
		t.Fatal(err)
	}
	env := apitest.Start(t, func(c *api.Config) {
		c.Hosts = router.NewHTTP(router.HTTPConfig{Domain: "localhost", Table: table, Sandboxes: c.Store})
		c.E2B = e2bcompat.New(e2bcompat.Config{Store: c.Store, Engine: c.Engine, Secret: []byte("k"), IDPrefix: "sb_"})
	})
	for _, hdr := range [][]string{nil, {"E2b-Sandbox-Id", "abc"}} {
		req, _ := http.NewRequest("GET", env.URL+"/sandboxes", nil)
		req.Host = "web.apps.test"
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "the app's /sandboxes" {
			t.Fatalf("GET web.apps.test/sandboxes %v: %d %s, want the app's answer", hdr, resp.StatusCode, b)
		}
	}
	// E2B_DOMAIN=localhost: the SDK calls api.localhost, which is E2B's.
	req, _ := http.NewRequest("GET", env.URL+"/v2/sandboxes", nil)
	req.Host = "api.localhost"
	req.Header.Set("X-API-Key", env.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != "[]" {
		t.Fatalf("GET api.localhost/v2/sandboxes: %d %s, want the E2B list", resp.StatusCode, b)
	}
}
