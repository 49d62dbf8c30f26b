package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// webSpec is a custom template using every instruction. Its last RUN is
// what a rebuild changes.
const webSpec = `# a tiny web app
FROM base
ENV GREETING="hello world" APP_MODE=test
WORKDIR /srv/app
COPY app/ .
RUN useradd -m appuser && \
    chown -R appuser /srv/app
RUN echo %s > /srv/app/built.txt
USER appuser
START python3 -m http.server 8123
READY --timeout=120 python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8123/')"
`

func writeContext(t *testing.T, spec string, files map[string]string) (specFile, dir string) {
	t.Helper()
	dir = t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	specFile = filepath.Join(dir, "pandastack.spec")
	if err := os.WriteFile(specFile, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return specFile, dir
}

func buildCustom(t *testing.T, name, spec, dir string) (sdk.Template, *sdk.TemplateBuild, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	t0 := time.Now()
	tpl, b, err := main.client(main.admin).BuildCustomTemplate(ctx, sdk.CustomBuildParams{Name: name, Spec: []byte(spec), ContextDir: dir})
	t.Logf("build of %s took %v", name, time.Since(t0).Round(time.Millisecond))
	return tpl, b, err
}

func cachedSteps(b *sdk.TemplateBuild) []bool {
	var out []bool
	for _, s := range b.Steps {
		out = append(out, s.Cached)
	}
	return out
}

func execOut(t *testing.T, sb *sdk.Sandbox, cmd string) string {
	t.Helper()
	r, err := sb.Exec(context.Background(), cmd, sdk.ExecOptions{TimeoutSeconds: 60})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	if r.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d: %s%s", cmd, r.ExitCode, r.Stdout, r.Stderr)
	}
	return strings.TrimSpace(string(r.Stdout))
}

