package apps

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
)

// The git remote: every app has a repository PandaStack serves itself,
// at GitRemotePath, so `git push pandastack main` deploys with no GitHub
// and no git server of the user's own. The server's git does the work —
// `git http-backend` (smart HTTP) through net/http/cgi — in a bare
// repository under RepoDir, named by the app's id, made on first use and
// removed with the app.
//
// A push to the app's branch queues a deploy of that branch from this
// repository once git has updated the ref (the push answers then; the
// build runs after). Pushes to other branches are accepted and stored but
// build nothing, so a work branch can be parked here; deleting the app's
// branch builds nothing either. git prints what a push did on the
// client's terminal ("remote: pandastack: deploy dep_… queued …"), from a
// post-receive hook the server writes into the repository.

// GitServices are the smart-HTTP paths under a repository (after
// /git/NAME.git/).
var gitServices = map[string]bool{"info/refs": true, "git-upload-pack": true, "git-receive-pack": true}

// gitBodySlack is what a push's body may hold besides its pack (the ref
// updates, in pkt-lines).
const gitBodySlack = 1 << 20

// gitTimeout bounds one smart-HTTP exchange: net/http/cgi does not end
// its child when the request ends, so coreutils' timeout does.
const gitTimeout = 15 * time.Minute

// GitRemotePath is where an app's git remote is served, relative to the
// API's base URL.
func GitRemotePath(name string) string { return "/git/" + name + ".git" }

// repoDir is the bare repository an app's pushes land in.
func (s *Service) repoDir(a App) string { return filepath.Join(s.cfg.RepoDir, a.ID+".git") }

// hasRepo reports whether the app's repository has been made (pushed to
// or fetched from).
func (s *Service) hasRepo(a App) bool {
	_, err := os.Stat(filepath.Join(s.repoDir(a), "HEAD"))
	return err == nil
}

