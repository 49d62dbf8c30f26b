package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
)

type execAnswer struct {
	PID            int     `json:"pid"`
	Stdout         string  `json:"stdout"`
	Stderr         string  `json:"stderr"`
	StdoutEncoding string  `json:"stdout_encoding"`
	StderrEncoding string  `json:"stderr_encoding"`
	ExitCode       int     `json:"exit_code"`
	Signal         string  `json:"signal"`
	TimedOut       bool    `json:"timed_out"`
	DurationMs     float64 `json:"duration_ms"`
}

func TestExecBuffered(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, map[string]any{"env": map[string]string{"FROM_CREATE": "yes"}})
	tests := []struct {
		name string
		body map[string]any
		want execAnswer // PID and DurationMs are not compared
	}{
		{"stdout", map[string]any{"cmd": "echo hello world"},
			execAnswer{Stdout: "hello world\n", StdoutEncoding: "utf-8", StderrEncoding: "utf-8"}},
		{"stderr and exit code", map[string]any{"cmd": "echo out; err bad thing; exit 3"},
			execAnswer{Stdout: "out\n", Stderr: "bad thing\n", StdoutEncoding: "utf-8", StderrEncoding: "utf-8", ExitCode: 3}},
		{"binary stdout is base64", map[string]any{"cmd": "hex ff00fe"},
			execAnswer{Stdout: base64.StdEncoding.EncodeToString([]byte{0xff, 0, 0xfe}), StdoutEncoding: "base64", StderrEncoding: "utf-8"}},
		{"args without a shell", map[string]any{"args": []string{"echo", "a;b"}},
			execAnswer{Stdout: "a;b\n", StdoutEncoding: "utf-8", StderrEncoding: "utf-8"}},
		{"stdin text", map[string]any{"cmd": "cat", "stdin": "piped in"},
			execAnswer{Stdout: "piped in", StdoutEncoding: "utf-8", StderrEncoding: "utf-8"}},
		{"stdin base64", map[string]any{"cmd": "cat", "stdin_base64": base64.StdEncoding.EncodeToString([]byte{1, 2, 0xff})},
			execAnswer{Stdout: base64.StdEncoding.EncodeToString([]byte{1, 2, 0xff}), StdoutEncoding: "base64", StderrEncoding: "utf-8"}},
		{"env cwd user", map[string]any{"cmd": "getenv X; pwd; whoami", "env": map[string]string{"X": "1"}, "cwd": "/tmp", "user": "nobody"},
			execAnswer{Stdout: "1\n/tmp\nnobody\n", StdoutEncoding: "utf-8", StderrEncoding: "utf-8"}},
		{"sandbox env", map[string]any{"cmd": "getenv FROM_CREATE"},
			execAnswer{Stdout: "yes\n", StdoutEncoding: "utf-8", StderrEncoding: "utf-8"}},
		{"unknown command", map[string]any{"cmd": "frobnicate"},
			execAnswer{Stderr: "sh: frobnicate: not found\n", StdoutEncoding: "utf-8", StderrEncoding: "utf-8", ExitCode: 127}},
		{"timeout is not an HTTP error", map[string]any{"cmd": "echo before; sleep 10", "timeout_seconds": 0.05},
			execAnswer{Stdout: "before\n", StdoutEncoding: "utf-8", StderrEncoding: "utf-8", ExitCode: 137, Signal: "SIGKILL", TimedOut: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/exec", key: env.Key, body: tt.body})
			wantStatus(t, r, http.StatusOK)
			got := decode[execAnswer](t, r)
			if got.PID <= 0 {
				t.Fatalf("pid %d", got.PID)
			}
			got.PID, got.DurationMs = 0, 0
			if got != tt.want {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestExecValidation(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	tests := []struct {
		name    string
		body    any
		message string
	}{
		{"neither cmd nor args", map[string]any{}, "cmd or args is required"},
		{"empty args", map[string]any{"args": []string{}}, "cmd or args is required"},
		{"both cmd and args", map[string]any{"cmd": "ls", "args": []string{"ls"}}, "not both"},
		{"both stdins", map[string]any{"cmd": "cat", "stdin": "a", "stdin_base64": "YQ=="}, "stdin or stdin_base64"},
		{"bad base64", map[string]any{"cmd": "cat", "stdin_base64": "!!"}, "not valid base64"},
		{"negative timeout", map[string]any{"cmd": "ls", "timeout_seconds": -1}, "timeout_seconds must be between 0"},
		{"timeout over a day", map[string]any{"cmd": "ls", "timeout_seconds": 86401}, "timeout_seconds must be between 0"},
		{"relative cwd", map[string]any{"cmd": "ls", "cwd": "tmp"}, "cwd must be an absolute path"},
		{"unknown field", map[string]any{"command": "ls"}, `unknown field "command"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/exec", key: env.Key, body: tt.body})
			wantError(t, r, http.StatusBadRequest, "invalid_argument", tt.message)
		})
	}
}

func TestExecOutputLimit(t *testing.T) {
	env := apitest.Start(t, func(c *api.Config) { c.MaxBufferedOutput = 100 << 10 })
	sb := newSandbox(t, env, env.Key, nil)
	path := "/v1/sandboxes/" + sb.ID + "/exec"

	t.Run("at the limit is fine", func(t *testing.T) {
		r := call(t, env, req{method: "POST", path: path, key: env.Key, body: map[string]any{"cmd": "yes 102400"}})
		wantStatus(t, r, http.StatusOK)
		if got := decode[execAnswer](t, r); len(got.Stdout) != 100<<10 {
			t.Fatalf("stdout has %d bytes", len(got.Stdout))
		}
	})
	t.Run("over the limit stops the command", func(t *testing.T) {
		var stopped bool
		env.Engine.GuestOf(sb.ID).ExecHook = func(ctx context.Context, req pandastack.ExecRequest, _ io.Reader, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
			fn(pandastack.ExecEvent{Type: "start", PID: 7})
			chunk := bytes.Repeat([]byte("y"), 64<<10)
			for i := 0; i < 1000; i++ {
				if err := fn(pandastack.ExecEvent{Type: "stdout", Data: chunk}); err != nil {
					<-ctx.Done() // the server cancels the command's context
					stopped = true
					return pandastack.ExecResult{ExitCode: 137, Signal: "SIGKILL"}, err
				}
			}
			return pandastack.ExecResult{}, nil
		}
		defer func() { env.Engine.GuestOf(sb.ID).ExecHook = nil }()
		r := call(t, env, req{method: "POST", path: path, key: env.Key, body: map[string]any{"cmd": "yes"}})
		wantError(t, r, http.StatusUnprocessableEntity, "output_too_large", "stdout exceeded 100 KiB")
		wantError(t, r, http.StatusUnprocessableEntity, "output_too_large", "Accept: application/x-ndjson")
		if !stopped {
			t.Fatal("the command's context was not canceled")
		}
	})
	t.Run("streaming has no limit", func(t *testing.T) {
		r := call(t, env, req{method: "POST", path: path, key: env.Key, body: map[string]any{"cmd": "yes 1048576"},
			header: map[string]string{"Accept": "application/x-ndjson"}})
		wantStatus(t, r, http.StatusOK)
		n := 0
		for _, ev := range events(t, r) {
			n += len(ev.Data)
		}
		if n != 1<<20 {
			t.Fatalf("streamed %d bytes, want 1 MiB", n)
		}
	})
}

func TestExecStream(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	path := "/v1/sandboxes/" + sb.ID + "/exec"
	ndjson := map[string]string{"Accept": "application/x-ndjson"}

	t.Run("events in order", func(t *testing.T) {
		r := call(t, env, req{method: "POST", path: path, key: env.Key, header: ndjson,
			body: map[string]any{"cmd": "echo out; err problem; hex 00ff; exit 4"}})
		wantStatus(t, r, 200)
		evs := events(t, r)
		var types []string
		for _, ev := range evs {
			types = append(types, ev.Type)
		}
		if strings.Join(types, ",") != "start,stdout,stderr,stdout,exit" {
			t.Fatalf("event types %v", types)
		}
		if evs[0].PID <= 0 || string(evs[1].Data) != "out\n" || string(evs[2].Data) != "problem\n" ||
			!bytes.Equal(evs[3].Data, []byte{0, 0xff}) || evs[4].Result.ExitCode != 4 {
			t.Fatalf("events %+v", evs)
		}
	})
	t.Run("timeout ends with an exit event", func(t *testing.T) {
		r := call(t, env, req{method: "POST", path: path, key: env.Key, header: ndjson,
			body: map[string]any{"cmd": "sleep 10", "timeout_seconds": 0.05}})
		evs := events(t, r)
		last := evs[len(evs)-1]
		if last.Type != "exit" || !last.Result.TimedOut || last.Result.ExitCode != 137 {
			t.Fatalf("last event %+v", last)
		}
	})
	t.Run("error before the first event is a plain JSON error", func(t *testing.T) {
		env.Engine.GuestOf(sb.ID).ExecHook = func(context.Context, pandastack.ExecRequest, io.Reader, func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
			return pandastack.ExecResult{}, pandastack.Errorf(pandastack.ENotFound, "no such user: bob")
		}
		defer func() { env.Engine.GuestOf(sb.ID).ExecHook = nil }()
		r := call(t, env, req{method: "POST", path: path, key: env.Key, header: ndjson, body: map[string]any{"cmd": "ls"}})
		wantError(t, r, 404, "not_found", "no such user: bob")
	})
	t.Run("error after start is the last line", func(t *testing.T) {
		env.Engine.GuestOf(sb.ID).ExecHook = func(_ context.Context, _ pandastack.ExecRequest, _ io.Reader, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
			fn(pandastack.ExecEvent{Type: "start", PID: 9})
			fn(pandastack.ExecEvent{Type: "stdout", Data: []byte("partial")})
			return pandastack.ExecResult{}, io.ErrUnexpectedEOF // a guest connection failure
		}
		defer func() { env.Engine.GuestOf(sb.ID).ExecHook = nil }()
		r := call(t, env, req{method: "POST", path: path, key: env.Key, header: ndjson, body: map[string]any{"cmd": "ls"}})
		wantStatus(t, r, 200)
		evs := events(t, r)
		last := evs[len(evs)-1]
		if len(evs) != 3 || last.Type != "error" || last.Error.Code != "internal" || last.Error.Message != "internal error" {
			t.Fatalf("events %+v", evs)
		}
		if !strings.Contains(env.Logs.String(), "unexpected EOF") {
			t.Fatalf("internal error detail not logged")
		}
	})
	t.Run("exit events from the engine are not duplicated", func(t *testing.T) {
		env.Engine.GuestOf(sb.ID).ExecHook = func(_ context.Context, _ pandastack.ExecRequest, _ io.Reader, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
			res := pandastack.ExecResult{ExitCode: 2}
			fn(pandastack.ExecEvent{Type: "start", PID: 9})
			fn(pandastack.ExecEvent{Type: "exit", Result: &res})
			return res, nil
		}
		defer func() { env.Engine.GuestOf(sb.ID).ExecHook = nil }()
		r := call(t, env, req{method: "POST", path: path, key: env.Key, header: ndjson, body: map[string]any{"cmd": "ls"}})
		evs := events(t, r)
		if len(evs) != 2 || evs[1].Type != "exit" || evs[1].Result.ExitCode != 2 {
			t.Fatalf("events %+v", evs)
		}
	})
}

// TestExecStreamIsLive: each event reaches the client while the command is
// still running, and a client that goes away cancels the command.
func TestExecStreamIsLive(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	seen := make(chan struct{})
	canceled := make(chan struct{})
	env.Engine.GuestOf(sb.ID).ExecHook = func(ctx context.Context, _ pandastack.ExecRequest, _ io.Reader, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
		fn(pandastack.ExecEvent{Type: "start", PID: 5})
		fn(pandastack.ExecEvent{Type: "stdout", Data: []byte("first")})
		select {
		case <-seen: // the client read "first" while we are still running
		case <-time.After(5 * time.Second):
			t.Error("the client did not receive the first event while the command ran")
		}
		<-ctx.Done()
		close(canceled)
		return pandastack.ExecResult{ExitCode: 137, Signal: "SIGKILL"}, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := send(t, ctx, env, req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/exec", key: env.Key,
		body: map[string]any{"cmd": "x"}, header: map[string]string{"Accept": "application/x-ndjson"}})
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := 0; i < 2; i++ {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var ev event
		json.Unmarshal(line, &ev)
		if i == 1 && string(ev.Data) == "first" {
			close(seen)
		}
	}
	cancel() // the client goes away
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the command's context was not canceled when the client left")
	}
}

func TestBackgroundProcesses(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	base := "/v1/sandboxes/" + sb.ID

	r := call(t, env, req{method: "POST", path: base + "/exec", key: env.Key, body: map[string]any{"cmd": "echo started; sleep 30", "background": true}})
	wantStatus(t, r, http.StatusAccepted)
	pid := decode[struct{ PID int }](t, r).PID
	if pid <= 0 {
		t.Fatalf("pid %d", pid)
	}
	pidPath := base + "/processes/" + strconv.Itoa(pid)

	ps := decode[struct {
		Processes []struct {
			PID        int  `json:"pid"`
			Running    bool `json:"running"`
			Background bool `json:"background"`
		}
	}](t, call(t, env, req{method: "GET", path: base + "/processes", key: env.Key}))
	if len(ps.Processes) != 1 || ps.Processes[0].PID != pid || !ps.Processes[0].Running || !ps.Processes[0].Background {
		t.Fatalf("processes %+v", ps)
	}

	signalTests := []struct {
		name    string
		pid     string
		signal  string
		status  int
		message string
	}{
		{"bad signal", strconv.Itoa(pid), "SIGBOGUS", 400, "unknown signal"},
		{"bad pid", "abc", "TERM", 400, "pid must be a positive integer"},
		{"no such process", "99999", "TERM", 404, "no process with pid 99999"},
	}
	for _, tt := range signalTests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, req{method: "POST", path: base + "/processes/" + tt.pid + "/signal", key: env.Key, body: map[string]any{"signal": tt.signal}})
			code := "invalid_argument"
			if tt.status == 404 {
				code = "not_found"
			}
			wantError(t, r, tt.status, code, tt.message)
		})
	}

	// Attach, then end the process with SIGTERM: the stream replays the
	// output and ends with the exit.
	done := make(chan response)
	go func() { done <- call(t, env, req{method: "GET", path: pidPath + "/stream", key: env.Key}) }()
	time.Sleep(50 * time.Millisecond)
	wantStatus(t, call(t, env, req{method: "POST", path: pidPath + "/signal", key: env.Key, body: map[string]any{"signal": "15"}}), http.StatusNoContent)
	var sr response
	select {
	case sr = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("attach did not end after SIGTERM")
	}
	evs := events(t, sr)
	last := evs[len(evs)-1]
	if evs[0].Type != "start" || evs[0].PID != pid || string(evs[1].Data) != "started\n" ||
		last.Type != "exit" || last.Result.Signal != "SIGTERM" || last.Result.ExitCode != 143 {
		t.Fatalf("attach events %+v", evs)
	}
	t.Run("attach to unknown pid", func(t *testing.T) {
		wantError(t, call(t, env, req{method: "GET", path: base + "/processes/424242/stream", key: env.Key}), 404, "not_found", "no process")
	})
}
