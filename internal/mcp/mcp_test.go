package mcp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api/apitest"
	"github.com/pandastack/pandastack/internal/cli"
	"github.com/pandastack/pandastack/internal/mcp"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// harness is a Server running Serve on pipes, against a fake-backed API.
type harness struct {
	env    *apitest.Env
	c      *rpcClient
	in     *io.PipeWriter
	cancel context.CancelFunc
	done   chan error
	logs   *apitest.SyncBuffer
}

// start serves over env's API at url (env.URL unless a wrapper is given).
func start(t *testing.T, env *apitest.Env, url string) *harness {
	t.Helper()
	if url == "" {
		url = env.URL
	}
	h := &harness{env: env, done: make(chan error, 1), logs: &apitest.SyncBuffer{}}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h.in = inW
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	srv := mcp.New(sdk.NewClient(sdk.WithBaseURL(url), sdk.WithAPIKey(env.Key)),
		slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	srv.SetAPIKey(env.Key)
	go func() {
		err := srv.Serve(ctx, inR, outW)
		outW.Close()
		h.done <- err
	}()
	h.c = newRPCClient(t, inW, outR, 10*time.Second)
	t.Cleanup(func() {
		inW.Close()
		cancel()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return")
		}
		if t.Failed() {
			t.Logf("server log:\n%s", h.logs.String())
		}
	})
	return h
}

// wait waits for Serve to return and checks it returned nil.
func (h *harness) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
}

var (
	idRE      = regexp.MustCompile(`id: (\S+)`)
	startedRE = regexp.MustCompile(`\[started sandbox (\S+)`)
)

func match(t *testing.T, re *regexp.Regexp, text string) string {
	t.Helper()
	m := re.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("%q does not match %s", text, re)
	}
	return m[1]
}

// state returns a sandbox's state in the fake's store.
func state(t *testing.T, env *apitest.Env, id string) pandastack.SandboxState {
	t.Helper()
	sb, err := env.Store.GetSandbox(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return sb.State
}

// liveSandboxes counts the live sandboxes of every team.
func liveSandboxes(t *testing.T, env *apitest.Env) int {
	t.Helper()
	list, err := env.Store.ListSandboxes(context.Background(), pandastack.SandboxFilter{LiveOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

func TestInitialize(t *testing.T) {
	tests := []struct {
		name, asked, want string
	}{
		{"current version", "2025-06-18", "2025-06-18"},
		{"older client", "2024-11-05", "2024-11-05"},
		{"unknown version gets ours", "1999-01-01", "2025-06-18"},
		{"no version gets ours", "", "2025-06-18"},
	}
	env := apitest.Start(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, env, "")
			res := h.c.initialize(tt.asked)
			if res["protocolVersion"] != tt.want {
				t.Errorf("protocolVersion %v, want %s", res["protocolVersion"], tt.want)
			}
			info, _ := res["serverInfo"].(map[string]any)
			if info["name"] != "pandastack" || info["version"] != pandastack.Version {
				t.Errorf("serverInfo %v", info)
			}
			caps, _ := res["capabilities"].(map[string]any)
			if _, ok := caps["tools"].(map[string]any); !ok {
				t.Errorf("capabilities %v: want tools {}", caps)
			}
			var ping map[string]any
			h.c.result("ping", nil, &ping)
			if len(ping) != 0 {
				t.Errorf("ping result %v, want {}", ping)
			}
		})
	}
}

func TestToolsList(t *testing.T) {
	h := start(t, apitest.Start(t), "")
	h.c.initialize(mcp.ProtocolVersion)
	checkToolList(t, h.c)
}

// TestProtocolErrors sends one line, then a ping: the line's answer (if
// any) must come first, then the ping's.
func TestProtocolErrors(t *testing.T) {
	tests := []struct {
		name     string
		line     string
		wantCode int    // 0: no answer
		wantID   string // the error's id
	}{
		{"malformed JSON", `{"jsonrpc": "2.0", "id": 1, "method": `, -32700, "null"},
		{"not JSON at all", `hello`, -32700, "null"},
		{"batch is not allowed", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, -32600, "null"},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"resources/list"}`, -32601, "7"},
		{"string id", `{"jsonrpc":"2.0","id":"abc","method":"nope"}`, -32601, `"abc"`},
		{"unknown tool", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"rm_rf","arguments":{}}}`, -32602, "8"},
		{"tools/call without name", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{}}`, -32602, "9"},
		{"wrong jsonrpc version", `{"jsonrpc":"1.0","id":10,"method":"ping"}`, -32600, "10"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, -32600, "null"},
		{"initialized notification gets no answer", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0, ""},
		{"unknown notification gets no answer", `{"jsonrpc":"2.0","method":"notifications/whatever","params":{}}`, 0, ""},
		{"cancel of an unknown request gets no answer", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`, 0, ""},
		{"a response from the client gets no answer", `{"jsonrpc":"2.0","id":5,"result":{}}`, 0, ""},
		{"blank line gets no answer", ``, 0, ""},
	}
	h := start(t, apitest.Start(t), "")
	h.c.initialize(mcp.ProtocolVersion)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.c.t = t
			defer func() { h.c.t = nil }()
			h.c.sendRaw(tt.line)
			if tt.wantCode != 0 {
				r := h.c.recv()
				if r.Error == nil || r.Error.Code != tt.wantCode {
					t.Fatalf("answer %+v (result %s), want error %d", r.Error, r.Result, tt.wantCode)
				}
				if string(r.ID) != tt.wantID {
					t.Errorf("id %s, want %s", r.ID, tt.wantID)
				}
				if r.Error.Message == "" {
					t.Error("empty error message")
				}
			}
			h.c.send(map[string]any{"jsonrpc": "2.0", "id": "after", "method": "ping"})
			if r := h.c.recv(); string(r.ID) != `"after"` {
				t.Fatalf("got answer for %s (%+v), want the ping's", r.ID, r.Error)
			}
		})
	}
	h.c.t = t
	// The server still works.
	if text := h.c.mustTool("exec", map[string]any{"command": "echo still here"}); !strings.Contains(text, "still here") {
		t.Errorf("exec after errors: %s", text)
	}
}