// A custom template from a spec: every instruction has its effect in the
// sandboxes made from it; a rebuild redoes only what changed; sandboxes and
// snapshots of the old version survive it; a size variant has its size.
func TestCustomTemplate(t *testing.T) {
	ctx := context.Background()
	app := "print('app')\n"
	_, dir := writeContext(t, "", map[string]string{"app/main.py": app, "app/static/index.html": "<h1>hi</h1>\n"})

	// Build through the CLI, as a user would.
	specFile, _ := writeContext(t, "", nil)
	os.WriteFile(specFile, []byte(strings.Replace(webSpec, "%s", "built-one", 1)), 0o644)
	t0 := time.Now()
	out, errOut, code := cli(t, main.admin, "", "template", "build", "-f", specFile, "--name", "web", dir)
	t.Logf("cold build of web (3 steps in VMs, then the bake) took %v", time.Since(t0).Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("template build: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "step 6/7") || !strings.Contains(out, "built template web version 1") {
		t.Fatalf("CLI build output lacks the step counter or the result:\n%s\n%s", out, errOut)
	}
	c := teamClient(t, "custom-templates")
	sb1 := newSandbox(t, c, sdk.CreateSandboxParams{Template: "web"})
	if sb1.TemplateVersion != 1 || sb1.Template != "web" {
		t.Fatalf("sandbox reports template %s version %d", sb1.Template, sb1.TemplateVersion)
	}
	checks := map[string]string{
		"cat /srv/app/main.py":           strings.TrimSpace(app),
		"cat /srv/app/static/index.html": "<h1>hi</h1>",
		"echo $GREETING/$APP_MODE":       "hello world/test",
		"pwd":                            "/srv/app",
		"whoami":                         "appuser",
		"cat built.txt":                  "built-one",
		"stat -c %U /srv/app/main.py":    "appuser",
		"pgrep -u appuser -f 'http.server 8123' >/dev/null && echo running":                                                                      "running",
		"python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8123/static/index.html').read().decode().strip())\"": "<h1>hi</h1>",
	}
	for cmd, want := range checks {
		if got := execOut(t, sb1, cmd); got != want {
			t.Errorf("%s = %q, want %q", cmd, got, want)
		}
	}

	// Nothing changed: nothing is redone, no new version.
	_, b, err := buildCustom(t, "web", strings.Replace(webSpec, "%s", "built-one", 1), dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, cached := range cachedSteps(b) {
		if !cached {
			t.Errorf("unchanged rebuild redid step %d (%s)", i+1, b.Steps[i].Instruction)
		}
	}
	if b.Version != 1 {
		t.Errorf("unchanged rebuild made version %d", b.Version)
	}

	// Only the last RUN changes: it and the bake rerun, nothing before.
	tpl2, b, err := buildCustom(t, "web", strings.Replace(webSpec, "%s", "built-two", 1), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, true, true, true, false, true, false} // ENV WORKDIR COPY RUN RUN* USER bake*
	if got := cachedSteps(b); strings.Join(strs(got), ",") != strings.Join(strs(want), ",") {
		t.Errorf("cache hits after changing the last RUN = %v, want %v (steps %+v)", got, want, b.Steps)
	}
	if tpl2.Version != 2 {
		t.Fatalf("rebuild made version %d, want 2", tpl2.Version)
	}
	log, err := main.client(main.admin).TemplateBuildLog(ctx, "web", b.ID)
	if err != nil || !strings.Contains(log, "[3/7] line 5: COPY app/ .: CACHED") || !strings.Contains(log, "[5/7] line 8: RUN echo built-two") {
		t.Errorf("kept build log (err %v):\n%s", err, log)
	}
	vs, err := main.client(main.admin).TemplateVersions(ctx, "web")
	if err != nil || len(vs) != 2 || vs[1].Version != 2 || vs[1].Tags[0] != "latest" {
		t.Fatalf("versions: %+v %v", vs, err)
	}

	// The sandbox of version 1 runs on, and can be snapshotted and restored.
	if got := execOut(t, sb1, "cat built.txt"); got != "built-one" {
		t.Errorf("old sandbox after the rebuild: %q", got)
	}
	kid, err := sb1.Fork(ctx)
	if err != nil {
		t.Fatalf("fork of a sandbox of the old version: %v", err)
	}
	t.Cleanup(func() { _ = kid.Kill(context.Background()) })
	if got := execOut(t, kid, "cat built.txt; whoami"); got != "built-one\nappuser" {
		t.Errorf("fork of a version 1 sandbox: %q", got)
	}
	if err := sb1.Hibernate(ctx); err != nil {
		t.Fatalf("hibernate: %v", err)
	}
	if got := execOut(t, sb1, "cat built.txt"); got != "built-one" { // wakes it
		t.Errorf("version 1 sandbox woken after the rebuild: %q", got)
	}
	snap, err := sb1.Snapshot(ctx, "web-v1")
	if err != nil {
		t.Fatalf("snapshot of a sandbox of the old version: %v", err)
	}
	fromSnap := newSandbox(t, c, sdk.CreateSandboxParams{Snapshot: snap.ID})
	if got := execOut(t, fromSnap, "cat built.txt"); got != "built-one" {
		t.Errorf("sandbox from a snapshot of version 1: %q", got)
	}
	sb2 := newSandbox(t, c, sdk.CreateSandboxParams{Template: "web"})
	if got := execOut(t, sb2, "cat built.txt"); got != "built-two" || sb2.TemplateVersion != 2 {
		t.Errorf("new sandbox: %q, version %d", got, sb2.TemplateVersion)
	}
	old := newSandbox(t, c, sdk.CreateSandboxParams{Template: "web:1"})
	if got := execOut(t, old, "cat built.txt"); got != "built-one" || old.TemplateVersion != 1 {
		t.Errorf("sandbox from web:1: %q, version %d", got, old.TemplateVersion)
	}

	// A size variant: baked on first use, with its own memory, CPUs and a
	// bigger disk (grown online in the guest), and the template's START
	// running in it too.
	if sb2.DiskMiB == 0 {
		t.Fatalf("sandbox reports no disk size: %+v", sb2)
	}
	diskGiB := sb2.DiskMiB>>10 + 2
	big := newSandbox(t, c, sdk.CreateSandboxParams{Template: "web", CPUs: 2, MemoryMiB: 768, DiskGiB: diskGiB})
	if big.CPUs != 2 || big.MemoryMiB != 768 || big.TemplateVersion != 2 || big.DiskMiB != diskGiB<<10 {
		t.Errorf("variant reports cpus %d, memory %d MiB, disk %d MiB, version %d; want 2, 768, %d, 2",
			big.CPUs, big.MemoryMiB, big.DiskMiB, big.TemplateVersion, diskGiB<<10)
	}
	rootMiB := func(sb *sdk.Sandbox) int {
		n, _ := strconv.Atoi(strings.TrimSuffix(execOut(t, sb, "df -BM --output=size / | tail -1"), "M"))
		return n
	}
	if small, grown := rootMiB(sb2), rootMiB(big); grown <= small || grown < diskGiB<<10*9/10 || grown > diskGiB<<10 {
		t.Errorf("root filesystem: %d MiB in the template, %d MiB in the %d GiB variant", small, grown, diskGiB)
	}
	if got := execOut(t, big, "dd if=/dev/zero of=/var/tmp/fill bs=1M count=1500 status=none && rm /var/tmp/fill && echo ok"); got != "ok" {
		t.Errorf("writing 1.5 GiB into the grown disk: %q", got)
	}
	if got := execOut(t, big, "nproc"); got != "2" {
		t.Errorf("nproc in the variant = %s", got)
	}
	memKB := func(sb *sdk.Sandbox) int {
		n, _ := strconv.Atoi(execOut(t, sb, "awk '/MemTotal/ {print $2}' /proc/meminfo"))
		return n
	}
	if kb := memKB(big); kb <= 600<<10 || kb > 768<<10 {
		t.Errorf("MemTotal in the 768 MiB variant = %d kB", kb)
	}
	if kb := memKB(sb2); kb > 512<<10 {
		t.Errorf("MemTotal in the 512 MiB template = %d kB", kb)
	}
	if got := execOut(t, big, "pgrep -f 'http.server 8123' >/dev/null && whoami"); got != "appuser" {
		t.Errorf("variant: START not running or defaults lost: %q", got)
	}
	var apiErr *sdk.APIError
	_, err = c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: "web", CPUs: 64})
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || !strings.Contains(apiErr.Message, "between 1 and 8") {
		t.Errorf("cpus 64: %v", err)
	}
	_, err = c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: "web", DiskGiB: 1})
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || !strings.Contains(apiErr.Message, "disks only grow") {
		t.Errorf("disk_gib below the template's: %v", err)
	}
}

