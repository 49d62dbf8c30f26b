package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/api/apitest"
)

// The API's fuzz targets send arbitrary input through the real handler
// (routing, authentication, decoding, validation) over the fake backends,
// and hold every answer to what a client relies on: no 500 (a crash or an
// unmapped error), an error body {"error":{"code","message"}} with both
// filled in, and a response the OpenAPI spec documents.

// fuzzRoute is one route a target sends input to. Path holds {id} for a
// live sandbox of the caller's team and {vol} for one of its volumes.
type fuzzRoute struct {
	method, path string
	admin        bool   // send the admin key rather than a team's
	contentType  string // default application/json
}

// fuzzEnv is a fake-backed server with a sandbox and a volume of team acme.
type fuzzEnv struct {
	*apitest.Env
	handler    http.Handler
	sandbox    string
	volume     string
	sandboxIDs map[string]bool
}

func startFuzzEnv(f *testing.F) *fuzzEnv {
	env := apitest.Start(f)
	e := &fuzzEnv{Env: env, handler: env.Server.Config.Handler}
	var sb struct{ ID string }
	e.mustCall(f, "POST", "/v1/sandboxes", env.Key, `{"template":"base","ttl_seconds":3600}`, &sb)
	var vol struct{ ID string }
	e.mustCall(f, "POST", "/v1/volumes", env.Key, `{"name":"data","size_mib":64}`, &vol)
	e.sandbox, e.volume = sb.ID, vol.ID
	return e
}

func (e *fuzzEnv) mustCall(f *testing.F, method, path, key, body string, out any) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+key)
	r.Header.Set("Content-Type", "application/json")
	e.handler.ServeHTTP(rec, r)
	if rec.Code >= 300 || json.Unmarshal(rec.Body.Bytes(), out) != nil {
		f.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	}
}

// send performs one request in process and checks the answer.
func (e *fuzzEnv) send(t *testing.T, rt fuzzRoute, pathSuffix, query string, body []byte) response {
	t.Helper()
	p := strings.NewReplacer("{id}", e.sandbox, "{vol}", e.volume).Replace(rt.path) + pathSuffix
	target := p
	if query != "" {
		target += "?" + query
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, rt.method, "http://api.test"+target, bytes.NewReader(body))
	if err != nil {
		return response{} // not a request a client could send
	}
	key := e.Key
	if rt.admin {
		key = e.AdminKey
	}
	r.Header.Set("Authorization", "Bearer "+key)
	ct := rt.contentType
	if ct == "" {
		ct = "application/json"
	}
	r.Header.Set("Content-Type", ct)
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, r)
	resp := response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
	checkFuzzAnswer(t, rt.method, r.URL.EscapedPath(), resp)
	return resp
}

// checkFuzzAnswer asserts what every answer to arbitrary input must hold.
func checkFuzzAnswer(t *testing.T, method, p string, r response) {
	t.Helper()
	if r.Status == http.StatusInternalServerError {
		t.Fatalf("%s %s: 500 for client input: %s", method, p, r.Body)
	}
	if r.Status >= 400 {
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(r.Body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Fatalf("%s %s: %d without a JSON error naming code and message: %q", method, p, r.Status, r.Body)
		}
	}
	if r.Status >= 300 && r.Status < 400 && path.Clean(p) != p {
		return // net/http redirects a path with ".." or "//" to its clean form
	}
	if r.Status == http.StatusGatewayTimeout || r.Status == http.StatusServiceUnavailable {
		return // the fuzz request's own deadline: the stream may have been cut
	}
	checkAgainstSpec(t, method, p, r)
}

// fuzzBodies is a target sending arbitrary bodies to one of routes,
// chosen by the input's first byte.
func fuzzBodies(f *testing.F, routes []fuzzRoute, seeds map[int][]string) {
	for i, ss := range seeds {
		for _, s := range ss {
			f.Add(byte(i), []byte(s))
		}
	}
	for i := range routes {
		f.Add(byte(i), []byte(`{}`))
		f.Add(byte(i), []byte(`{"unknown":1}`))
		f.Add(byte(i), []byte(`{} {}`))
		f.Add(byte(i), []byte(``))
	}
	e := startFuzzEnv(f)
	f.Fuzz(func(t *testing.T, which byte, body []byte) {
		e.send(t, routes[int(which)%len(routes)], "", "", body)
	})
}

