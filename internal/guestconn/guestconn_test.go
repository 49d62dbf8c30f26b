package guestconn_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guest/guesttest"
	"github.com/pandastack/pandastack/internal/guestconn"
)

// startAgent runs the real guest agent binary as a child process serving a
// unix socket that stands in for the virtio-serial port.
func startAgent(t *testing.T) (*guestconn.Conn, *exec.Cmd) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := guesttest.Start(ctx, guesttest.Binary(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	return guestconn.NewConn(a.Conn), a.Cmd
}

func session(t *testing.T) *guestconn.Client {
	c, _ := startAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, ack, err := c.Handshake(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Sessions != 1 {
		t.Fatalf("first session numbered %d", ack.Sessions)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

type collected struct {
	stdout, stderr bytes.Buffer
	pid            int
}

func (c *collected) fn(ev pandastack.ExecEvent) error {
	switch ev.Type {
	case "stdout":
		c.stdout.Write(ev.Data)
	case "stderr":
		c.stderr.Write(ev.Data)
	case "start":
		c.pid = ev.PID
	}
	return nil
}

func TestExec(t *testing.T) {
	cl := session(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		req      pandastack.ExecRequest
		stdout   string
		stderr   string
		exit     int
		timedOut bool
	}{
		{"echo", pandastack.ExecRequest{Cmd: "echo hello"}, "hello\n", "", 0, false},
		{"exit code", pandastack.ExecRequest{Cmd: "exit 7"}, "", "", 7, false},
		{"stderr", pandastack.ExecRequest{Cmd: "echo oops >&2"}, "", "oops\n", 0, false},
		{"args without shell", pandastack.ExecRequest{Args: []string{"printf", "%s|", "a b", "c"}}, "a b|c|", "", 0, false},
		{"env", pandastack.ExecRequest{Cmd: "echo $FOO", Env: map[string]string{"FOO": "bar"}}, "bar\n", "", 0, false},
		{"cwd", pandastack.ExecRequest{Cmd: "pwd", Cwd: "/"}, "/\n", "", 0, false},
		{"binary output preserved", pandastack.ExecRequest{Cmd: `printf '\377\000\376'`}, "\xff\x00\xfe", "", 0, false},
		{"stdin", pandastack.ExecRequest{Cmd: "tr a-z A-Z", Stdin: []byte("shout")}, "SHOUT", "", 0, false},
		{"timeout kills the tree", pandastack.ExecRequest{Cmd: "sleep 30 & sleep 30; echo never", TimeoutSeconds: 0.3}, "", "", 137, true},
		{"killed by signal", pandastack.ExecRequest{Cmd: "kill -TERM $$"}, "", "", 143, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c collected
			t0 := time.Now()
			res, err := cl.Exec(ctx, tc.req, nil, c.fn)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.stdout.String(); got != tc.stdout {
				t.Errorf("stdout %q, want %q", got, tc.stdout)
			}
			if got := c.stderr.String(); got != tc.stderr {
				t.Errorf("stderr %q, want %q", got, tc.stderr)
			}
			if res.ExitCode != tc.exit || res.TimedOut != tc.timedOut {
				t.Errorf("result %+v, want exit %d timed out %v", res, tc.exit, tc.timedOut)
			}
			if tc.timedOut && time.Since(t0) > 10*time.Second {
				t.Errorf("timeout did not stop the command in time: %v", time.Since(t0))
			}
			if c.pid == 0 {
				t.Errorf("no start event")
			}
		})
	}
}

func TestExecErrors(t *testing.T) {
	cl := session(t)
	ctx := context.Background()
	var c collected
	_, err := cl.Exec(ctx, pandastack.ExecRequest{Args: []string{"no-such-program"}}, nil, c.fn)
	if pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Errorf("missing program: %v", err)
	}
	_, err = cl.Exec(ctx, pandastack.ExecRequest{Cmd: "true", Cwd: "/no/such/dir"}, nil, c.fn)
	if pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Errorf("missing cwd: %v", err)
	}
	_, err = cl.Exec(ctx, pandastack.ExecRequest{Cmd: "true", User: "nobody-here"}, nil, c.fn)
	if pandastack.ErrorCode(err) != pandastack.EInvalid {
		t.Errorf("unknown user: %v", err)
	}
}

func TestExecLargeOutput(t *testing.T) {
	cl := session(t)
	var n int64
	h := sha256.New()
	res, err := cl.Exec(context.Background(), pandastack.ExecRequest{Cmd: "head -c 52428800 /dev/zero | tr '\\0' x"}, nil, func(ev pandastack.ExecEvent) error {
		if ev.Type == "stdout" {
			n += int64(len(ev.Data))
			h.Write(ev.Data)
		}
		return nil
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	want := sha256.Sum256(bytes.Repeat([]byte("x"), 50<<20))
	if n != 50<<20 || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("got %d bytes, checksum mismatch=%v", n, !bytes.Equal(h.Sum(nil), want[:]))
	}
}

func TestCancelKillsForeground(t *testing.T) {
	cl := session(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "alive")
	ctx, cancel := context.WithCancel(context.Background())
	var c collected
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	_, err := cl.Exec(ctx, pandastack.ExecRequest{Cmd: "while true; do touch " + marker + "; sleep 0.1; done"}, nil, c.fn)
	if err == nil {
		t.Fatal("cancelled exec returned no error")
	}
	time.Sleep(400 * time.Millisecond)
	os.Remove(marker)
	time.Sleep(400 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("command still running after its exec was cancelled")
	}
}

func TestBackgroundAttachSignal(t *testing.T) {
	cl := session(t)
	ctx := context.Background()
	var c collected
	_, err := cl.Exec(ctx, pandastack.ExecRequest{Cmd: "echo started; trap 'echo bye; exit 3' TERM; while true; do sleep 0.05; done", Background: true}, nil, c.fn)
	if err != nil || c.pid == 0 {
		t.Fatalf("background exec: %v pid %d", err, c.pid)
	}
	ps, err := cl.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range ps {
		if p.PID == c.pid && p.Running && p.Background {
			found = true
		}
	}
	if !found {
		t.Fatalf("background process %d not listed as running: %+v", c.pid, ps)
	}
	time.Sleep(200 * time.Millisecond)
	go func() { time.Sleep(300 * time.Millisecond); cl.Signal(ctx, c.pid, "TERM") }()
	var a collected
	res, err := cl.Attach(ctx, c.pid, a.fn)
	if err != nil {
		t.Fatal(err)
	}
	if a.stdout.String() != "started\nbye\n" || res.ExitCode != 3 {
		t.Fatalf("attach got %q exit %d", a.stdout.String(), res.ExitCode)
	}
	if err := cl.Signal(ctx, 999999, "TERM"); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Errorf("signal to unknown pid: %v", err)
	}
	if err := cl.Signal(ctx, c.pid, "NOPE"); pandastack.ErrorCode(err) != pandastack.EInvalid {
		t.Errorf("unknown signal: %v", err)
	}
}

// A background exec that follows streams its output and exit on the same
// call (one round trip); a caller that goes away leaves the process
// running, where a foreground command would be killed.
func TestBackgroundFollow(t *testing.T) {
	cl := session(t)
	ctx := context.Background()
	var c collected
	res, err := cl.Exec(ctx, pandastack.ExecRequest{Cmd: "echo one; sleep 0.2; echo two >&2; exit 4", Background: true, Follow: true}, nil, c.fn)
	if err != nil || c.pid == 0 || c.stdout.String() != "one\n" || c.stderr.String() != "two\n" || res.ExitCode != 4 {
		t.Fatalf("follow: %v pid %d out %q err %q exit %d", err, c.pid, c.stdout.String(), c.stderr.String(), res.ExitCode)
	}
	gone, cancel := context.WithCancel(ctx)
	var d collected
	done := make(chan error, 1)
	go func() {
		_, err := cl.Exec(gone, pandastack.ExecRequest{Cmd: "echo up; sleep 1; echo still", Background: true, Follow: true}, nil,
			func(ev pandastack.ExecEvent) error {
				if ev.Type == "stdout" {
					cancel() // the caller goes away once the process has started
				}
				return d.fn(ev)
			})
		done <- err
	}()
	<-done
	var a collected
	res, err = cl.Attach(ctx, d.pid, a.fn)
	if err != nil || res.ExitCode != 0 || a.stdout.String() != "up\nstill\n" {
		t.Fatalf("after its follower left, the process: %v exit %d output %q", err, res.ExitCode, a.stdout.String())
	}
}

func TestFiles(t *testing.T) {
	cl := session(t)
	ctx := context.Background()
	dir := t.TempDir()
	data := make([]byte, 10<<20+7)
	rand.Read(data)
	p := filepath.Join(dir, "sub", "deep", "f.bin")
	fi, err := cl.WriteFile(ctx, p, 0o600, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size != int64(len(data)) || fi.Mode != 0o600 {
		t.Fatalf("write info %+v", fi)
	}
	var got bytes.Buffer
	var started pandastack.FileInfo
	if err := cl.ReadFile(ctx, p, &got, func(fi pandastack.FileInfo) error { started = fi; return nil }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) || started.Size != int64(len(data)) {
		t.Fatalf("round trip differs: %d bytes back", got.Len())
	}
	if err := cl.MakeDir(ctx, filepath.Join(dir, "a", "b")); err != nil {
		t.Fatal(err)
	}
	if err := cl.Rename(ctx, p, filepath.Join(dir, "a", "b", "g.bin")); err != nil {
		t.Fatal(err)
	}
	ents, err := cl.ListDir(ctx, filepath.Join(dir, "a", "b"))
	if err != nil || len(ents) != 1 || ents[0].Name != "g.bin" || ents[0].Size != int64(len(data)) {
		t.Fatalf("list: %v %+v", err, ents)
	}
	if err := cl.Remove(ctx, filepath.Join(dir, "a"), false); pandastack.ErrorCode(err) != pandastack.EConflict {
		t.Errorf("non-recursive remove of a full dir: %v", err)
	}
	if err := cl.Remove(ctx, filepath.Join(dir, "a"), true); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"read missing":   cl.ReadFile(ctx, filepath.Join(dir, "nope"), &got, nil),
		"stat missing":   func() error { _, err := cl.Stat(ctx, filepath.Join(dir, "nope")); return err }(),
		"list missing":   func() error { _, err := cl.ListDir(ctx, filepath.Join(dir, "nope")); return err }(),
		"remove missing": cl.Remove(ctx, filepath.Join(dir, "nope"), true),
	} {
		if pandastack.ErrorCode(err) != pandastack.ENotFound {
			t.Errorf("%s: got %v, want not_found", name, err)
		}
	}
	if err := cl.ReadFile(ctx, dir, &got, nil); pandastack.ErrorCode(err) != pandastack.EInvalid {
		t.Errorf("read of a directory: %v", err)
	}
	if _, err := cl.WriteFile(ctx, "relative/path", 0, strings.NewReader("x")); pandastack.ErrorCode(err) != pandastack.EInvalid {
		t.Errorf("relative path: %v", err)
	}
	// A broken-off upload leaves neither the file nor a temporary.
	target := filepath.Join(dir, "partial.txt")
	ctx2, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("some bytes"))
		time.Sleep(200 * time.Millisecond)
		cancel()
		time.Sleep(100 * time.Millisecond)
		pw.Close()
	}()
	if _, err := cl.WriteFile(ctx2, target, 0, pr); err == nil {
		t.Fatal("cancelled upload succeeded")
	}
	time.Sleep(300 * time.Millisecond)
	left, _ := os.ReadDir(dir)
	for _, e := range left {
		if strings.Contains(e.Name(), "partial") || strings.HasPrefix(e.Name(), ".pandastack-upload") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
