package e2e

import (
	"bytes"
	"context"
	"image/png"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// templateBuild is one catalog template built on the main server through
// the API, once per suite run.
type templateBuild struct {
	once sync.Once
	err  error
}

var templateBuilds sync.Map // name → *templateBuild

// needTemplate builds a catalog template on the main server (or finds it
// built); tests that use templates other than base call it first.
func needTemplate(t *testing.T, name string) {
	t.Helper()
	v, _ := templateBuilds.LoadOrStore(name, &templateBuild{})
	b := v.(*templateBuild)
	b.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
		defer cancel()
		t0 := time.Now()
		_, b.err = main.client(main.admin).BuildTemplate(ctx, name, nil)
		t.Logf("template %s built in %v", name, time.Since(t0))
	})
	if b.err != nil {
		t.Fatalf("build template %s: %v\nserver log:\n%s", name, b.err, main.tail())
	}
}

func runCode(t *testing.T, sb *sdk.Sandbox, code string, opts sdk.CodeOptions) *sdk.Execution {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ex, err := sb.RunCode(ctx, code, opts)
	if err != nil {
		t.Fatalf("run_code %q: %v", code, err)
	}
	return ex
}

func TestRunCode(t *testing.T) {
	needTemplate(t, "code-interpreter")
	ctx := context.Background()
	c := teamClient(t, "run-code")
	sb := newSandbox(t, c, sdk.CreateSandboxParams{Template: "code-interpreter"})

	// State persists between calls; stdout and the last expression come back.
	ex := runCode(t, sb, "x = 6 * 7\nprint('hello')\nx", sdk.CodeOptions{})
	if ex.Error != nil || ex.Stdout != "hello\n" || ex.Text() != "42" {
		t.Fatalf("first run: %+v (error %v)", ex, ex.Error)
	}
	if ex = runCode(t, sb, "x + 1", sdk.CodeOptions{}); ex.Text() != "43" || ex.ExecutionCount != 2 {
		t.Fatalf("second run: text %q, count %d", ex.Text(), ex.ExecutionCount)
	}
	ex = runCode(t, sb, "import sys\nprint('warn', file=sys.stderr)", sdk.CodeOptions{})
	if ex.Stderr != "warn\n" || len(ex.Results) != 0 {
		t.Fatalf("stderr run: %+v", ex)
	}

	// A plot comes back as a PNG of the figure's size.
	ex = runCode(t, sb, "import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')", sdk.CodeOptions{})
	var pngs [][]byte
	for _, r := range ex.Results {
		if b, err := r.PNGBytes(); err != nil {
			t.Fatal(err)
		} else if b != nil {
			pngs = append(pngs, b)
		}
	}
	if ex.Error != nil || len(pngs) != 1 {
		t.Fatalf("plot run: %d PNGs, error %v, results %d", len(pngs), ex.Error, len(ex.Results))
	}
	img, err := png.Decode(bytes.NewReader(pngs[0]))
	if err != nil {
		t.Fatalf("plot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 400 || b.Dy() != 300 {
		t.Fatalf("plot is %dx%d, want 400x300", b.Dx(), b.Dy())
	}
	// The figure was closed: the next run has no plot.
	if ex = runCode(t, sb, "1", sdk.CodeOptions{}); len(ex.Results) != 1 || ex.Results[0].PNG != "" {
		t.Fatalf("a figure outlived its run: %+v", ex.Results)
	}

	// An exception: name, value and a traceback that shows the user's code.
	ex = runCode(t, sb, "def f():\n    return 1 / 0\nf()", sdk.CodeOptions{})
	if ex.Error == nil || ex.Error.Name != "ZeroDivisionError" || ex.Error.Value != "division by zero" ||
		!strings.Contains(strings.Join(ex.Error.Traceback, ""), "return 1 / 0") {
		t.Fatalf("error run: %+v", ex.Error)
	}

	// A timeout interrupts the run; the interpreter and its state survive.
	ex = runCode(t, sb, "import time\ny = 0\nwhile True:\n    y += 1\n    time.sleep(0.01)", sdk.CodeOptions{TimeoutSeconds: 3})
	if !ex.TimedOut || ex.Error == nil || ex.Error.Name != "TimeoutError" {
		t.Fatalf("timeout run: timed out %v, error %+v", ex.TimedOut, ex.Error)
	}
	if ex = runCode(t, sb, "x, y > 0", sdk.CodeOptions{}); ex.Error != nil || ex.Text() != "(42, True)" {
		t.Fatalf("after the timeout: %q %+v", ex.Text(), ex.Error)
	}

	// Contexts are separate namespaces.
	if ex = runCode(t, sb, "x", sdk.CodeOptions{ContextID: "other"}); ex.Error == nil || ex.Error.Name != "NameError" {
		t.Fatalf("x leaked into another context: %+v", ex)
	}
	cs, err := sb.CodeContexts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, c := range cs {
		ids[c.ID] = true
	}
	if !ids["default"] || !ids["other"] {
		t.Fatalf("contexts %+v", cs)
	}

	// A fork has the interpreter's state; the parent does not see the child's.
	kids, err := sb.ForkN(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	kid := kids[0]
	t.Cleanup(func() { _ = kid.Kill(context.Background()) })
	if ex = runCode(t, kid, "z = x * 2\nz", sdk.CodeOptions{}); ex.Text() != "84" {
		t.Fatalf("fork: %q %+v", ex.Text(), ex.Error)
	}
	if ex = runCode(t, sb, "'z' in globals()", sdk.CodeOptions{}); ex.Text() != "False" {
		t.Fatalf("the child's variable reached the parent: %q", ex.Text())
	}

	// So does a sandbox started from a snapshot.
	sn, err := sb.Snapshot(ctx, "with-x")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSnapshot(context.Background(), sn.ID) })
	restored, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Snapshot: sn.ID, TTLSeconds: 300})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restored.Kill(context.Background()) })
	if ex = runCode(t, restored, "x", sdk.CodeOptions{}); ex.Text() != "42" {
		t.Fatalf("snapshot: %q %+v", ex.Text(), ex.Error)
	}
}