// FuzzCreateSandboxBody: POST /v1/sandboxes, the bodies the SDKs and the
// e2e suite send and whatever else a client might.
func FuzzCreateSandboxBody(f *testing.F) {
	fuzzBodies(f, []fuzzRoute{{method: "POST", path: "/v1/sandboxes"}}, map[int][]string{0: {
		`{"template":"base","ttl_seconds":300,"metadata":{"task":"x"}}`,
		`{"template":"code-interpreter","ttl_seconds":600}`,
		`{"template":"base","env":{"GREETING":"hi"},"cpus":2,"memory_mib":1024,"disk_gib":4}`,
		`{"template":"base","network":{"egress":"deny","allow_domains":["example.com"],"public_ports":[8080]}}`,
		`{"template":"base","volumes":[{"volume":"data","path":"/data"}]}`,
		`{"snapshot":"snp_0123456789abcdef"}`,
		`{"template":"base","ttl_seconds":-1}`,
		`{"template":"base","metadata":{"":"x"}}`,
	}})
}

// sandboxRoutes are the JSON body routes on one sandbox.
var sandboxRoutes = []fuzzRoute{
	{method: "POST", path: "/v1/sandboxes/{id}/exec"},
	{method: "PUT", path: "/v1/sandboxes/{id}/ttl"},
	{method: "PUT", path: "/v1/sandboxes/{id}/network"},
	{method: "POST", path: "/v1/sandboxes/{id}/snapshot"},
	{method: "POST", path: "/v1/sandboxes/{id}/fork"},
	{method: "POST", path: "/v1/sandboxes/{id}/files/mkdir"},
	{method: "POST", path: "/v1/sandboxes/{id}/files/rename"},
	{method: "POST", path: "/v1/sandboxes/{id}/processes/1/signal"},
	{method: "POST", path: "/v1/sandboxes/{id}/code"},
	{method: "POST", path: "/v1/sandboxes/{id}/ports/8080/url"},
	{method: "POST", path: "/v1/sandboxes/{id}/hibernate"},
}

// FuzzSandboxBodies: the JSON bodies of exec, ttl, network policy,
// snapshot, fork, files, signal, run_code, port URLs and hibernate.
func FuzzSandboxBodies(f *testing.F) {
	fuzzBodies(f, sandboxRoutes, map[int][]string{
		0: {`{"cmd":"echo hi","timeout_seconds":30}`, `{"args":["echo","a b"],"env":{"X":"1"},"cwd":"/tmp","user":"root"}`,
			`{"cmd":"cat","stdin":"hello"}`, `{"cmd":"cat","stdin_base64":"aGVsbG8="}`, `{"cmd":"echo","args":["x"]}`,
			`{"cmd":"echo hi","timeout_seconds":-1}`, `{"cmd":"echo hi","env":{"1BAD":"x"}}`},
		1: {`{"ttl_seconds":60}`, `{"ttl_seconds":0}`, `{"ttl_seconds":9223372036854775807}`},
		2: {`{"egress":"deny","allow_cidrs":["1.1.1.1/32"],"allow_domains":["example.com","*.example.org"],"public_ports":[8080]}`,
			`{"egress":"allow","deny_cidrs":["169.254.169.254"]}`},
		3:  {`{"name":"before-upgrade"}`},
		4:  {`{"count":2}`, `{"count":0}`, `{"count":100000}`},
		5:  {`{"path":"/work/dir/sub"}`, `{"path":"relative"}`, `{"path":"/a\u0000b"}`},
		6:  {`{"from":"/work/a","to":"/work/b"}`},
		7:  {`{"signal":"TERM"}`, `{"signal":"9"}`, `{"signal":"SIGFOO"}`},
		8:  {`{"code":"print(2 ** 10)"}`, `{"code":"x","context_id":"ctx1","timeout_seconds":10}`},
		9:  {`{"expires_in_seconds":3600}`, `{"expires_in_seconds":-5}`},
		10: {`{"timeout_seconds":5}`},
	})
}

// adminRoutes are the other JSON body routes: keys, quotas, volumes,
// snapshot import and export.
var adminRoutes = []fuzzRoute{
	{method: "POST", path: "/v1/keys", admin: true},
	{method: "PUT", path: "/v1/teams/acme/quotas", admin: true},
	{method: "POST", path: "/v1/volumes"},
	{method: "POST", path: "/v1/snapshots"},
	{method: "POST", path: "/v1/snapshots/snp_0123456789abcdef/export"},
	{method: "POST", path: "/v1/sandboxes/{id}/wake"},
}

// FuzzAccountBodies: API keys, team quotas, volumes and snapshot archives.
func FuzzAccountBodies(f *testing.F) {
	fuzzBodies(f, adminRoutes, map[int][]string{
		0: {`{"team":"acme","name":"ci"}`, `{"team":"","name":"x"}`, `{"team":"new-team","name":"` + strings.Repeat("n", 300) + `"}`},
		1: {`{"max_sandboxes":10,"requests_per_second":5}`, `{"max_sandboxes":null}`, `{"max_sandboxes":-1}`, `{"max_vcpus":1.5}`, `{"bogus":1}`},
		2: {`{"name":"data2","size_mib":64}`, `{"name":"../x","size_mib":1}`, `{"name":"big","size_mib":1e12}`},
		3: {`{"object_key":"exports/snp_1.tar","name":"restored"}`},
		4: {`{"object_key":"exports/x.tar"}`},
	})
}

