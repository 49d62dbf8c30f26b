package apps_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/apps"
	"github.com/pandastack/pandastack/internal/quotas"
	"github.com/pandastack/pandastack/internal/router"
	"github.com/pandastack/pandastack/internal/sandboxes"
	"github.com/pandastack/pandastack/internal/secrets"
	"github.com/pandastack/pandastack/internal/store/sqlite"
)

// noMachines is a stand-in for the sandbox service that refuses every
// machine: a deploy stops right after its clone, which is all these tests
// look at (the e2e suite builds and serves for real).
type noMachines struct{}

func (noMachines) Create(context.Context, string, sandboxes.CreateParams) (pandastack.Sandbox, error) {
	return pandastack.Sandbox{}, pandastack.Errorf(pandastack.EUnavailable, "no machines in this unit test")
}

// gitCmd runs the git CLI in dir and returns its combined output.
func gitCmd(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@localhost", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@localhost", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A real `git push` to an app's remote stores the commit and queues a
// deploy of the app's branch that clones exactly it; the push prints the
// deploy id; a push to another branch is stored and deploys nothing;
// another team's app is 404 and queues nothing; delete removes the
// repository.
func TestGitRemotePushDeploysTheAppBranch(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ctx := context.Background()
	work := t.TempDir()
	svc, remote := newGitRemote(t, work, 0)
	a, err := svc.Create(ctx, "team_a", apps.CreateParams{Name: "web"})
	if err != nil {
		t.Fatalf("create an app with no git_url: %v", err)
	}
	if a.GitRemote != "/git/web.git" {
		t.Fatalf("git_remote %q", a.GitRemote)
	}
	if _, err := svc.Deploy(ctx, "team_a", "web", ""); pandastack.ErrorCode(err) != pandastack.EConflict {
		t.Fatalf("deploy before any push: %v, want conflict", err)
	}
	remote += "/git/web.git"

	src, commit := newWorkingCopy(t, work, []byte("<h1>pushed</h1>"))

	out, err := gitCmd(t, src, "push", remote, "main")
	if err != nil {
		t.Fatalf("git push: %v\n%s", err, out)
	}
	ds, err := svc.ListDeploys(ctx, "team_a", "web")
	if err != nil || len(ds) != 1 {
		t.Fatalf("deploys after the push: %+v %v, want one\n%s", ds, err, out)
	}
	if !strings.Contains(out, "remote: pandastack: deploy "+ds[0].ID+" of main queued") {
		t.Errorf("the push does not print the deploy id %s:\n%s", ds[0].ID, out)
	}
	// The deploy clones the pushed commit, then finds no machine.
	var d apps.Deploy
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if d, err = svc.GetDeploy(ctx, "team_a", "web", ds[0].ID); err != nil {
			t.Fatal(err)
		}
		if d.Status == apps.StatusFailed || time.Now().After(deadline) {
			break
		}
	}
	if d.Commit != commit || d.Ref != "main" || !strings.Contains(d.Error, "no machines in this unit test") {
		t.Fatalf("deploy of the push: %+v\n%s", d, d.Log)
	}
	if strings.Contains(d.Log, work) {
		t.Errorf("the deploy log shows the repository's place on the server:\n%s", d.Log)
	}

	out, err = gitCmd(t, src, "push", remote, "main:feature")
	if err != nil || !strings.Contains(out, "not the app's branch") {
		t.Fatalf("push to another branch: %v\n%s", err, out)
	}
	if ds, _ := svc.ListDeploys(ctx, "team_a", "web"); len(ds) != 1 {
		t.Errorf("a push to another branch queued a deploy: %d deploys", len(ds))
	}
	if got, err := gitCmd(t, work, "ls-remote", remote); err != nil || !strings.Contains(got, commit+"\trefs/heads/feature") {
		t.Errorf("ls-remote: %v\n%s", err, got)
	}

	other := strings.Replace(remote, "team_a:", "team_b:", 1)
	if out, err := gitCmd(t, src, "push", other, "main:other"); err == nil || !strings.Contains(out, "404") && !strings.Contains(out, "not found") {
		t.Fatalf("another team's push: %v\n%s", err, out)
	}
	if ds, _ := svc.ListDeploys(ctx, "team_a", "web"); len(ds) != 1 {
		t.Errorf("another team's push queued a deploy")
	}

	if err := svc.Delete(ctx, "team_a", "web"); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(work, "apps", "repos", "*")); len(left) != 0 {
		t.Errorf("delete left %v", left)
	}
}

