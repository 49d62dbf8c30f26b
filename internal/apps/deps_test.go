package apps

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/apps/detect"
)

// appsStore lists the apps it holds, by team.
type appsStore struct {
	Store
	apps []App
}

func (m appsStore) ListApps(_ context.Context, teamID string) ([]App, error) {
	var out []App
	for _, a := range m.apps {
		if a.TeamID == teamID {
			out = append(out, a)
		}
	}
	return out, nil
}

// Only an install that follows a lockfile is cached, under a key that
// changes with the lockfile's bytes.
func TestDepsKeyFollowsTheLockfile(t *testing.T) {
	s := New(Config{WorkDir: t.TempDir()})
	src := t.TempDir()
	npm := detect.Plan{Framework: detect.Node, Install: "npm ci"}
	if _, ok := s.depsFor(src, npm); ok {
		t.Fatal("cacheable without a lockfile")
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("package-lock.json", `{"lockfileVersion": 3}`)
	d1, ok := s.depsFor(src, npm)
	if !ok || d1.lockfile != "package-lock.json" {
		t.Fatalf("with package-lock.json: %+v %v", d1, ok)
	}
	if again, _ := s.depsFor(src, npm); again.key != d1.key {
		t.Fatal("the same lockfile keyed twice differently")
	}
	write("package.json", `{"version": "2.0.0"}`)
	if again, _ := s.depsFor(src, npm); again.key != d1.key {
		t.Fatal("a package.json change outside the lockfile missed the cache")
	}
	write("package-lock.json", `{"lockfileVersion": 3, "packages": {}}`)
	if d2, _ := s.depsFor(src, npm); d2.key == d1.key {
		t.Fatal("a changed lockfile hit the old key")
	}
	if d3, _ := s.depsFor(src, detect.Plan{Framework: detect.Node, Install: "npm install"}); d3.key == d1.key {
		t.Fatal("another install command shares the key")
	}
	if _, ok := s.depsFor(src, detect.Plan{Framework: detect.Static}); ok {
		t.Fatal("cacheable with no install")
	}
	if _, ok := New(Config{WorkDir: t.TempDir(), CacheBudget: -1}).depsFor(src, npm); ok {
		t.Fatal("cacheable with the cache off")
	}
}

// A team's dependency archives and git repositories are what DiskUsage
// counts for max_disk_gib; another team's are not.
func TestDiskUsageCountsCachesAndRepos(t *testing.T) {
	ctx := context.Background()
	a := App{ID: "app_1", TeamID: "team_a", Name: "web", Branch: "main", CreatedAt: time.Now()}
	s := New(Config{Store: appsStore{apps: []App{a}}, WorkDir: t.TempDir()})
	if err := os.MkdirAll(filepath.Join(s.repoDir(a), "objects"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.repoDir(a), "objects", "pack"), make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.deps.Put("team_a", "app_1", "k", strings.NewReader(strings.Repeat("x", 1<<20+1)), nil); err != nil {
		t.Fatal(err)
	}
	u, err := s.DiskUsage(ctx, "team_a")
	if err != nil || u.DiskMiB != 4 { // 2 MiB + 1 MiB and a byte, rounded up
		t.Fatalf("team_a: %+v %v, want 4 MiB", u, err)
	}
	if u, err := s.DiskUsage(ctx, "team_b"); err != nil || u.DiskMiB != 0 {
		t.Fatalf("team_b: %+v %v, want nothing", u, err)
	}
}