func strs(bs []bool) []string {
	var out []string
	for _, b := range bs {
		out = append(out, strconv.FormatBool(b))
	}
	return out
}

// Bad specs and contexts are refused with the line at fault; a failing RUN
// names its step and output; nothing half-built is listed.
func TestCustomTemplateBadInput(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o600)
	_, dir := writeContext(t, "", map[string]string{"ok.txt": "ok"})
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "leak"))
	cases := []struct {
		name, spec, want string
	}{
		{"unknown instruction", "FROM base\nRUN true\nEXPOSE 80\n", "line 3: unknown instruction"},
		{"copy parent", "FROM base\nCOPY ../secret /x\n", "line 2: COPY ../secret: path leads outside the build context"},
		{"copy symlink escape", "FROM base\nRUN true\nCOPY leak /x\n", "line 3: COPY leak: a symbolic link leads outside the build context"},
		{"missing parent", "FROM no-such-template\n", "FROM no-such-template"},
	}
	for _, tc := range cases {
		_, _, err := buildCustom(t, "bad", tc.spec, dir)
		var apiErr *sdk.APIError
		if !errors.As(err, &apiErr) || apiErr.Status/100 != 4 || !strings.Contains(apiErr.Message, tc.want) {
			t.Errorf("%s: err = %v, want a 4xx naming %q", tc.name, err, tc.want)
		}
	}
	_, _, err := main.client(main.admin).BuildCustomTemplate(ctx, sdk.CustomBuildParams{Name: "a/b", Spec: []byte("FROM base\n")})
	var apiErr *sdk.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 {
		t.Errorf("template name with path characters: %v", err)
	}

	// A failing RUN: the step, its line and its output.
	_, b, err := buildCustom(t, "bad", "FROM base\nCOPY ok.txt /ok.txt\nRUN echo about to fail; exit 3\nRUN true\n", dir)
	if err == nil || !strings.Contains(err.Error(), "step 2/4 (line 3: RUN echo about to fail; exit 3) failed") ||
		!strings.Contains(err.Error(), "exit code 3") || !strings.Contains(err.Error(), "about to fail") {
		t.Fatalf("failing RUN: %v", err)
	}
	if b == nil || b.Status != "failed" {
		t.Fatalf("failed build record: %+v", b)
	}
	if log, _ := main.client(main.admin).TemplateBuildLog(ctx, "bad", b.ID); !strings.Contains(log, "about to fail") {
		t.Errorf("kept log of the failed build lacks the output:\n%s", log)
	}

	// A build interrupted halfway (the client leaves during a step).
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, _, err := main.client(main.admin).BuildCustomTemplate(cctx, sdk.CustomBuildParams{Name: "bad",
			Spec: []byte("FROM base\nCOPY ok.txt /ok.txt\nRUN sleep 600\n"), ContextDir: dir,
			OnLine: func(l string) {
				if strings.HasPrefix(l, "[2/3] line 3: RUN sleep 600") {
					time.AfterFunc(2*time.Second, cancel)
				}
			}})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("an interrupted build succeeded")
		}
	case <-time.After(10 * time.Minute):
		t.Fatal("the interrupted build did not end")
	}
	cancel()
	// The server notices the client left and stops the build (its VM too).
	var bs []sdk.TemplateBuild
	eventually(t, 2*time.Minute, "the interrupted build to be recorded as failed", func() bool {
		bs, err = main.client(main.admin).TemplateBuilds(ctx, "bad")
		return err == nil && len(bs) == 2 && bs[0].Status == "failed"
	})
	if bs[1].Status != "failed" || !strings.Contains(bs[1].Error.Message, "about to fail") {
		t.Errorf("build runs after a failure and an interruption: %+v", bs)
	}
	ts, _ := main.client(main.admin).Templates(ctx)
	for _, tp := range ts {
		if tp.Name == "bad" {
			t.Errorf("a failed or interrupted build is listed: %+v", tp)
		}
	}
	if _, err := badClient(t).CreateSandbox(ctx, sdk.CreateSandboxParams{Template: "bad"}); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Errorf("create from a never-built template: %v", err)
	}
	// The next build resumes from the cached steps.
	tpl, b, err := buildCustom(t, "bad", "FROM base\nCOPY ok.txt /ok.txt\nRUN test -f /ok.txt\n", dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := cachedSteps(b); len(got) != 3 || !got[0] || got[1] {
		t.Errorf("build after the interruption: cache hits %v", got)
	}
	if tpl.Version != 1 {
		t.Errorf("first successful build is version %d", tpl.Version)
	}
}