// gitEnv is the environment of every git the remote runs: no system or
// user configuration, no prompts.
func (s *Service) gitEnv() []string {
	return []string{"GIT_CONFIG_NOSYSTEM=1", "HOME=" + s.cfg.RepoDir, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C"}
}

// postReceive is the hook that tells the pusher what the push deploys. It
// only prints; the server decides from the refs themselves.
const postReceive = `#!/bin/sh
# Written by PandaStack: says on the pusher's terminal what a push deploys.
zero=0000000000000000000000000000000000000000
while read -r old new ref; do
	case "$ref" in
	"refs/heads/$PANDASTACK_BRANCH")
		if [ "$new" = "$zero" ]; then
			echo "pandastack: branch $PANDASTACK_BRANCH deleted; nothing deployed"
		else
			echo "pandastack: deploy $PANDASTACK_DEPLOY of $PANDASTACK_BRANCH queued"
			echo "pandastack: watch it: pandastack app logs $PANDASTACK_APP $PANDASTACK_DEPLOY  (GET /v1/apps/$PANDASTACK_APP/deploys/$PANDASTACK_DEPLOY)"
		fi ;;
	refs/heads/*)
		echo "pandastack: ${ref#refs/heads/} is not the app's branch ($PANDASTACK_BRANCH): stored, nothing deployed" ;;
	esac
done
`

// ensureRepo makes the app's bare repository unless it exists: made in a
// temporary directory and renamed into place, so a half-made one is never
// served.
func (s *Service) ensureRepo(ctx context.Context, a App) (string, error) {
	dir := s.repoDir(a)
	if s.hasRepo(a) {
		return dir, nil
	}
	if err := os.MkdirAll(s.cfg.RepoDir, 0o700); err != nil {
		return "", fmt.Errorf("make git repository dir: %w", err)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	tmp := dir + ".new-" + hex.EncodeToString(suffix)
	defer os.RemoveAll(tmp)
	if err := s.git(ctx, "", "init", "--quiet", "--bare", "--initial-branch="+a.Branch, tmp); err != nil {
		return "", fmt.Errorf("make git repository of app %s: %w", a.Name, err)
	}
	for _, kv := range [][2]string{
		{"http.receivepack", "true"},
		{"http.uploadpack", "true"},
		// A push's pack is bounded by the same limit as a clone.
		{"receive.maxInputSize", strconv.FormatInt(s.cfg.MaxRepoBytes, 10)},
		{"receive.fsckObjects", "true"},
		{"core.logAllRefUpdates", "false"},
	} {
		if err := s.git(ctx, tmp, "config", kv[0], kv[1]); err != nil {
			return "", fmt.Errorf("configure git repository of app %s: %w", a.Name, err)
		}
	}
	hooks := filepath.Join(tmp, "hooks")
	_ = os.RemoveAll(hooks)
	if err := os.MkdirAll(hooks, 0o700); err != nil {
		return "", fmt.Errorf("make git hooks dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(hooks, "post-receive"), []byte(postReceive), 0o700); err != nil {
		return "", fmt.Errorf("write git hook: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if s.hasRepo(a) {
			return dir, nil // another request made it first
		}
		return "", fmt.Errorf("make git repository of app %s: %w", a.Name, err)
	}
	return dir, nil
}

// git runs the server's git in dir ("" for RepoDir).
func (s *Service) git(ctx context.Context, dir string, args ...string) error {
	if dir == "" {
		dir = s.cfg.RepoDir
	}
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir, cmd.Env = dir, append(s.gitEnv(), "PATH="+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("git %s: %w: %s", args[0], err, oneLine(strings.TrimSpace(string(out))))
	}
	return nil
}

// head is the commit a branch of repository dir points at ("" when none).
func (s *Service) head(ctx context.Context, dir, branch string) string {
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "--verify", "--quiet", "refs/heads/"+branch+"^{commit}")
	cmd.Dir, cmd.Env = dir, append(s.gitEnv(), "PATH="+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// ServeGit serves teamID's app name's git remote over smart HTTP: service
// is what follows NAME.git/ in the path (info/refs, git-upload-pack or
// git-receive-pack). The caller has authenticated teamID. An app of
// another team is ENotFound, like one that does not exist. A push's body
// is bounded by MaxRepoBytes. When it moved the app's branch, a deploy of
// that branch from this repository is queued once git has answered.
// Errors are returned before anything is written.
func (s *Service) ServeGit(w http.ResponseWriter, r *http.Request, teamID, name, service string) error {
	ctx := r.Context()
	if !gitServices[service] {
		return pandastack.Errorf(pandastack.ENotFound, "no git service %q (this is a smart-HTTP git remote)", service)
	}
	a, err := s.cfg.Store.GetApp(ctx, teamID, name)
	if err != nil {
		return err
	}
	dir, err := s.ensureRepo(ctx, a)
	if err != nil {
		return err
	}
	push := service == "git-receive-pack"
	before, depID := "", ""
	if push {
		// Each push's pack is bounded by receive.maxInputSize; this bounds
		// what pushes add up to.
		if size, err := dirSize(dir); err == nil && size > s.cfg.MaxRepoBytes {
			return pandastack.Errorf(pandastack.ETooLarge, "app %s's git repository holds %d MiB, over the limit of %d MiB: it takes no more pushes (delete and re-create the app to start over)",
				a.Name, size>>20, s.cfg.MaxRepoBytes>>20)
		}
		if r.ContentLength > s.cfg.MaxRepoBytes+gitBodySlack {
			return pandastack.Errorf(pandastack.ETooLarge, "the push is %d MiB, over the repository limit of %d MiB", r.ContentLength>>20, s.cfg.MaxRepoBytes>>20)
		}
		// The repository counts in the team's max_disk_gib (DiskUsage):
		// a team at its limit takes no more pushes.
		if s.cfg.Quotas != nil {
			release, err := s.cfg.Quotas.Reserve(ctx, teamID, quotas.Usage{DiskMiB: int(max(r.ContentLength, 1)+1<<20-1) >> 20})
			if err != nil {
				return err
			}
			defer release()
		}
		before = s.head(ctx, dir, a.Branch)
		depID = pandastack.NewID("dep_")
		// git's receive.maxInputSize refuses a pack over the limit with
		// the reason; this only stops a body that is not git's.
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxRepoBytes+gitBodySlack)
	}
	// git http-backend finds the repository from PATH_INFO under
	// GIT_PROJECT_ROOT: the app's id, never the name from the URL.
	req := r.Clone(ctx)
	req.URL.Path = "/" + a.ID + ".git/" + service
	// CGI passes every header on as HTTP_*: not the key.
	req.Header.Del("Authorization")
	req.Header.Del("X-API-Key")
	var stderr bytes.Buffer
	h := &cgi.Handler{
		Path: timeoutPath(), Args: []string{"--kill-after=10s", strconv.Itoa(int(gitTimeout / time.Second)), gitPath(), "http-backend"},
		Dir: s.cfg.RepoDir,
		Env: append(s.gitEnv(), "GIT_PROJECT_ROOT="+s.cfg.RepoDir, "GIT_HTTP_EXPORT_ALL=1",
			"REMOTE_USER="+teamID, "PANDASTACK_APP="+a.Name, "PANDASTACK_BRANCH="+a.Branch, "PANDASTACK_DEPLOY="+depID),
		InheritEnv: []string{"PATH"},
		Stderr:     &limitedWriter{w: &stderr, n: 64 << 10},
		Logger:     log.New(io.Discard, "", 0),
	}
	h.ServeHTTP(w, req)
	if stderr.Len() > 0 {
		s.log.Debug("git http-backend", "app", a.Name, "service", service, "stderr", oneLine(stderr.String()))
	}
	if !push {
		return nil
	}
	after := s.head(context.WithoutCancel(ctx), dir, a.Branch)
	if after == "" || after == before {
		return nil
	}
	d, err := s.startDeployAs(context.WithoutCancel(ctx), a, a.Branch, "", depID, 0)
	if err != nil {
		s.log.Error("queue deploy of a push", "app", a.Name, "err", err)
		return nil
	}
	s.log.Info("push queued a deploy", "app", a.Name, "deploy", d.ID, "commit", after)
	return nil
}

// gitPath is the git binary (found on PATH; "git" when not, so the CGI
// fails with the reason).
func gitPath() string {
	if p, err := exec.LookPath("git"); err == nil {
		return p
	}
	return "git"
}

// timeoutPath is coreutils' timeout.
func timeoutPath() string {
	if p, err := exec.LookPath("timeout"); err == nil {
		return p
	}
	return "/usr/bin/timeout"
}

// removeRepo deletes the app's repository.
func (s *Service) removeRepo(a App) error {
	if s.cfg.RepoDir == "" {
		return nil
	}
	if err := os.RemoveAll(s.repoDir(a)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove git repository of app %s: %w", a.Name, err)
	}
	return nil
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