func TestExec(t *testing.T) {
	tests := []struct {
		name    string
		args    map[string]any
		isError bool
		want    []string // substrings of the text
	}{
		{"echo", map[string]any{"command": "echo hello world"}, false,
			[]string{"exit_code: 0", "timed_out: false", "--- stdout (12 bytes) ---\nhello world\n", "--- stderr: (empty) ---"}},
		{"non-zero exit is an error", map[string]any{"command": "echo partial; exit 3"}, true,
			[]string{"exit_code: 3", "partial"}},
		{"stderr is labelled", map[string]any{"command": "err oops"}, false,
			[]string{"--- stdout: (empty) ---", "--- stderr (5 bytes) ---\noops\n"}},
		{"unknown command", map[string]any{"command": "frobnicate"}, true,
			[]string{"exit_code: 127", "frobnicate: not found"}},
		{"timeout", map[string]any{"command": "sleep 5", "timeout_seconds": 0.2}, true,
			[]string{"timed_out: true", "killed after 0.2s", "exit_code: 137"}},
		{"cwd", map[string]any{"command": "pwd", "cwd": "/tmp"}, false, []string{"/tmp\n"}},
		{"env", map[string]any{"command": "getenv GREETING", "env": map[string]string{"GREETING": "hi"}}, false, []string{"hi\n"}},
		{"large output is truncated", map[string]any{"command": "yes 1000000"}, false,
			[]string{"output truncated: 897600 of 1000000 bytes omitted", "--- stdout (1000000 bytes) ---"}},
		{"missing command", map[string]any{}, true, []string{"command is required"}},
		{"unknown argument", map[string]any{"command": "echo", "shell": "bash"}, true, []string{`unknown field "shell"`}},
		{"wrong type", map[string]any{"command": 42}, true, []string{"command must be of type string"}},
		{"bad timeout", map[string]any{"command": "echo", "timeout_seconds": -1}, true, []string{"timeout_seconds must be positive"}},
		{"relative cwd is the server's error", map[string]any{"command": "pwd", "cwd": "tmp"}, true, []string{"invalid_argument"}},
	}
	h := start(t, apitest.Start(t), "")
	h.c.initialize(mcp.ProtocolVersion)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.c.t = t
			defer func() { h.c.t = nil }()
			text, isErr := h.c.callTool("exec", tt.args)
			if isErr != tt.isError {
				t.Errorf("isError %v, want %v", isErr, tt.isError)
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("text does not contain %q:\n%.2000s", w, text)
				}
			}
			if len(text) > 210<<10 {
				t.Errorf("text is %d bytes, want at most about 200 KiB", len(text))
			}
		})
	}
}