func badClient(t *testing.T) *sdk.Client { return teamClient(t, "custom-bad") }

// A server killed in the middle of a custom build: after the restart
// nothing of that build is listed, its half-made step is gone, its VM is
// removed, and the next build resumes from the steps that had finished.
func TestCustomBuildServerCrash(t *testing.T) {
	ctx := context.Background()
	s, dir := newTestServer(t, "ps-buildcrash-")
	defer func() { s.stop() }() // the last one started on dir
	_, ctxDir := writeContext(t, "", map[string]string{"ok.txt": "ok"})
	running := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, _, err := s.client(s.admin).BuildCustomTemplate(ctx, sdk.CustomBuildParams{Name: "crashy", ContextDir: ctxDir,
			Spec: []byte("FROM base\nCOPY ok.txt /ok.txt\nRUN sleep 600\n"),
			OnLine: func(l string) {
				if strings.HasPrefix(l, "[2/3] line 3: RUN sleep 600") {
					once.Do(func() { close(running) })
				}
			}})
		done <- err
	}()
	select {
	case <-running:
	case err := <-done:
		t.Fatalf("the build ended before its long step: %v", err)
	case <-time.After(10 * time.Minute):
		t.Fatal("the build did not reach its long step")
	}
	time.Sleep(3 * time.Second) // the step's VM is up
	s.crash()
	if err := <-done; err == nil {
		t.Fatal("a build whose server was killed succeeded")
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, "steps", "*.tmp")); len(tmps) == 0 {
		t.Log("no half-made step was left by the crash (the step had not written its disk yet)")
	}

	s, err := startServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.waitTemplate(template, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	c := s.client(s.admin)
	ts, err := c.Templates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range ts {
		if tp.Name == "crashy" {
			t.Fatalf("the interrupted template is listed: %+v", tp)
		}
	}
	bs, err := c.TemplateBuilds(ctx, "crashy")
	if err != nil || len(bs) != 1 || bs[0].Status != "failed" || !strings.Contains(bs[0].Error.Message, "interrupted") {
		t.Fatalf("the interrupted build's record: %+v %v", bs, err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, "steps", "*.tmp")); len(tmps) != 0 {
		t.Errorf("half-made steps left after the restart: %v", tmps)
	}
	eventually(t, time.Minute, "the build's VM to be removed", func() bool {
		for _, pid := range qemuProcesses(dir) {
			if strings.Contains(cmdline(pid), "/steps/") {
				return false
			}
		}
		return true
	})
	tpl, b, err := s.client(s.admin).BuildCustomTemplate(ctx, sdk.CustomBuildParams{Name: "crashy", ContextDir: ctxDir,
		Spec: []byte("FROM base\nCOPY ok.txt /ok.txt\nRUN test -f /ok.txt\n")})
	if err != nil {
		t.Fatal(err)
	}
	if got := cachedSteps(b); len(got) != 3 || !got[0] || got[1] || got[2] {
		t.Errorf("build after the restart: cache hits %v, want [true false false]", got)
	}
	if tpl.Version != 1 {
		t.Errorf("first successful build is version %d", tpl.Version)
	}
}

// Two templates built at once from the same steps: the shared step runs
// once, the other build finds it in the cache, both templates work.
func TestCustomBuildsShareSteps(t *testing.T) {
	ctx := context.Background()
	spec := fmt.Sprintf("FROM base\nRUN echo twin-%d > /twin\n", time.Now().UnixNano())
	type result struct {
		b   *sdk.TemplateBuild
		err error
	}
	results := make(chan result, 2)
	for _, name := range []string{"twin-a", "twin-b"} {
		go func() {
			_, b, err := main.client(main.admin).BuildCustomTemplate(ctx, sdk.CustomBuildParams{Name: name, Spec: []byte(spec)})
			results <- result{b, err}
		}()
	}
	ran := 0
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !r.b.Steps[0].Cached {
			ran++
		}
	}
	if ran != 1 {
		t.Errorf("the shared RUN step ran %d times, want once", ran)
	}
	for _, name := range []string{"twin-a", "twin-b"} {
		sb := newSandbox(t, teamClient(t, "twins"), sdk.CreateSandboxParams{Template: name})
		if got := execOut(t, sb, "cat /twin"); !strings.HasPrefix(got, "twin-") {
			t.Errorf("%s: /twin = %q", name, got)
		}
	}
}
