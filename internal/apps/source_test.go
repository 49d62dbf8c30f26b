package apps

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repo makes a git repository with files on branch main.
func repo(t *testing.T, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed (scripts/setup installs it)")
	}
	dir := t.TempDir()
	run := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "--quiet", "--initial-branch=main")
	for p, body := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644)
	}
	run("add", "-A")
	run("commit", "--quiet", "-m", "x")
	return dir
}

// clone fetches a branch and says which commit; the tarball has the
// files and no .git; a missing branch and an oversize checkout fail with
// the reason.
func TestClone(t *testing.T) {
	src := repo(t, map[string]string{"index.html": "hi", "sub/a.txt": strings.Repeat("a", 4096)})
	ctx := context.Background()
	work := t.TempDir()
	var log bytes.Buffer
	commit, err := clone(ctx, src, "main", filepath.Join(work, "one"), 1<<20, nil, &log)
	if err != nil || len(commit) != 40 {
		t.Fatalf("clone: %q %v", commit, err)
	}
	var tb bytes.Buffer
	if err := tarDir(filepath.Join(work, "one"), &tb); err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(&tb)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if got := strings.Join(names, " "); got != "index.html sub sub/a.txt" {
		t.Errorf("tarball holds %q", got)
	}
	if _, err := clone(ctx, src, "nope", filepath.Join(work, "two"), 1<<20, nil, &log); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing branch: %v", err)
	}
	if _, err := clone(ctx, src, "main", filepath.Join(work, "three"), 1024, nil, &log); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("oversize: %v", err)
	}
	if _, err := clone(ctx, "ext::sh -c touch% /tmp/pwned", "main", filepath.Join(work, "four"), 1<<20, nil, &log); err == nil {
		t.Errorf("ext:: transport was allowed")
	}
}