// newGitRemote is an apps.Service with no machines whose git remotes an
// HTTP server serves (the basic-auth user is the team: the API's
// authentication is not under test here); it returns the server's URL
// with team_a's credentials.
func newGitRemote(t *testing.T, work string, maxRepoBytes int64) (*apps.Service, string) {
	t.Helper()
	return newGitRemoteWith(t, work, func(c *apps.Config) { c.MaxRepoBytes = maxRepoBytes })
}

// newGitRemoteWith is newGitRemote with its Config changed by set.
func newGitRemoteWith(t *testing.T, work string, set func(*apps.Config)) (*apps.Service, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	st, err := sqlite.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	box, err := secrets.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	cfg := apps.Config{Store: st, Routes: router.NewTable(), Machines: noMachines{}, Secrets: box, WorkDir: filepath.Join(work, "apps")}
	set(&cfg)
	svc := apps.New(cfg)
	t.Cleanup(svc.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		team, _, _ := r.BasicAuth()
		if team == "" {
			w.Header().Set("WWW-Authenticate", `Basic realm="t"`)
			http.Error(w, "who", http.StatusUnauthorized)
			return
		}
		rest := strings.TrimPrefix(r.URL.Path, "/git/")
		repo, service, _ := strings.Cut(rest, "/")
		if err := svc.ServeGit(w, r, team, strings.TrimSuffix(repo, ".git"), service); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return svc, strings.Replace(srv.URL, "http://", "http://team_a:x@", 1)
}

// newWorkingCopy is a repository under work with one commit of
// index.html; it returns its path and the commit.
func newWorkingCopy(t *testing.T, work string, index []byte) (string, string) {
	t.Helper()
	src := filepath.Join(work, "src")
	if out, err := gitCmd(t, work, "init", "--quiet", "--initial-branch=main", src); err != nil {
		t.Fatal(out)
	}
	if err := os.WriteFile(filepath.Join(src, "index.html"), index, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "--quiet", "-m", "one"}} {
		if out, err := gitCmd(t, src, args...); err != nil {
			t.Fatal(out)
		}
	}
	commit, _ := gitCmd(t, src, "rev-parse", "HEAD")
	return src, strings.TrimSpace(commit)
}

// A push whose pack is over the repository size limit is refused: no
// ref moves and nothing deploys.
func TestGitRemoteRefusesAPushOverTheLimit(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	svc, remote := newGitRemote(t, work, 64<<10)
	if _, err := svc.Create(ctx, "team_a", apps.CreateParams{Name: "big"}); err != nil {
		t.Fatal(err)
	}
	noise := make([]byte, 256<<10)
	_, _ = rand.Read(noise) // incompressible
	src, _ := newWorkingCopy(t, work, noise)
	out, err := gitCmd(t, src, "push", remote+"/git/big.git", "main")
	if err == nil {
		t.Fatalf("a 256 KiB push to a 64 KiB repository was accepted:\n%s", out)
	}
	if got, _ := gitCmd(t, work, "ls-remote", remote+"/git/big.git"); strings.Contains(got, "refs/heads/main") {
		t.Errorf("the refused push moved a ref:\n%s", got)
	}
	if ds, _ := svc.ListDeploys(ctx, "team_a", "big"); len(ds) != 0 {
		t.Errorf("the refused push queued %d deploys", len(ds))
	}
}

// fullDisk is a stand-in for the quotas service: every team is at its
// max_disk_gib (the quota arithmetic is internal/quotas' to test).
type fullDisk struct{}

func (fullDisk) Reserve(context.Context, string, quotas.Usage) (func(), error) {
	return nil, pandastack.Errorf(pandastack.EQuota, "max_disk_gib is 1; team holds 1.0 GiB")
}

// A team at its max_disk_gib (git repositories count in it) takes no
// more pushes: the push fails, no ref moves and nothing deploys.
func TestGitRemoteRefusesAPushOverTheDiskQuota(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	svc, remote := newGitRemoteWith(t, work, func(c *apps.Config) { c.Quotas = fullDisk{} })
	if _, err := svc.Create(ctx, "team_a", apps.CreateParams{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	src, _ := newWorkingCopy(t, work, []byte("<h1>hi</h1>"))
	out, err := gitCmd(t, src, "push", remote+"/git/web.git", "main")
	if err == nil {
		t.Fatalf("a push past the disk quota was accepted:\n%s", out)
	}
	if got, _ := gitCmd(t, work, "ls-remote", remote+"/git/web.git"); strings.Contains(got, "refs/heads/main") {
		t.Errorf("the refused push moved a ref:\n%s", got)
	}
	if ds, _ := svc.ListDeploys(ctx, "team_a", "web"); len(ds) != 0 {
		t.Errorf("the refused push queued %d deploys", len(ds))
	}
}
