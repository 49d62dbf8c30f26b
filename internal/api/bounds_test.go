package api_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
	"github.com/pandastack/pandastack/internal/guestconn"
)

// These tests drive the server with hostile guests and clients and watch
// its heap: each pushes far more than the server may hold and checks the
// request fails with a clear error while the heap grows by a bounded amount,
// independent of what was pushed.

// heapWatch samples the heap while a hostile request runs. The collector
// runs often (GOGC 10) so the samples track live memory, not garbage.
type heapWatch struct {
	base, peak atomic.Uint64
	stop       chan struct{}
	done       sync.WaitGroup
	gc         int
}

func watchHeap() *heapWatch {
	w := &heapWatch{stop: make(chan struct{}), gc: debug.SetGCPercent(10)}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w.base.Store(ms.HeapAlloc)
	w.peak.Store(ms.HeapAlloc)
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > w.peak.Load() {
				w.peak.Store(ms.HeapAlloc)
			}
		}
	}()
	return w
}

// grew ends the watch and returns the peak heap growth.
func (w *heapWatch) grew() int64 {
	close(w.stop)
	w.done.Wait()
	debug.SetGCPercent(w.gc)
	return int64(w.peak.Load()) - int64(w.base.Load())
}

// realAgent runs the real guest agent binary as a child process on a unix
// socket standing in for the virtio-serial port, and returns the host's
// session with it: commands run on this machine, as the test's user.
func realAgent(t *testing.T) *guestconn.Client {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "pandastack-guest")
	build := exec.Command("go", "build", "-o", bin, "github.com/pandastack/pandastack/cmd/pandastack-guest")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build agent: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "port.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(bin, "serve", "unix:"+sock)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, _, err := guestconn.NewConn(nc).Handshake(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// agentSandbox is a sandbox of env whose foreground execs run on the real
// agent.
func agentSandbox(t *testing.T, env *apitest.Env) string {
	cl := realAgent(t)
	sb := newSandbox(t, env, env.Key, nil)
	env.Engine.GuestOf(sb.ID).ExecHook = cl.Exec
	return sb.ID
}

// countingWriter keeps a body's length and its last bytes.
type countingWriter struct {
	n    int64
	tail []byte
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	c.tail = append(c.tail, p...)
	if len(c.tail) > 512 {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-512:]...)
	}
	return len(p), nil
}

// A buffered exec's answer holds the output once: the JSON (here 6 bytes
// per output byte, every one a control character) is written as it is
// escaped, not built whole and copied. Counted in bytes allocated while
// the request runs, which does not depend on when the collector runs (the
// heap's peak does, and on a loaded machine it lags): the streamed answer
// allocates ~17-20 MiB for 4 MiB of output (the output buffer and its
// growth, frames, escaping); building the 24 MiB answer whole would add
// that answer and its growth on top, over 40 MiB.
func TestBufferedExecWritesItsOutputOnce(t *testing.T) {
	const limit = 4 << 20
	env := apitest.Start(t, func(c *api.Config) { c.MaxBufferedOutput = limit })
	id := agentSandbox(t, env)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp := send(t, context.Background(), env, req{method: "POST", path: "/v1/sandboxes/" + id + "/exec", key: env.Key,
		body: map[string]any{"cmd": "head -c 4194304 /dev/zero"}})
	var body countingWriter
	_, err := io.Copy(&body, resp.Body)
	resp.Body.Close()
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("exec: %d %v: ...%s", resp.StatusCode, err, body.tail)
	}
	if body.n < 6*limit || !bytes.Contains(body.tail, []byte(`"stdout_encoding":"utf-8","stderr_encoding":"utf-8","exit_code":0`)) {
		t.Fatalf("answer of %d bytes ending %s", body.n, body.tail)
	}
	t.Logf("a %d MiB answer for %d MiB of output; %.1f MiB allocated", body.n>>20, limit>>20, float64(allocated)/(1<<20))
	if allocated > 8*limit {
		t.Errorf("%.1f MiB allocated to answer %d MiB of output (%d MiB of JSON): more than 8x the output, as if the answer were built whole", float64(allocated)/(1<<20), limit>>20, body.n>>20)
	}
}

// The JSON written as it streams is what encoding/json would write.
func TestBufferedExecJSON(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	outs := map[string][]byte{"stdout": []byte("a\"b\\c\n\t\r\x00\x1f<>&é\u2028 end"), "stderr": {0xff, 0xfe, 'x'}}
	env.Engine.GuestOf(sb.ID).ExecHook = func(ctx context.Context, _ pandastack.ExecRequest, _ io.Reader, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
		fn(pandastack.ExecEvent{Type: "start", PID: 42})
		fn(pandastack.ExecEvent{Type: "stdout", Data: outs["stdout"]})
		fn(pandastack.ExecEvent{Type: "stderr", Data: outs["stderr"]})
		return pandastack.ExecResult{ExitCode: 3, Signal: "", DurationMs: 1.5}, nil
	}
	r := call(t, env, req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/exec", key: env.Key, body: map[string]any{"cmd": "x"}})
	wantStatus(t, r, 200)
	got := decode[map[string]any](t, r)
	want := map[string]any{"pid": 42.0, "stdout": string(outs["stdout"]), "stdout_encoding": "utf-8", "stderr": "//54",
		"stderr_encoding": "base64", "exit_code": 3.0, "signal": "", "timed_out": false, "duration_ms": 1.5}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("answer has %d fields, want %d: %s", len(got), len(want), r.Body)
	}
}