// FuzzQuery sends arbitrary query strings to the routes that read query
// parameters: list filters (state, metadata.KEY), file paths and modes,
// recursive removes, build sizes and teams.
func FuzzQuery(f *testing.F) {
	routes := []fuzzRoute{
		{method: "GET", path: "/v1/sandboxes"},
		{method: "GET", path: "/v1/sandboxes/{id}/files"},
		{method: "PUT", path: "/v1/sandboxes/{id}/files", contentType: "application/octet-stream"},
		{method: "DELETE", path: "/v1/sandboxes/{id}/files"},
		{method: "GET", path: "/v1/sandboxes/{id}/files/list"},
		{method: "GET", path: "/v1/sandboxes/{id}/files/stat"},
		{method: "GET", path: "/v1/machines"},
		{method: "GET", path: "/v1/keys", admin: true},
		{method: "POST", path: "/v1/templates/custom-app/build", contentType: "application/x-tar"},
		{method: "GET", path: "/v1/templates/base/builds"},
	}
	for i, q := range map[int][]string{
		0: {"state=all", "state=live&metadata.task=x", "metadata.=x", "metadata.a=1&metadata.a=2", "state=bogus"},
		1: {"path=/work/out.txt", "path=relative", "path=/a%00b", "path="},
		2: {"path=/work/out.txt&mode=644", "path=/x&mode=999", "path=/x&mode=-1", "path=/x&mode=77777777777"},
		3: {"path=/work&recursive=true", "path=/work&recursive=maybe"},
		4: {"path=/"},
		5: {"path=/etc/passwd"},
		6: {"state=all", "state=nope"},
		7: {"team=acme", "team=nope"},
		8: {"cpus=2&memory_mib=1024&disk_gib=4&tag=v1", "cpus=-1", "cpus=99999999999999999999", "tag=../x", "team=globex"},
		9: {"limit=5"},
	} {
		for _, s := range q {
			f.Add(byte(i), s)
		}
	}
	e := startFuzzEnv(f)
	f.Fuzz(func(t *testing.T, which byte, query string) {
		rt := routes[int(which)%len(routes)]
		var body []byte
		if rt.method == "PUT" {
			body = []byte("hello")
		}
		e.send(t, rt, "", query, body)
	})
}

// FuzzPathParams puts arbitrary text in the path parameters: sandbox,
// snapshot, volume, key and build ids, template names, pids and ports.
func FuzzPathParams(f *testing.F) {
	prefixes := []fuzzRoute{
		{method: "GET", path: "/v1/sandboxes/"},
		{method: "GET", path: "/v1/snapshots/"},
		{method: "GET", path: "/v1/volumes/"},
		{method: "DELETE", path: "/v1/keys/"},
		{method: "GET", path: "/v1/templates/"}, // + NAME/versions
		{method: "GET", path: "/v1/sandboxes/{id}/processes/"},
		{method: "POST", path: "/v1/sandboxes/{id}/ports/"}, // + PORT/url
		{method: "GET", path: "/v1/teams/"},                 // + TEAM/quotas
		{method: "GET", path: "/v1/templates/base/builds/"},
	}
	suffix := []string{"", "", "", "", "/versions", "/stream", "/url", "/quotas", "/logs"}
	for i, segs := range map[int][]string{
		0: {"sbx_0123456789abcdef", "..", "%2e%2e", "sbx_" + strings.Repeat("f", 100)},
		1: {"snp_1"}, 2: {"vol_1"}, 3: {"key_1"}, 4: {"base", "Bad Name", "a.b"},
		5: {"1", "0", "-1", "99999999999999999999", "abc"},
		6: {"8080", "0", "65536", "-1", "http"},
		7: {"acme", "nope"}, 8: {"bld_0123456789abcdef", "x"},
	} {
		for _, s := range segs {
			f.Add(byte(i), s)
		}
	}
	e := startFuzzEnv(f)
	f.Fuzz(func(t *testing.T, which byte, seg string) {
		i := int(which) % len(prefixes)
		rt := prefixes[i]
		if i == 7 {
			rt.admin = true
		}
		var body []byte
		if rt.method == "POST" {
			body = []byte(`{}`)
		}
		e.send(t, rt, url.PathEscape(seg)+suffix[i], "", body)
	})
}
