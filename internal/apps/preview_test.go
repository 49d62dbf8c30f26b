package apps

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/secrets"
)

// A pull request's head is fetched from refs/pull/N/head, a ref that is
// no branch (as GitHub serves it); a missing one fails with its name.
func TestClonePullRequestRef(t *testing.T) {
	src := repo(t, map[string]string{"index.html": "main"})
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+src, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("checkout", "--quiet", "-b", "feature")
	if err := os.WriteFile(filepath.Join(src, "index.html"), []byte("pull request"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "--quiet", "-am", "pr")
	head := git("rev-parse", "HEAD")
	git("update-ref", "refs/pull/7/head", head)
	git("checkout", "--quiet", "main")
	git("branch", "--quiet", "-D", "feature")

	work := t.TempDir()
	var log bytes.Buffer
	commit, err := clone(t.Context(), src, previewRef(7), filepath.Join(work, "pr"), 1<<20, nil, &log)
	if err != nil || commit != head {
		t.Fatalf("clone refs/pull/7/head: %q %v, want %s", commit, err, head)
	}
	if b, err := os.ReadFile(filepath.Join(work, "pr", "index.html")); err != nil || string(b) != "pull request" {
		t.Fatalf("checked out %q %v", b, err)
	}
	if _, err := clone(t.Context(), src, previewRef(8), filepath.Join(work, "none"), 1<<20, nil, &log); err == nil || !strings.Contains(err.Error(), "refs/pull/8/head") {
		t.Fatalf("a missing pull request ref: %v", err)
	}
}

// hookStore holds one app and the deliveries it received; a pull request
// that gets as far as a preview's records fails the test.
type hookStore struct {
	Store
	app  App
	seen map[string]bool
}

func (h *hookStore) GetAppByID(_ context.Context, id string) (App, error) {
	if id != h.app.ID {
		return App{}, pandastack.Errorf(pandastack.ENotFound, "app %s not found", id)
	}
	return h.app, nil
}

func (h *hookStore) RecordDelivery(_ context.Context, _, delivery string) error {
	if h.seen[delivery] {
		return pandastack.Errorf(pandastack.EConflict, "delivery %s was already received", delivery)
	}
	h.seen[delivery] = true
	return nil
}

func (h *hookStore) GetPreview(context.Context, string, int) (Preview, error) {
	return Preview{}, pandastack.Errorf(pandastack.ENotFound, "no preview")
}

// pull_request deliveries that build nothing: bad signatures, actions that
// are not handled, pull requests into another branch, a close with no
// preview, replays, and payloads without a number.
func TestPullRequestHookBuildsNothing(t *testing.T) {
	box, err := secrets.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	a := App{ID: "app_1", Name: "web", GitURL: "https://example.com/r.git", Branch: "main"}
	if a.SecretSealed, err = box.Seal("whsec_test", "app-webhook:"+a.ID); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Store: &hookStore{app: a, seen: map[string]bool{}}, Secrets: box})
	sign := func(secret, body string) string {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(body))
		return "sha256=" + hex.EncodeToString(m.Sum(nil))
	}
	pr := func(action, base string) string {
		return `{"action": "` + action + `", "number": 7, "pull_request": {"head": {"ref": "feature", "sha": "abc"}, "base": {"ref": "` + base + `"}}}`
	}
	for _, tc := range []struct {
		name, delivery, body, secret string
		code, ignored                string
	}{
		{"bad signature", "d-0", pr("opened", "main"), "whsec_wrong", pandastack.EUnauthorized, ""},
		{"labeled", "d-1", pr("labeled", "main"), "whsec_test", "", "action labeled is not handled"},
		{"into another branch", "d-2", pr("opened", "release"), "whsec_test", "", "not the app's branch"},
		{"closed with no preview", "d-3", pr("closed", "main"), "whsec_test", "", "has no preview"},
		{"replay", "d-2", pr("opened", "main"), "whsec_test", "", "already received"},
		{"from a fork", "d-6", `{"action": "opened", "number": 7, "pull_request": {"head": {"ref": "main", "repo": {"full_name": "mallory/r"}},
			"base": {"ref": "main", "repo": {"full_name": "acme/r"}}}}`, "whsec_test", "", "from the fork mallory/r"},
		{"no number", "d-4", `{"action": "opened"}`, "whsec_test", pandastack.EInvalid, ""},
		{"not JSON", "d-5", `{`, "whsec_test", pandastack.EInvalid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.GitHubHook(t.Context(), a.ID, "pull_request", tc.delivery, sign(tc.secret, tc.body), []byte(tc.body))
			if tc.code != "" {
				if pandastack.ErrorCode(err) != tc.code {
					t.Fatalf("got %+v %v, want %s", res, err, tc.code)
				}
				return
			}
			if err != nil || res.Deploy != nil || !strings.Contains(res.Ignored, tc.ignored) {
				t.Fatalf("got %+v %v, want ignored: %s", res, err, tc.ignored)
			}
		})
	}
}