func TestFiles(t *testing.T) {
	binary := []byte{0xff, 0xfe, 0, 1, 2, 'a'}
	tests := []struct {
		name    string
		tool    string
		args    map[string]any
		isError bool
		want    string // substring of the text
		exact   string // the whole text, if set
	}{
		{"write text", "write_file", map[string]any{"path": "/tmp/hello.txt", "content": "héllo\nworld\n"}, false, "wrote 13 bytes to /tmp/hello.txt", ""},
		{"read it back", "read_file", map[string]any{"path": "/tmp/hello.txt"}, false, "", "héllo\nworld\n"},
		{"write empty", "write_file", map[string]any{"path": "/tmp/empty", "content": ""}, false, "wrote 0 bytes", ""},
		{"read empty", "read_file", map[string]any{"path": "/tmp/empty"}, false, "", ""},
		{"write base64", "write_file", map[string]any{"path": "/tmp/bin", "content": base64.StdEncoding.EncodeToString(binary), "base64": true}, false, "wrote 6 bytes", ""},
		{"binary reads as base64", "read_file", map[string]any{"path": "/tmp/bin"}, false,
			"not valid UTF-8 text: 6 bytes, base64-encoded below]\n" + base64.StdEncoding.EncodeToString(binary), ""},
		{"list", "list_files", map[string]any{"path": "/tmp"}, false, "-          6  bin\n", ""},
		{"list shows directories", "list_files", map[string]any{"path": "/"}, false, "tmp/\n", ""},
		{"read missing file", "read_file", map[string]any{"path": "/tmp/nope"}, true, "not_found", ""},
		{"list missing directory", "list_files", map[string]any{"path": "/nope"}, true, "not_found", ""},
		{"write into missing directory", "write_file", map[string]any{"path": "/nope/x", "content": "x"}, true, "failed in sandbox", ""},
		{"bad base64", "write_file", map[string]any{"path": "/tmp/x", "content": "!!!", "base64": true}, true, "not valid base64", ""},
		{"write without content", "write_file", map[string]any{"path": "/tmp/x"}, true, "content is required", ""},
		{"read without path", "read_file", map[string]any{}, true, "path is required", ""},
	}
	h := start(t, apitest.Start(t), "")
	h.c.initialize(mcp.ProtocolVersion)
	h.c.mustTool("sandbox_create", map[string]any{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.c.t = t
			defer func() { h.c.t = nil }()
			text, isErr := h.c.callTool(tt.tool, tt.args)
			if isErr != tt.isError {
				t.Errorf("isError %v, want %v: %s", isErr, tt.isError, text)
			}
			if tt.want != "" && !strings.Contains(text, tt.want) {
				t.Errorf("text does not contain %q:\n%s", tt.want, text)
			}
			if tt.want == "" && text != tt.exact {
				t.Errorf("text %q, want %q", text, tt.exact)
			}
		})
	}
}

