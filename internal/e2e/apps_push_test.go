package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// counterApp is a Python standard-library app that counts the requests
// to / in its memory (its health path does not count), so a request
// after a wake shows whether the memory survived.
const counterApp = `import http.server, os
n = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global n
        if self.path == "/":
            n += 1
        body = ("pushed v1 count %d" % n).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("", int(os.environ["PORT"])), H).serve_forever()
`

// gitPush pushes branch of the working copy dir to remote and returns
// git's output (the server's "remote:" lines included).
func gitPush(dir, remote, branch string) (string, error) {
	cmd := exec.Command("git", "push", remote, branch)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=/bin/false")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// remoteWithKey is the app's git remote on the shared server with key as
// the basic-auth password.
func remoteWithKey(a *sdk.App, key string) string {
	return strings.Replace(main.url, "http://", "http://pandastack:"+key+"@", 1) + a.GitRemote
}

var pushedDeployRE = regexp.MustCompile(`remote: pandastack: deploy (dep_[0-9a-z]+) of main queued`)

// testGitPushAndScaleToZero: an app with no git_url is deployed by a real
// `git push` to its own remote on the API port (the API key as the
// password); a wrong key and another team's key are refused and deploy
// nothing. The app has auto-hibernate set: idle, its release hibernates;
// the next request wakes it and is answered, with the app's memory
// intact (its request counter goes on), and the release runs again.
func testGitPushAndScaleToZero(t *testing.T, c *sdk.Client, key, otherKey string) {
	ctx := context.Background()
	// The CLI: an app with no git URL, and its remote with the key.
	if out, errOut, code := cli(t, key, "", "app", "create", "--health-path", "/health", "--health-timeout", "30",
		"--auto-hibernate", "3", "pushed"); code != 0 {
		t.Fatalf("app create with no git URL: %d %s %s", code, out, errOut)
	}
	t.Cleanup(func() { _ = c.DeleteApp(context.Background(), "pushed") })
	a, err := c.GetApp(ctx, "pushed")
	if err != nil || a.GitRemote != "/git/pushed.git" || a.GitURL != "" {
		t.Fatalf("app: %+v %v, want git_remote /git/pushed.git", a, err)
	}
	out, errOut, code := cli(t, key, "", "app", "remote", "pushed")
	remote := strings.TrimSpace(out)
	if code != 0 || remote != remoteWithKey(a, key) {
		t.Fatalf("app remote: %d %q %s, want %q", code, remote, errOut, remoteWithKey(a, key))
	}
	work := t.TempDir()
	git(t, work, "init", "--quiet", "--initial-branch=main", ".")
	if err := os.WriteFile(filepath.Join(work, "main.py"), []byte(counterApp), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, work, "add", "-A")
	git(t, work, "commit", "--quiet", "-m", "v1")

	t.Run("a wrong key and another team's key are refused", func(t *testing.T) {
		out, err := gitPush(work, remoteWithKey(a, "pds_"+strings.Repeat("0", 40)), "main")
		if err == nil || !strings.Contains(out, "Authentication failed") {
			t.Errorf("push with a wrong key: %v\n%s", err, out)
		}
		out, err = gitPush(work, remoteWithKey(a, otherKey), "main")
		if err == nil || !strings.Contains(out, "not found") {
			t.Errorf("push with another team's key: %v\n%s", err, out)
		}
		if ds, err := c.ListDeploys(ctx, "pushed"); err != nil || len(ds) != 0 {
			t.Errorf("refused pushes queued deploys: %+v %v", ds, err)
		}
	})

	out, err = gitPush(work, remote, "main")
	if err != nil {
		t.Fatalf("git push: %v\n%s", err, out)
	}
	m := pushedDeployRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the push does not name its deploy:\n%s", out)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	d, err := c.WaitDeploy(wctx, "pushed", m[1])
	if err != nil || d.Status != sdk.DeployLive || d.Framework != "python" {
		t.Fatalf("deploy of the push: %+v %v\n%s", d, err, d.Log)
	}
	wantServes(t, "pushed", "pushed v1 count 1")

	release := func() *sdk.Sandbox {
		for _, sb := range mustList(t, c) {
			if sb.Metadata["app"] == "pushed" && sb.Metadata["role"] == "release" && sb.Metadata["deploy"] == d.ID {
				return sb
			}
		}
		t.Fatalf("no release machine of deploy %s", d.ID)
		return nil
	}
	t.Run("idle, it hibernates; the next request wakes it with its memory", func(t *testing.T) {
		eventually(t, 2*time.Minute, "the idle release hibernates", func() bool { return release().State == "hibernated" })
		start := time.Now()
		code, body, err := appGet(ctx, "pushed", "/")
		t.Logf("first request after hibernation answered after %s", time.Since(start).Round(time.Millisecond))
		if err != nil || code != http.StatusOK || body != "pushed v1 count 2" {
			t.Fatalf("request to the hibernated app: %d %q %v; want 200 \"pushed v1 count 2\"", code, body, err)
		}
		if st := release().State; st != "running" {
			t.Fatalf("after the request the release is %s, want running", st)
		}
		t.Logf("server: %s", strings.Join(main.logLines("sandbox woken"), "\n"))
	})
	t.Run("a rollback wakes the hibernated previous release", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(work, "main.py"), []byte(strings.Replace(counterApp, "pushed v1", "pushed v2", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, work, "commit", "--quiet", "-am", "v2")
		out, err := gitPush(work, remoteWithKey(a, key), "main")
		m := pushedDeployRE.FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("push v2: %v\n%s", err, out)
		}
		if d2, err := c.WaitDeploy(wctx, "pushed", m[1]); err != nil || d2.Status != sdk.DeployLive {
			t.Fatalf("deploy of v2: %+v %v", d2, err)
		}
		wantServes(t, "pushed", "pushed v2 count 1")
		// The app scales to zero, so its previous release hibernates
		// when idle, rollback window or not.
		eventually(t, 2*time.Minute, "the previous release hibernates", func() bool { return release().State == "hibernated" })
		start := time.Now()
		rd, err := c.RollbackApp(ctx, "pushed", "")
		if err != nil || rd.ID != d.ID {
			t.Fatalf("rollback: %+v %v, want deploy %s live", rd, err, d.ID)
		}
		answered := time.Since(start)
		wantServes(t, "pushed", "pushed v1 count 3")
		t.Logf("rollback to the hibernated previous release: answered after %s, serving after %s",
			answered.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		t.Logf("server: %s", strings.Join(append(main.logLines("sandbox woken"), main.logLines("rolled back")...), "\n"))
	})
	t.Run("a push to another branch deploys nothing", func(t *testing.T) {
		out, err := gitPush(work, remoteWithKey(a, key), "main:parked")
		if err != nil || !strings.Contains(out, "not the app's branch") {
			t.Fatalf("push to another branch: %v\n%s", err, out)
		}
		if ds, _ := c.ListDeploys(ctx, "pushed"); len(ds) != 2 {
			t.Errorf("%d deploys after a push to another branch, want 2", len(ds))
		}
	})
	if err := c.DeleteApp(ctx, "pushed"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if out, err := gitPush(work, remoteWithKey(a, key), "main"); err == nil {
		t.Errorf("push to a deleted app succeeded:\n%s", out)
	}
}

// newKey makes an API key of team on the shared server.
func newKey(t *testing.T, team string) string {
	t.Helper()
	k, err := main.client(main.admin).CreateKey(context.Background(), team, fmt.Sprintf("e2e-git-%d", time.Now().UnixNano()))
	if err != nil {
		t.Fatalf("create key for %s: %v", team, err)
	}
	return k.Key
}

// logLines is the lines of the server's log that contain substr (the
// newest 5), for a test to show what the server measured.
func (s *serverProc) logLines(substr string) []string {
	b, err := os.ReadFile(s.log)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out[max(0, len(out)-5):]
}
