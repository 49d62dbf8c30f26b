package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// gitServer is a git daemon on loopback serving the bare repositories
// under dir, and working copies to commit from.
type gitServer struct {
	t    *testing.T
	dir  string
	addr string
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@localhost",
		"GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@localhost", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// startGitDaemon serves dir's bare repositories at git://127.0.0.1:PORT/NAME.git.
func startGitDaemon(t *testing.T) *gitServer {
	t.Helper()
	dir := t.TempDir()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "daemon", "--export-all", "--reuseaddr", "--listen=127.0.0.1", fmt.Sprintf("--port=%d", port),
		"--base-path="+dir, dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("git daemon: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	g := &gitServer{t: t, dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", g.addr, time.Second)
		if err == nil {
			c.Close()
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("git daemon does not listen on %s", g.addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// push commits files on branch of repository name (made on first use)
// and returns its git:// URL.
func (g *gitServer) push(name, branch string, files map[string]string) string {
	t := g.t
	t.Helper()
	bare := filepath.Join(g.dir, name+".git")
	work := filepath.Join(g.dir, "work-"+name)
	if _, err := os.Stat(bare); err != nil {
		git(t, g.dir, "init", "--quiet", "--bare", "--initial-branch=main", bare)
		git(t, g.dir, "init", "--quiet", "--initial-branch=main", work)
	}
	git(t, work, "checkout", "--quiet", "-B", branch)
	for p, body := range files {
		full := filepath.Join(work, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, work, "add", "-A")
	git(t, work, "commit", "--quiet", "--allow-empty", "-m", "e2e")
	git(t, work, "push", "--quiet", "--force", bare, branch)
	return "git://" + g.addr + "/" + name + ".git"
}

// appClient bounds each request to an app: a stuck one fails the test.
var appClient = &http.Client{Timeout: time.Minute}

// appGet sends GET path to the server with the app's Host header.
func appGet(ctx context.Context, app, path string) (int, string, error) {
	return appGetAt(ctx, main.url, app, path)
}

// appGetAt sends GET path to the server at base with the app's Host header.
func appGetAt(ctx context.Context, base, app, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = app + ".apps.localhost"
	resp, err := appClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func deployAndWait(t *testing.T, c *sdk.Client, app, ref string) *sdk.Deploy {
	t.Helper()
	return deployAndWaitWithin(t, c, app, ref, 10*time.Minute)
}

// deployAndWaitWithin deploys ref of app and waits up to within for the
// deploy to end (live or failed).
func deployAndWaitWithin(t *testing.T, c *sdk.Client, app, ref string, within time.Duration) *sdk.Deploy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	d, err := c.DeployApp(ctx, app, ref)
	if err != nil {
		t.Fatalf("deploy %s: %v", app, err)
	}
	if d.Status != sdk.DeployQueued || d.ID == "" {
		t.Fatalf("deploy answered %+v, want a queued deploy with an id", d)
	}
	d, err = c.WaitDeploy(ctx, app, d.ID)
	if err != nil {
		t.Fatalf("wait for deploy %s of %s: %v", d.ID, app, err)
	}
	return d
}

func wantServes(t *testing.T, app, want string) {
	t.Helper()
	code, body, err := appGet(context.Background(), app, "/")
	if err != nil || code != 200 || !strings.Contains(body, want) {
		t.Fatalf("GET %s.apps.localhost/: %d %q %v; want 200 with %q", app, code, body, err, want)
	}
}

const staticV1 = "<h1>static v1</h1>\n"

// Apps end to end on the shared server: repositories served by a real git
// daemon on loopback; a static site, a plain Node app and a Python
// standard-library app are detected, built in a microVM, released as
// memory snapshots and served through the API port by Host header; a
// second deploy switches with no failed request under load; rollback
// serves the previous release; a failing build and an app that never
// listens fail with their reasons while the live release keeps serving;
// names collide with 409; another team sees 404; the GitHub webhook checks
// its signature, ignores other branches and replays; delete frees
// everything.
func TestApps(t *testing.T) {
	ctx := context.Background()
	gs := startGitDaemon(t)
	c := teamClient(t, "team-apps")
	other := teamClient(t, "team-apps-other")
	staticURL := gs.push("static", "main", map[string]string{"index.html": staticV1})

	web, err := c.CreateApp(ctx, sdk.CreateAppParams{Name: "web", GitURL: staticURL, Branch: "main",
		Env: map[string]string{"SECRET_TOKEN": "s3cr3t-value-e2e"}, HealthTimeoutSeconds: 15})
	if err != nil {
		t.Fatalf("create app: %v", err)
	}
	t.Cleanup(func() { _ = c.DeleteApp(context.Background(), "web") })
	if !strings.HasPrefix(web.URL, "http://web.apps.localhost:") || !strings.HasPrefix(web.WebhookSecret, "whsec_") || web.Branch != "main" {
		t.Fatalf("created app: %+v", web)
	}

	t.Run("names collide and other teams see nothing", func(t *testing.T) {
		_, err := c.CreateApp(ctx, sdk.CreateAppParams{Name: "web", GitURL: staticURL})
		if errCode(err) != "conflict" {
			t.Errorf("second app named web: %v, want conflict", err)
		}
		if _, err := other.GetApp(ctx, "web"); errCode(err) != "not_found" {
			t.Errorf("another team's GET: %v, want not_found", err)
		}
		if _, err := other.DeployApp(ctx, "web", ""); errCode(err) != "not_found" {
			t.Errorf("another team's deploy: %v, want not_found", err)
		}
		if _, err := c.CreateApp(ctx, sdk.CreateAppParams{Name: "Bad_Name", GitURL: staticURL}); errCode(err) != "invalid_argument" {
			t.Errorf("bad name: %v, want invalid_request", err)
		}
		code, _, err := appGet(ctx, "web", "/")
		if err != nil || code != http.StatusServiceUnavailable {
			t.Errorf("before a deploy: %d %v, want 503", code, err)
		}
	})

	var first *sdk.Deploy
	t.Run("a static site deploys and serves by Host", func(t *testing.T) {
		first = deployAndWait(t, c, "web", "")
		if first.Status != sdk.DeployLive || first.Framework != "static" || len(first.Commit) != 40 {
			t.Fatalf("deploy: %+v\n%s", first, first.Log)
		}
		wantServes(t, "web", "static v1")
	})
	if first == nil || first.Status != sdk.DeployLive {
		t.FailNow()
	}
	t.Run("requests reach the release over its NIC", func(t *testing.T) {
		wantOverNIC(t, c, "web", first.ID)
	})

	var dropped *sdk.SnapshotInfo // the second deploy's, dropped by the third
	t.Run("a second deploy switches with no failed request", func(t *testing.T) {
		gs.push("static", "main", map[string]string{"index.html": "<h1>static v2</h1>\n"})
		var ok, failed, sawV2 atomic.Int64
		var firstFailure atomic.Value
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, body, err := appGet(ctx, "web", "/")
				switch {
				case err == nil && code == 200 && strings.Contains(body, "static v2"):
					sawV2.Add(1)
					ok.Add(1)
				case err == nil && code == 200 && strings.Contains(body, "static v1"):
					ok.Add(1)
				default:
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%d %q %v", code, body, err))
				}
			}
		}()
		second := deployAndWait(t, c, "web", "")
		dropped = appSnapshots(t, c, "web")["app-web-"+second.ID]
		// Keep the load on past the switch and the old release's drain.
		for deadline := time.Now().Add(2 * time.Minute); sawV2.Load() < 50 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
		close(stop)
		wg.Wait()
		if second.Status != sdk.DeployLive {
			t.Fatalf("second deploy: %+v\n%s", second, second.Log)
		}
		if failed.Load() != 0 || sawV2.Load() == 0 {
			t.Fatalf("%d requests ok, %d failed (first: %v), %d saw v2", ok.Load(), failed.Load(), firstFailure.Load(), sawV2.Load())
		}
		t.Logf("%d requests across the deploy, none failed", ok.Load())
		d, err := c.GetDeploy(ctx, "web", first.ID)
		if err != nil || d.Status != sdk.DeploySuperseded {
			t.Fatalf("first deploy after the second: %+v %v, want superseded", d, err)
		}
	})

	t.Run("rollback serves the previous release, kept warm, at once", func(t *testing.T) {
		// The previous release drains, then runs on for the rollback
		// window (minutes), so a rollback needs no wake.
		var prev *sdk.Sandbox
		for _, sb := range mustList(t, c) {
			if sb.Metadata["deploy"] == first.ID && sb.Metadata["role"] == "release" {
				prev = sb
			}
		}
		if prev == nil || prev.State != "running" {
			t.Fatalf("the previous release is %+v, want running (kept warm for rollback)", prev)
		}
		start := time.Now()
		d, err := c.RollbackApp(ctx, "web", "")
		if err != nil {
			t.Fatalf("rollback: %v", err)
		}
		answered := time.Since(start)
		wantServes(t, "web", "static v1")
		t.Logf("rollback to the warm previous release: answered after %s, serving after %s",
			answered.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		t.Logf("server: %s", strings.Join(main.logLines("rolled back"), "\n"))
		if d.ID != first.ID || d.Status != sdk.DeployLive {
			t.Fatalf("rollback made %+v live, want %s", d, first.ID)
		}
		a, err := c.GetApp(ctx, "web")
		if err != nil || a.LiveDeployID != first.ID {
			t.Fatalf("app after rollback: %+v %v", a, err)
		}
	})

	t.Run("a failing build fails with its command and output; the live release serves", func(t *testing.T) {
		gs.push("static", "broken", map[string]string{"pandastack.json": `{"build": "echo token=$SECRET_TOKEN; echo compiling...; exit 3"}`})
		d := deployAndWait(t, c, "web", "broken")
		if d.Status != sdk.DeployFailed || !strings.Contains(d.Error, "exit 3") || !strings.Contains(d.Error, "status 3") {
			t.Fatalf("broken build: %+v", d)
		}
		logs, err := c.DeployLogs(ctx, "web", d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs, "compiling...") || !strings.Contains(logs, "token=[redacted]") || strings.Contains(logs, "s3cr3t-value-e2e") {
			t.Fatalf("log of the failed build lacks the output or shows the secret:\n%s", logs)
		}
		wantServes(t, "web", "static v1")
	})

	t.Run("an app that never listens fails its health check with the reason", func(t *testing.T) {
		gs.push("static", "mute", map[string]string{"pandastack.json": `{"start": "sleep 100000"}`})
		d := deployAndWait(t, c, "web", "mute")
		if d.Status != sdk.DeployFailed || !strings.Contains(d.Error, "health check failed") || !strings.Contains(d.Error, "nothing listens on port 8080") {
			t.Fatalf("mute app: %+v\n%s", d, d.Log)
		}
		wantServes(t, "web", "static v1")
	})

	t.Run("a git address on the server's own networks is refused", func(t *testing.T) {
		// Checked before any packet is sent: nothing listens at these.
		for _, u := range []string{"git://169.254.77.77/x.git", "http://127.0.0.2:9/x.git", "git@10.0.0.1:x.git"} {
			_, err := c.CreateApp(ctx, sdk.CreateAppParams{Name: "ssrf", GitURL: u})
			var e *sdk.APIError
			if !errors.As(err, &e) || e.Status != 403 || !strings.Contains(e.Message, "own networks") {
				t.Fatalf("create an app from %s: %v, want 403", u, err)
			}
		}
		if _, err := c.GetApp(ctx, "ssrf"); err == nil {
			t.Fatal("a refused app was created")
		}
	})

	t.Run("a missing branch and an unreachable repository fail with the reason", func(t *testing.T) {
		d := deployAndWait(t, c, "web", "no-such-branch")
		if d.Status != sdk.DeployFailed || !strings.Contains(d.Error, "no-such-branch") {
			t.Fatalf("missing branch: %+v", d)
		}
		if _, err := c.CreateApp(ctx, sdk.CreateAppParams{Name: "gone", GitURL: "git://127.0.0.1:1/none.git"}); err != nil {
			t.Fatal(err)
		}
		defer c.DeleteApp(ctx, "gone")
		d = deployAndWait(t, c, "gone", "")
		if d.Status != sdk.DeployFailed || !strings.Contains(d.Error, "clone git://127.0.0.1:1/none.git") {
			t.Fatalf("unreachable repository: %+v", d)
		}
	})

	t.Run("a plain Node app and a Python app deploy and serve", func(t *testing.T) {
		nodeURL := gs.push("node", "main", map[string]string{
			"package.json": `{"name": "hello", "scripts": {"start": "node server.js"}}`,
			"server.js":    `require("http").createServer((q, s) => s.end("node says hi " + process.version)).listen(process.env.PORT)`,
		})
		pyURL := gs.push("py", "main", map[string]string{
			"main.py": `import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"python says hi"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
http.server.ThreadingHTTPServer(("", int(os.environ["PORT"])), H).serve_forever()
`,
		})
		for _, app := range []struct{ name, url, framework, want string }{
			{"node", nodeURL, "node", "node says hi v"},
			{"py", pyURL, "python", "python says hi"},
		} {
			if _, err := c.CreateApp(ctx, sdk.CreateAppParams{Name: app.name, GitURL: app.url}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.DeleteApp(context.Background(), app.name) })
			d := deployAndWait(t, c, app.name, "")
			if d.Status != sdk.DeployLive || d.Framework != app.framework {
				t.Fatalf("%s: %+v\n%s", app.name, d, d.Log)
			}
			wantServes(t, app.name, app.want)
		}
	})

	t.Run("the GitHub webhook checks its signature, branch and delivery", func(t *testing.T) {
		hook := func(secret, delivery string, body string) (int, string) {
			return githubHook(t, web.WebhookURL, "push", secret, delivery, body)
		}
		push := func(branch string) string {
			return fmt.Sprintf(`{"ref": "refs/heads/%s", "after": "%s", "deleted": false}`, branch, strings.Repeat("a", 40))
		}
		if code, body := hook("whsec_wrong", "d-1", push("main")); code != http.StatusUnauthorized {
			t.Errorf("bad signature: %d %s, want 401", code, body)
		}
		if code, body := hook(web.WebhookSecret, "d-2", push("feature")); code != http.StatusOK || !strings.Contains(body, "ignored") {
			t.Errorf("push to another branch: %d %s, want 200 ignored", code, body)
		}
		deleted := fmt.Sprintf(`{"ref": "refs/heads/main", "after": "%s", "deleted": true}`, strings.Repeat("0", 40))
		if code, body := hook(web.WebhookSecret, "d-3", deleted); code != http.StatusOK || !strings.Contains(body, "deleted") {
			t.Errorf("branch deletion: %d %s, want 200 ignored", code, body)
		}
		before, _ := c.ListDeploys(ctx, "web")
		code, body := hook(web.WebhookSecret, "d-4", push("main"))
		if code != http.StatusAccepted || !strings.Contains(body, `"deploy"`) {
			t.Fatalf("push to main: %d %s, want 202 with a deploy", code, body)
		}
		if code, body := hook(web.WebhookSecret, "d-4", push("main")); code != http.StatusOK || !strings.Contains(body, "already received") {
			t.Errorf("replayed delivery: %d %s, want 200 ignored", code, body)
		}
		after, _ := c.ListDeploys(ctx, "web")
		if len(after) != len(before)+1 {
			t.Errorf("%d deploys before the pushes, %d after; want exactly one more", len(before), len(after))
		}
		d, err := c.WaitDeploy(ctx, "web", after[0].ID)
		if err != nil || d.Status != sdk.DeployLive || d.DeliveryID != "d-4" {
			t.Fatalf("webhook deploy: %+v %v", d, err)
		}
		wantServes(t, "web", "static v2")
	})

	t.Run("old releases go with their snapshots; the disk returns", func(t *testing.T) {
		// Releases so far: v1 (live again after the rollback), v2, and the
		// webhook's. Kept: the live one and the one live before it (v1).
		snaps := appSnapshots(t, c, "web")
		if len(snaps) != 2 || snaps["app-web-"+first.ID] == nil {
			t.Fatalf("snapshots of web: %v, want 2: the live release's and the first deploy's", snapNames(snaps))
		}
		for _, sn := range snaps {
			if _, err := os.Stat(filepath.Join(main.dataDir, "cow", "snapshots", sn.ID)); err != nil {
				t.Fatalf("kept snapshot %s has no files: %v", sn.Name, err)
			}
		}
		if dropped == nil {
			t.Fatal("the second deploy's snapshot was not seen")
		}
		if _, err := os.Stat(filepath.Join(main.dataDir, "cow", "snapshots", dropped.ID)); !os.IsNotExist(err) {
			t.Fatalf("the dropped release's snapshot %s is still on disk: %v", dropped.Name, err)
		}
		t.Logf("dropped release snapshot %s (%d MiB apparent size) is gone from the disk", dropped.Name, dropped.SizeBytes>>20)
	})

	t.Run("git push to the app's own remote deploys; idle, it scales to zero", func(t *testing.T) {
		testGitPushAndScaleToZero(t, c, newKey(t, "team-apps"), newKey(t, "team-apps-other"))
	})

	t.Run("delete frees the route, machines and snapshots", func(t *testing.T) {
		if err := c.DeleteApp(ctx, "web"); err != nil {
			t.Fatal(err)
		}
		if code, _, _ := appGet(ctx, "web", "/"); code == http.StatusOK {
			t.Errorf("the deleted app still serves")
		}
		if _, err := c.GetApp(ctx, "web"); errCode(err) != "not_found" {
			t.Errorf("GET after delete: %v", err)
		}
		for _, sb := range mustList(t, c) {
			if sb.Metadata["app"] == "web" {
				t.Errorf("machine %s of the deleted app is %s", sb.ID, sb.State)
			}
		}
		sns, err := c.ListSnapshots(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sn := range sns {
			if strings.HasPrefix(sn.Name, "app-web-") {
				t.Errorf("snapshot %s of the deleted app is left", sn.Name)
			}
		}
	})
}

// errCode is an API error's code ("" for none).
func errCode(err error) string {
	var ae *sdk.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// mustList lists the team's live sandboxes.
func mustList(t *testing.T, c *sdk.Client) []*sdk.Sandbox {
	t.Helper()
	sbs, err := c.ListSandboxes(context.Background(), sdk.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	return sbs
}

// appSnapshots is app's release snapshots by name.
func appSnapshots(t *testing.T, c *sdk.Client, app string) map[string]*sdk.SnapshotInfo {
	t.Helper()
	sns, err := c.ListSnapshots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*sdk.SnapshotInfo{}
	for i := range sns {
		if strings.HasPrefix(sns[i].Name, "app-"+app+"-") {
			out[sns[i].Name] = &sns[i]
		}
	}
	return out
}

func snapNames(m map[string]*sdk.SnapshotInfo) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	return out
}
