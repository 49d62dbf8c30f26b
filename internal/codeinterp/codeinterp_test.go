package codeinterp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/codeinterp"
)

// loopback dials the real kernel on the host's loopback, as the guest
// agent does inside a sandbox.
type loopback struct{ port int }

func (l loopback) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if port != codeinterp.KernelPort {
		return nil, fmt.Errorf("dialled port %d, want the kernel's", port)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", l.port))
	if err != nil {
		return nil, pandastack.Errorf(pandastack.ERefused, "port %d: %v", port, err)
	}
	return c, nil
}

// startKernel runs the template's kernel.py with the host's python3.
func startKernel(t *testing.T) loopback {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("python3", "../templates/kernel/kernel.py", fmt.Sprint(port))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return loopback{port}
		}
		if i == 400 {
			t.Fatalf("kernel never listened: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func run(t *testing.T, k loopback, req codeinterp.Request) []codeinterp.Event {
	t.Helper()
	var evs []codeinterp.Event
	if err := codeinterp.Run(context.Background(), k, req, func(ev codeinterp.Event) error {
		evs = append(evs, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestRunAgainstTheRealKernel(t *testing.T) {
	k := startKernel(t)
	t.Run("output, the last value, then end", func(t *testing.T) {
		evs := run(t, k, codeinterp.Request{Code: "print('hi')\nx = 40\nx + 2"})
		var out, result string
		for _, ev := range evs {
			switch ev.Type {
			case "stdout":
				out += ev.Text
			case "result":
				result = ev.Result.Text
				if !ev.Result.IsMainResult {
					t.Errorf("the last expression's value is not the main result: %+v", ev.Result)
				}
			}
		}
		last := evs[len(evs)-1]
		if out != "hi\n" || result != "42" || last.Type != "end" || last.ExecutionCount != 1 {
			t.Fatalf("stdout %q, result %q, last %+v", out, result, last)
		}
	})
	t.Run("contexts keep their names apart", func(t *testing.T) {
		run(t, k, codeinterp.Request{Code: "y = 1", ContextID: "other"})
		evs := run(t, k, codeinterp.Request{Code: "y"})
		if evs[0].Type != "error" || evs[0].Error.Name != "NameError" || len(evs[0].Error.Traceback) == 0 {
			t.Fatalf("y in the default context: %+v", evs[0])
		}
		cs, err := codeinterp.Contexts(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]int{}
		for _, c := range cs {
			ids[c.ID] = c.ExecutionCount
		}
		if ids["default"] != 2 || ids["other"] != 1 {
			t.Fatalf("contexts %+v", cs)
		}
	})
	t.Run("contexts are made in a directory, restarted and removed", func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		c, err := codeinterp.CreateContext(ctx, k, "made", dir)
		if err != nil || c.ID != "made" || c.Cwd != dir {
			t.Fatalf("create: %+v %v", c, err)
		}
		if _, err := codeinterp.CreateContext(ctx, k, "made", ""); pandastack.ErrorCode(err) != pandastack.EConflict {
			t.Fatalf("create a taken id: %v, want conflict", err)
		}
		if _, err := codeinterp.CreateContext(ctx, k, "nodir", "/no/such/dir"); pandastack.ErrorCode(err) != pandastack.EInvalid {
			t.Fatalf("create in a missing directory: %v, want invalid_argument", err)
		}
		evs := run(t, k, codeinterp.Request{Code: "import os\nz = 1\nos.getcwd()", ContextID: "made"})
		if evs[len(evs)-2].Type != "result" || evs[len(evs)-2].Result.Text != "'"+dir+"'" {
			t.Fatalf("cwd of the made context: %+v", evs)
		}
		if err := codeinterp.RestartContext(ctx, k, "made"); err != nil {
			t.Fatal(err)
		}
		if evs := run(t, k, codeinterp.Request{Code: "z", ContextID: "made"}); evs[0].Type != "error" || evs[0].Error.Name != "NameError" {
			t.Fatalf("z after a restart: %+v", evs[0])
		}
		if err := codeinterp.RemoveContext(ctx, k, "made"); err != nil {
			t.Fatal(err)
		}
		if err := codeinterp.RemoveContext(ctx, k, "made"); pandastack.ErrorCode(err) != pandastack.ENotFound {
			t.Fatalf("remove a removed context: %v, want not_found", err)
		}
	})
	t.Run("a run's env holds for that run only", func(t *testing.T) {
		stdout := func(evs []codeinterp.Event) (s string) {
			for _, ev := range evs {
				if ev.Type == "stdout" {
					s += ev.Text
				}
			}
			return s
		}
		if out := stdout(run(t, k, codeinterp.Request{Code: "import os\nprint(os.environ.get('ONLY_HERE'))", Env: map[string]string{"ONLY_HERE": "yes"}})); out != "yes\n" {
			t.Fatalf("during: %q", out)
		}
		if out := stdout(run(t, k, codeinterp.Request{Code: "print(os.environ.get('ONLY_HERE'))"})); out != "None\n" {
			t.Fatalf("after: %q", out)
		}
	})
	t.Run("a timeout ends the run and says so", func(t *testing.T) {
		evs := run(t, k, codeinterp.Request{Code: "import time\ntime.sleep(30)", TimeoutSeconds: 0.5})
		if last := evs[len(evs)-1]; last.Type != "end" || !last.TimedOut {
			t.Fatalf("last event %+v", last)
		}
	})
	t.Run("a cancelled context closes the connection", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		err := codeinterp.Run(ctx, k, codeinterp.Request{Code: "import time\nprint('go', flush=True)\ntime.sleep(30)"}, func(ev codeinterp.Event) error {
			if ev.Type == "stdout" {
				cancel()
			}
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	})
}

func TestNoKernelIsAConflict(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	err := codeinterp.Run(context.Background(), loopback{port}, codeinterp.Request{Code: "1"}, func(codeinterp.Event) error { return nil })
	if pandastack.ErrorCode(err) != pandastack.EConflict || !strings.Contains(pandastack.ErrorMessage(err), "code-interpreter template") {
		t.Fatalf("err %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		req  codeinterp.Request
		code string
	}{
		{"ok", codeinterp.Request{Code: "1", Language: "python3", ContextID: "a.b-c_d"}, ""},
		{"language", codeinterp.Request{Code: "1", Language: "ruby"}, pandastack.EInvalid},
		{"context id", codeinterp.Request{Code: "1", ContextID: "a/b"}, pandastack.EInvalid},
		{"negative timeout", codeinterp.Request{Code: "1", TimeoutSeconds: -1}, pandastack.EInvalid},
		{"timeout over the limit", codeinterp.Request{Code: "1", TimeoutSeconds: 101}, pandastack.EInvalid},
		{"code too large", codeinterp.Request{Code: strings.Repeat("x", codeinterp.MaxCodeBytes+1)}, pandastack.ETooLarge},
		{"env", codeinterp.Request{Code: "1", Env: map[string]string{"A": "b"}}, ""},
		{"env name with =", codeinterp.Request{Code: "1", Env: map[string]string{"A=B": "c"}}, pandastack.EInvalid},
		{"env value with NUL", codeinterp.Request{Code: "1", Env: map[string]string{"A": "b\x00"}}, pandastack.EInvalid},
		{"env too large", codeinterp.Request{Code: "1", Env: map[string]string{"A": strings.Repeat("x", 300<<10)}}, pandastack.ETooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate(100)
			if got := pandastack.ErrorCode(err); (err == nil) != (tt.code == "") || (err != nil && got != tt.code) {
				t.Fatalf("err %v, want code %q", err, tt.code)
			}
		})
	}
}