func TestRunCodeBadInput(t *testing.T) {
	needTemplate(t, "code-interpreter")
	ctx := context.Background()
	c := teamClient(t, "run-code-bad")
	// A template without the kernel: a clear conflict, not a hang or a 5xx.
	plain := newSandbox(t, c, sdk.CreateSandboxParams{})
	if _, err := plain.RunCode(ctx, "1", sdk.CodeOptions{}); !sdk.IsConflict(err) || !strings.Contains(err.Error(), "code-interpreter") {
		t.Fatalf("run_code in a base sandbox: %v", err)
	}
	sb := newSandbox(t, c, sdk.CreateSandboxParams{Template: "code-interpreter"})
	if _, err := sb.RunCode(ctx, "1", sdk.CodeOptions{Language: "cobol"}); !sdk.IsInvalid(err) {
		t.Fatalf("unknown language: %v", err)
	}
	if _, err := sb.RunCode(ctx, "1", sdk.CodeOptions{ContextID: "../x"}); !sdk.IsInvalid(err) {
		t.Fatalf("bad context id: %v", err)
	}
	// A syntax error is the code's error, and the kernel carries on.
	ex := runCode(t, sb, "def (", sdk.CodeOptions{})
	if ex.Error == nil || ex.Error.Name != "SyntaxError" {
		t.Fatalf("syntax error: %+v", ex.Error)
	}
	if ex = runCode(t, sb, "2 ** 10", sdk.CodeOptions{}); ex.Text() != "1024" {
		t.Fatalf("after a syntax error: %q", ex.Text())
	}
}

func TestRunCodeCLI(t *testing.T) {
	needTemplate(t, "code-interpreter")
	k, err := main.client(main.admin).CreateKey(context.Background(), "run-code-cli", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, main.client(k.Key), sdk.CreateSandboxParams{Template: "code-interpreter"})
	out, errOut, code := cli(t, k.Key, "print('a')\nv = 6 * 7\nv", "sandbox", "run-code", sb.ID)
	if code != 0 || out != "a\n42\n" {
		t.Fatalf("run-code: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = cli(t, k.Key, "", "sandbox", "run-code", sb.ID, "v // 0")
	if code != 1 || !strings.Contains(errOut, "ZeroDivisionError") || !strings.Contains(errOut, "v // 0") {
		t.Fatalf("run-code error: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