func TestSessionLifecycle(t *testing.T) {
	env := apitest.Start(t)
	h := start(t, env, "")
	h.c.initialize(mcp.ProtocolVersion)

	// The first tool starts a sandbox from "base" by itself.
	text := h.c.mustTool("exec", map[string]any{"command": "echo one"})
	first := match(t, startedRE, text)
	if state(t, env, first) != pandastack.StateRunning {
		t.Fatalf("lazy sandbox %s is %s", first, state(t, env, first))
	}
	// (the API hands the engine the exact build "base" resolves to)
	if got := env.Engine.Created(); len(got) != 1 || !strings.HasPrefix(got[0].Template, "base@") || got[0].TTL != 1800*time.Second {
		t.Fatalf("created %+v, want one from base with TTL 1800s", got)
	}
	// Later tools reuse it.
	if text := h.c.mustTool("exec", map[string]any{"command": "echo two"}); strings.Contains(text, "[started") {
		t.Errorf("second exec started a sandbox: %s", text)
	}

	// sandbox_create replaces it.
	text = h.c.mustTool("sandbox_create", map[string]any{"ttl_seconds": 60, "env": map[string]string{"A": "b"}})
	second := match(t, idRE, text)
	for _, w := range []string{"template base", "accel tcg", "NOT a security boundary", "killed the previous sandbox " + first} {
		if !strings.Contains(text, w) {
			t.Errorf("sandbox_create text does not contain %q: %s", w, text)
		}
	}
	if state(t, env, first) != pandastack.StateKilled {
		t.Errorf("previous sandbox is %s, want killed", state(t, env, first))
	}
	if text := h.c.mustTool("exec", map[string]any{"command": "getenv A"}); !strings.Contains(text, "b\n") {
		t.Errorf("sandbox env not set: %s", text)
	}

	tests := []struct {
		name    string
		args    map[string]any
		isError bool
		want    string
	}{
		{"unknown template", map[string]any{"template": "nope"}, true, "could not create a sandbox from template \"nope\""},
		{"bad ttl", map[string]any{"ttl_seconds": 0}, true, "ttl_seconds must be positive"},
		{"ttl must be an integer", map[string]any{"ttl_seconds": 1.5}, true, "ttl_seconds must be of type integer"},
		{"env values must be strings", map[string]any{"env": map[string]any{"A": 1}}, true, "must be of type string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.c.t = t
			defer func() { h.c.t = nil }()
			text, isErr := h.c.callTool("sandbox_create", tt.args)
			if isErr != tt.isError || !strings.Contains(text, tt.want) {
				t.Errorf("isError %v, text %q; want %v, %q", isErr, text, tt.isError, tt.want)
			}
		})
	}
	h.c.t = t
	// A failed create after killing the previous one leaves no sandbox:
	// "unknown template" killed the second.
	if state(t, env, second) != pandastack.StateKilled {
		t.Errorf("sandbox %s is %s after a failed create", second, state(t, env, second))
	}

	text = h.c.mustTool("sandbox_create", map[string]any{"template": "base"})
	third := match(t, idRE, text)
	text = h.c.mustTool("kill", map[string]any{})
	if !strings.Contains(text, "killed sandbox "+third) || state(t, env, third) != pandastack.StateKilled {
		t.Errorf("kill: %s; state %s", text, state(t, env, third))
	}
	if text := h.c.mustTool("kill", nil); !strings.Contains(text, "no sandbox to kill") {
		t.Errorf("second kill: %s", text)
	}
	// After kill the next tool starts a fresh sandbox.
	text = h.c.mustTool("list_files", map[string]any{"path": "/"})
	fourth := match(t, startedRE, text)

	// A sandbox that ends behind the session's back is reported, then
	// replaced.
	if err := env.Engine.Expire(context.Background(), fourth); err != nil {
		t.Fatal(err)
	}
	text, isErr := h.c.callTool("exec", map[string]any{"command": "echo x"})
	if !isErr || !strings.Contains(text, "has ended") {
		t.Errorf("exec in expired sandbox: isError %v, %s", isErr, text)
	}
	text = h.c.mustTool("exec", map[string]any{"command": "echo x"})
	fifth := match(t, startedRE, text)

	h.in.Close()
	h.wait(t)
	if state(t, env, fifth) != pandastack.StateKilled {
		t.Errorf("at EOF the sandbox is %s, want killed", state(t, env, fifth))
	}
	if n := liveSandboxes(t, env); n != 0 {
		t.Errorf("%d live sandboxes after EOF", n)
	}
}

