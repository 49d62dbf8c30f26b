package templates

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/api"
)

// startKernel runs the code kernel with the host's python3 on a free
// loopback port, as the template does in the guest.
func startKernel(t *testing.T) string {
	t.Helper()
	return startKernelEnv(t)
}

// startKernelEnv is startKernel with extra environment variables (K=V).
func startKernelEnv(t *testing.T, env ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	src := filepath.Join(t.TempDir(), "kernel.py")
	if err := os.WriteFile(src, kernelPy, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", src, fmt.Sprint(port))
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if i == 200 {
			t.Fatalf("kernel never listened: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type kev struct {
	Type           string   `json:"type"`
	Text           string   `json:"text"`
	Name           string   `json:"name"`
	Value          string   `json:"value"`
	Traceback      []string `json:"traceback"`
	HTML           string   `json:"html"`
	IsMainResult   bool     `json:"is_main_result"`
	ExecutionCount int      `json:"execution_count"`
	TimedOut       bool     `json:"timed_out"`
	Contexts       []struct {
		ID  string `json:"id"`
		Cwd string `json:"cwd"`
	} `json:"contexts"`
	ID  string `json:"id"`
	Cwd string `json:"cwd"`
}

func kcall(t *testing.T, addr string, req map[string]any) []kev {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := json.Marshal(req)
	c.Write(append(b, '\n'))
	var out []kev
	sc := bufio.NewScanner(c)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var e kev
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func execute(t *testing.T, addr, code string, extra ...any) (stdout, stderr string, results []kev, errEv *kev, end kev) {
	t.Helper()
	req := map[string]any{"op": "execute", "code": code}
	for i := 0; i+1 < len(extra); i += 2 {
		req[extra[i].(string)] = extra[i+1]
	}
	evs := kcall(t, addr, req)
	for i, e := range evs {
		switch e.Type {
		case "stdout":
			stdout += e.Text
		case "stderr":
			stderr += e.Text
		case "result":
			results = append(results, e)
		case "error":
			errEv = &evs[i]
		case "end":
			end = e
		}
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != "end" {
		t.Fatalf("run of %q did not end with an end event: %+v", code, evs)
	}
	return
}

func TestKernelStateOutputAndResults(t *testing.T) {
	addr := startKernel(t)
	out, _, res, e, end := execute(t, addr, "x = 40\nprint('a', 1)\nx + 2")
	if e != nil || out != "a 1\n" || len(res) != 1 || res[0].Text != "42" || !res[0].IsMainResult || end.ExecutionCount != 1 {
		t.Fatalf("out %q res %+v err %+v end %+v", out, res, e, end)
	}
	_, errOut, res, _, end := execute(t, addr, "import sys\nsys.stderr.write('w\\n')\nx")
	if errOut != "w\n" || len(res) != 1 || res[0].Text != "40" || end.ExecutionCount != 2 {
		t.Fatalf("stderr %q res %+v end %+v", errOut, res, end)
	}
	// A statement (or None) is no result; objects with _repr_html_ give HTML.
	if _, _, res, _, _ = execute(t, addr, "y = 1"); len(res) != 0 {
		t.Fatalf("assignment gave results %+v", res)
	}
	_, _, res, _, _ = execute(t, addr, "class T:\n    def _repr_html_(self): return '<b>t</b>'\nT()")
	if len(res) != 1 || res[0].HTML != "<b>t</b>" {
		t.Fatalf("html result %+v", res)
	}
}

func TestKernelErrors(t *testing.T) {
	addr := startKernel(t)
	_, _, _, e, _ := execute(t, addr, "def f():\n    return 1 / 0\nf()")
	if e == nil || e.Name != "ZeroDivisionError" || e.Value != "division by zero" {
		t.Fatalf("error %+v", e)
	}
	tb := strings.Join(e.Traceback, "")
	if !strings.Contains(tb, "return 1 / 0") || strings.Contains(tb, "kernel.py") {
		t.Fatalf("traceback should show the cell, not the kernel:\n%s", tb)
	}
	if _, _, _, e, _ = execute(t, addr, "def ("); e == nil || e.Name != "SyntaxError" {
		t.Fatalf("syntax error %+v", e)
	}
	// Output before an error is kept.
	out, _, _, e, _ := execute(t, addr, "print('before')\nraise ValueError('bad')")
	if out != "before\n" || e == nil || e.Name != "ValueError" || e.Value != "bad" {
		t.Fatalf("out %q err %+v", out, e)
	}
	evs := kcall(t, addr, map[string]any{"op": "execute", "code": "1", "context": "../x"})
	if len(evs) != 1 || evs[0].Type != "error" || evs[0].Name != "ProtocolError" {
		t.Fatalf("bad context id: %+v", evs)
	}
}

func TestKernelTimeoutInterrupts(t *testing.T) {
	addr := startKernel(t)
	execute(t, addr, "n = 5")
	for _, code := range []string{"import time\ntime.sleep(60)", "while True:\n    pass"} {
		t0 := time.Now()
		_, _, _, e, end := execute(t, addr, code, "timeout", 1)
		if !end.TimedOut || e == nil || e.Name != "TimeoutError" {
			t.Fatalf("%q: end %+v error %+v", code, end, e)
		}
		if time.Since(t0) > 50*time.Second {
			t.Fatalf("%q was not interrupted", code)
		}
		if _, _, res, e, _ := execute(t, addr, "n"); e != nil || len(res) != 1 || res[0].Text != "5" {
			t.Fatalf("after the timeout: %+v %+v", res, e)
		}
	}
}

func TestKernelClientGoneInterrupts(t *testing.T) {
	addr := startKernel(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte(`{"op":"execute","code":"import time\nfor i in range(6000): time.sleep(0.01)\ndone = True"}` + "\n"))
	time.Sleep(500 * time.Millisecond)
	c.Close()
	// The next run waits for the first to stop; it must not run to its end.
	_, _, res, e, _ := execute(t, addr, "'done' in globals()")
	if e != nil || len(res) != 1 || res[0].Text != "False" {
		t.Fatalf("the abandoned run was not interrupted: %+v %+v", res, e)
	}
}

func TestKernelContexts(t *testing.T) {
	addr := startKernel(t)
	execute(t, addr, "a = 1")
	execute(t, addr, "a = 2", "context", "second")
	if _, _, res, _, _ := execute(t, addr, "a"); res[0].Text != "1" {
		t.Fatalf("default context: %+v", res)
	}
	if _, _, res, _, _ := execute(t, addr, "a", "context", "second"); res[0].Text != "2" {
		t.Fatalf("second context: %+v", res)
	}
	evs := kcall(t, addr, map[string]any{"op": "contexts"})
	if len(evs) != 1 || len(evs[0].Contexts) != 2 || evs[0].Contexts[0].ID != "default" || evs[0].Contexts[1].ID != "second" {
		t.Fatalf("contexts %+v", evs)
	}
}

// Contexts are made with a working directory of their own, restarted to an
// empty namespace in it, and removed; a chdir in one stays with it.
func TestKernelManagesContexts(t *testing.T) {
	addr := startKernel(t)
	dir := t.TempDir()
	if evs := kcall(t, addr, map[string]any{"op": "create", "context": "c1", "cwd": dir}); len(evs) != 1 || evs[0].Type != "context" || evs[0].ID != "c1" || evs[0].Cwd != dir {
		t.Fatalf("create: %+v", evs)
	}
	if evs := kcall(t, addr, map[string]any{"op": "create", "context": "c1"}); len(evs) != 1 || evs[0].Name != "FileExistsError" {
		t.Fatalf("create again: %+v", evs)
	}
	if evs := kcall(t, addr, map[string]any{"op": "create", "context": "c2", "cwd": "/no/such/dir"}); len(evs) != 1 || evs[0].Name != "FileNotFoundError" {
		t.Fatalf("create in a missing directory: %+v", evs)
	}
	if _, _, res, _, _ := execute(t, addr, "import os; x = 5; os.getcwd()", "context", "c1"); len(res) != 1 || res[0].Text != "'"+dir+"'" {
		t.Fatalf("cwd of c1: %+v", res)
	}
	// A chdir in the default context does not move c1, and stays with default.
	execute(t, addr, "import os; os.chdir('/')")
	if _, _, res, _, _ := execute(t, addr, "os.getcwd()", "context", "c1"); len(res) != 1 || res[0].Text != "'"+dir+"'" {
		t.Fatalf("c1 after default's chdir: %+v", res)
	}
	if _, _, res, _, _ := execute(t, addr, "os.getcwd()"); len(res) != 1 || res[0].Text != "'/'" {
		t.Fatalf("default after its chdir: %+v", res)
	}
	if evs := kcall(t, addr, map[string]any{"op": "restart", "context": "c1"}); len(evs) != 1 || evs[0].Type != "ok" {
		t.Fatalf("restart: %+v", evs)
	}
	if _, _, _, errEv, _ := execute(t, addr, "x", "context", "c1"); errEv == nil || errEv.Name != "NameError" {
		t.Fatalf("x after a restart: %+v, want NameError", errEv)
	}
	if evs := kcall(t, addr, map[string]any{"op": "remove", "context": "c1"}); len(evs) != 1 || evs[0].Type != "ok" {
		t.Fatalf("remove: %+v", evs)
	}
	for _, op := range []string{"remove", "restart"} {
		if evs := kcall(t, addr, map[string]any{"op": op, "context": "c1"}); len(evs) != 1 || evs[0].Name != "NotFound" {
			t.Fatalf("%s of a removed context: %+v", op, evs)
		}
	}
	for _, c := range kcall(t, addr, map[string]any{"op": "contexts"})[0].Contexts {
		if c.ID == "c1" {
			t.Fatalf("c1 still listed after its removal")
		}
	}
}

// A run's env is set for that run only: what it named is put back after.
func TestKernelRunEnv(t *testing.T) {
	addr := startKernel(t)
	execute(t, addr, "import os; os.environ['KEEP'] = 'before'")
	if out, _, _, _, _ := execute(t, addr, "print(os.environ['KEEP'], os.environ['NEW'])", "env", map[string]string{"KEEP": "during", "NEW": "x"}); out != "during x\n" {
		t.Fatalf("during the run: %q", out)
	}
	if out, _, _, _, _ := execute(t, addr, "print(os.environ['KEEP'], 'NEW' in os.environ)"); out != "before False\n" {
		t.Fatalf("after the run: %q", out)
	}
	if evs := kcall(t, addr, map[string]any{"op": "execute", "code": "1", "env": map[string]any{"A=B": "x"}}); len(evs) != 1 || evs[0].Name != "ProtocolError" {
		t.Fatalf("a bad env: %+v", evs)
	}
}

func TestKernelPortMatchesAPI(t *testing.T) {
	if KernelPort != api.CodeKernelPort {
		t.Fatalf("templates.KernelPort %d, api.CodeKernelPort %d", KernelPort, api.CodeKernelPort)
	}
	if !strings.Contains(Catalog["code-interpreter"].Warm, KernelPath) || Catalog["code-interpreter"].Files[KernelPath] == nil {
		t.Fatal("code-interpreter does not install and start the kernel")
	}
}