// A command printing 1 GiB to a buffered exec is stopped at the limit; the
// heap holds about the limit, not what the command printed.
func TestBufferedExecOverLimit(t *testing.T) {
	const limit = 1 << 20
	env := apitest.Start(t, func(c *api.Config) { c.MaxBufferedOutput = limit })
	id := agentSandbox(t, env)
	w := watchHeap()
	r := call(t, env, req{method: "POST", path: "/v1/sandboxes/" + id + "/exec", key: env.Key,
		body: map[string]any{"cmd": "head -c 1073741824 /dev/zero"}})
	grew := w.grew()
	wantError(t, r, http.StatusUnprocessableEntity, "output_too_large", "stream the output instead")
	if grew > 8*limit {
		t.Errorf("heap grew %.1f MiB for a command printing 1 GiB with a %d MiB limit", float64(grew)/(1<<20), limit>>20)
	}
}

// Buffered execs in flight share one budget: past it, the exec fails with
// 503 naming the way out (streaming), and the budget comes back.
func TestBufferedExecServerBudget(t *testing.T) {
	env := apitest.Start(t, func(c *api.Config) { c.MaxBufferedOutput = 4 << 20; c.MaxBufferedTotal = 1 << 20 })
	id := agentSandbox(t, env)
	path := "/v1/sandboxes/" + id + "/exec"
	r := call(t, env, req{method: "POST", path: path, key: env.Key, body: map[string]any{"cmd": "head -c 2097152 /dev/zero | tr '\\0' x"}})
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("2 MiB of output with a 1 MiB server budget: status %d (%d bytes), want 503", r.Status, len(r.Body))
	}
	wantError(t, r, http.StatusServiceUnavailable, "unavailable", "stream the output instead")
	for i := 0; i < 3; i++ { // each returns what it held
		r = call(t, env, req{method: "POST", path: path, key: env.Key, body: map[string]any{"cmd": "head -c 700000 /dev/zero | tr '\\0' x"}})
		wantStatus(t, r, 200)
	}
}

// hostileKernel plays the code kernel as a hostile guest would: it reads
// the request, then sends one line that never ends, up to max bytes. It
// returns how many bytes it got out.
func hostileKernel(env *apitest.Env, id string, max int64) *atomic.Int64 {
	var sent atomic.Int64
	env.Engine.GuestOf(id).DialHook = func(ctx context.Context, port int) (net.Conn, error) {
		server, client := net.Pipe()
		go func() {
			defer server.Close()
			buf := make([]byte, 4096)
			if _, err := server.Read(buf); err != nil {
				return
			}
			chunk := bytes.Repeat([]byte("A"), 64<<10)
			for sent.Load() < max {
				n, err := server.Write(chunk)
				sent.Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
		return client, nil
	}
	return &sent
}

// run_code's reading of the kernel's lines is bounded: a kernel that sends
// one endless line fails the run (buffered or streamed) at the line limit.
func TestRunCodeEndlessKernelLine(t *testing.T) {
	const pushed = 1 << 30
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	path := "/v1/sandboxes/" + sb.ID + "/code"
	for _, accept := range []string{"application/json", "application/x-ndjson"} {
		t.Run(accept, func(t *testing.T) {
			sent := hostileKernel(env, sb.ID, pushed)
			w := watchHeap()
			r := call(t, env, req{method: "POST", path: path, key: env.Key, body: map[string]any{"code": "1"},
				header: map[string]string{"Accept": accept}})
			grew := w.grew()
			wantError(t, r, http.StatusUnprocessableEntity, "output_too_large", "over 16 MiB")
			t.Logf("kernel sent %d MiB; heap grew %.1f MiB", sent.Load()>>20, float64(grew)/(1<<20))
			if sent.Load() >= pushed || grew > 64<<20 {
				t.Errorf("kernel sent %d MiB (of %d) and the heap grew %.1f MiB: the line was not cut at 16 MiB",
					sent.Load()>>20, pushed>>20, float64(grew)/(1<<20))
			}
		})
	}
}

// A JSON body far over the limit is refused with 413 after the first MiB:
// the server never reads, let alone holds, the rest.
func TestHugeJSONBody(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	var read atomic.Int64
	body := io.MultiReader(strings.NewReader(`{"cmd":"`), &endless{read: &read, left: 1 << 30})
	w := watchHeap()
	resp := send(t, context.Background(), env, req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/exec", key: env.Key, body: body})
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	grew := w.grew()
	r := response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	wantError(t, r, http.StatusRequestEntityTooLarge, "too_large", "request body exceeds")
	if read.Load() >= 1<<30 || grew > 8<<20 {
		t.Errorf("the client got %d MiB of its 1 GiB body out and the heap grew %.1f MiB", read.Load()>>20, float64(grew)/(1<<20))
	}
}

// endless is left bytes of 'x'.
type endless struct {
	read *atomic.Int64
	left int64
}

func (e *endless) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), e.left)
	for i := range p[:n] {
		p[i] = 'x'
	}
	e.left -= n
	e.read.Add(n)
	return int(n), nil
}