func TestShutdown(t *testing.T) {
	tests := []struct {
		name string
		stop func(h *harness)
	}{
		{"EOF kills the sandbox", func(h *harness) { h.in.Close() }},
		{"cancel kills the sandbox", func(h *harness) { h.cancel() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := apitest.Start(t)
			h := start(t, env, "")
			h.c.initialize(mcp.ProtocolVersion)
			id := match(t, startedRE, h.c.mustTool("exec", map[string]any{"command": "echo hi"}))
			tt.stop(h)
			h.wait(t)
			if s := state(t, env, id); s != pandastack.StateKilled {
				t.Errorf("sandbox is %s, want killed", s)
			}
		})
	}
	t.Run("EOF without a sandbox", func(t *testing.T) {
		env := apitest.Start(t)
		h := start(t, env, "")
		h.c.initialize(mcp.ProtocolVersion)
		h.in.Close()
		h.wait(t)
		if len(env.Engine.Created()) != 0 {
			t.Error("a sandbox was created")
		}
	})
}

// TestPipelined sends several calls and closes the input without waiting:
// they are answered in order, then the sandbox is killed.
func TestPipelined(t *testing.T) {
	env := apitest.Start(t)
	h := start(t, env, "")
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"write_file", map[string]any{"path": "/tmp/p", "content": "pipelined"}},
		{"read_file", map[string]any{"path": "/tmp/p"}},
		{"exec", map[string]any{"command": "echo done"}},
	}
	for i, c := range calls {
		h.c.send(map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": map[string]any{"name": c.tool, "arguments": c.args}})
	}
	h.in.Close()
	var id string
	for i := range calls {
		r := h.c.recv()
		if string(r.ID) != fmt.Sprint(i+1) {
			t.Fatalf("answer %d has id %s", i+1, r.ID)
		}
		var tr toolResult
		json.Unmarshal(r.Result, &tr)
		if tr.IsError == nil || *tr.IsError {
			t.Fatalf("%s: %s", calls[i].tool, r.Result)
		}
		if i == 0 {
			id = match(t, startedRE, tr.text())
		}
		if i == 1 && tr.text() != "pipelined" {
			t.Errorf("read_file: %q", tr.text())
		}
	}
	h.wait(t)
	if s := state(t, env, id); s != pandastack.StateKilled {
		t.Errorf("sandbox is %s, want killed", s)
	}
}

// TestCancelled cancels a running exec with notifications/cancelled.
func TestCancelled(t *testing.T) {
	env := apitest.Start(t)
	h := start(t, env, "")
	h.c.initialize(mcp.ProtocolVersion)
	h.c.mustTool("sandbox_create", nil)
	h.c.send(map[string]any{"jsonrpc": "2.0", "id": "long", "method": "tools/call",
		"params": map[string]any{"name": "exec", "arguments": map[string]any{"command": "sleep 30"}}})
	// ping is answered while the exec runs.
	h.c.result("ping", nil, nil)
	h.c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": "long"}})
	r := h.c.recv()
	if string(r.ID) != `"long"` {
		t.Fatalf("answer for %s", r.ID)
	}
	var tr toolResult
	json.Unmarshal(r.Result, &tr)
	if tr.IsError == nil || !*tr.IsError || !strings.Contains(tr.text(), "canceled") {
		t.Errorf("canceled exec: %s", r.Result)
	}
	h.c.mustTool("exec", map[string]any{"command": "echo after"})
}

// forkRoute serves POST /v1/sandboxes/{id}/fork as a future server might
// (a new sandbox of the same team, returned like POST /v1/sandboxes) and
// passes everything else to env's API.
func forkRoute(t *testing.T, env *apitest.Env) string {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/{id}/fork", func(w http.ResponseWriter, r *http.Request) {
		parent, err := env.Store.GetSandbox(r.Context(), r.PathValue("id"))
		if err != nil {
			http.Error(w, err.Error(), 404)
			return
		}
		child, err := env.Engine.Create(r.Context(), pandastack.CreateRequest{TeamID: parent.TeamID, Template: parent.Template, TTL: time.Minute})
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(map[string]any{"id": child.ID, "template": child.Template, "state": "running"})
	})
	mux.Handle("/", env.Server.Config.Handler)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestFork(t *testing.T) {
	t.Run("server without the route", func(t *testing.T) {
		env := apitest.Start(t)
		// An older server: no fork route.
		older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/fork") {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(404)
				fmt.Fprintf(w, `{"error":{"code":"not_found","message":"no route for POST %s"}}`, r.URL.Path)
				return
			}
			env.Server.Config.Handler.ServeHTTP(w, r)
		}))
		t.Cleanup(older.Close)
		h := start(t, env, older.URL)
		h.c.initialize(mcp.ProtocolVersion)
		parent := match(t, idRE, h.c.mustTool("sandbox_create", nil))
		text, isErr := h.c.callTool("fork", map[string]any{})
		if !isErr {
			t.Fatalf("fork succeeded: %s", text)
		}
		for _, w := range []string{"not_found", "no route for POST /v1/sandboxes/" + parent + "/fork", "does not support forking", "HTTP 404"} {
			if !strings.Contains(text, w) {
				t.Errorf("fork text does not contain %q: %s", w, text)
			}
		}
		if len(env.Engine.Created()) != 1 {
			t.Errorf("fork created a sandbox")
		}
		// The session goes on in the parent.
		h.c.mustTool("write_file", map[string]any{"path": "/tmp/x", "content": "x"})
		if state(t, env, parent) != pandastack.StateRunning {
			t.Errorf("parent is %s", state(t, env, parent))
		}
	})

	tests := []struct {
		name    string
		select_ bool
	}{
		{"fork keeps the parent", false},
		{"fork and select the child", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := apitest.Start(t)
			h := start(t, env, forkRoute(t, env))
			h.c.initialize(mcp.ProtocolVersion)
			parent := match(t, idRE, h.c.mustTool("sandbox_create", nil))
			h.c.mustTool("write_file", map[string]any{"path": "/tmp/where", "content": "parent"})
			text := h.c.mustTool("fork", map[string]any{"select": tt.select_})
			child := match(t, idRE, text)
			if child == parent {
				t.Fatal("child is the parent")
			}
			// The fake fork copies nothing: the parent's file tells where
			// the session is.
			_, isErr := h.c.callTool("read_file", map[string]any{"path": "/tmp/where"})
			if inChild := isErr; inChild != tt.select_ {
				t.Errorf("after fork(select=%v) the session uses the child: %v (%s)", tt.select_, inChild, text)
			}
			h.in.Close()
			h.wait(t)
			for _, id := range []string{parent, child} {
				if s := state(t, env, id); s != pandastack.StateKilled {
					t.Errorf("sandbox %s is %s after EOF, want killed", id, s)
				}
			}
		})
	}
}

// TestCLI runs `pandastack mcp` through cli.Main.
func TestCLI(t *testing.T) {
	env := apitest.Start(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr apitest.SyncBuffer
	code := make(chan int, 1)
	go func() {
		code <- cli.Main(context.Background(), []string{"--base-url", env.URL, "--api-key", env.Key, "mcp"}, inR, outW, &stderr)
		outW.Close()
	}()
	c := newRPCClient(t, inW, outR, 10*time.Second)
	c.initialize("2024-11-05")
	checkToolList(t, c)
	id := match(t, startedRE, c.mustTool("exec", map[string]any{"command": "echo via cli"}))
	inW.Close()
	select {
	case got := <-code:
		if got != 0 {
			t.Errorf("exit %d; stderr:\n%s", got, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pandastack mcp did not exit")
	}
	if s := state(t, env, id); s != pandastack.StateKilled {
		t.Errorf("sandbox is %s, want killed", s)
	}
	if !strings.Contains(stderr.String(), "tool call") {
		t.Errorf("no logs on stderr: %s", stderr.String())
	}

	t.Run("help", func(t *testing.T) {
		var out, errb strings.Builder
		if got := cli.Main(context.Background(), []string{"mcp", "-h"}, strings.NewReader(""), &out, &errb); got != 0 || !strings.Contains(out.String(), "usage: pandastack mcp") {
			t.Errorf("mcp -h: exit %d, %q", got, out.String())
		}
		if got := cli.Main(context.Background(), []string{"mcp", "extra"}, strings.NewReader(""), &out, &errb); got != 2 {
			t.Errorf("mcp extra: exit %d, want 2", got)
		}
	})
}
