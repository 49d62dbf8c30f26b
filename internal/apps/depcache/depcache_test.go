package depcache_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/apps/depcache"
)

func put(t *testing.T, c *depcache.Cache, team, app, key string, size int) {
	t.Helper()
	if _, err := c.Put(team, app, key, strings.NewReader(strings.Repeat("x", size)), nil); err != nil {
		t.Fatalf("put %s/%s/%s: %v", team, app, key, err)
	}
}

func has(c *depcache.Cache, team, app, key string) bool {
	_, _, ok := c.Get(team, app, key)
	return ok
}

// A rebuild finds the archive of its lockfile; a changed lockfile is a
// miss, and keeping its archive drops the app's old one.
func TestGetPutKey(t *testing.T) {
	c := depcache.New(t.TempDir(), 1000)
	k1 := depcache.Key("base", "npm ci", "package-lock.json", "lock v1")
	if k1 == depcache.Key("base", "npm ci", "package-lock.json", "lock v2") || k1 == depcache.Key("base", "npm ci", "package-lock.jso", "nlock v1") {
		t.Fatal("different lockfiles share a key")
	}
	if has(c, "team_a", "app_1", k1) {
		t.Fatal("hit in an empty cache")
	}
	put(t, c, "team_a", "app_1", k1, 100)
	p, n, ok := c.Get("team_a", "app_1", k1)
	if !ok || n != 100 {
		t.Fatalf("get after put: %v %d", ok, n)
	}
	if b, _ := os.ReadFile(p); len(b) != 100 {
		t.Fatalf("archive holds %d bytes", len(b))
	}
	if has(c, "team_b", "app_1", k1) || has(c, "team_a", "app_2", k1) {
		t.Fatal("another team or app sees the archive")
	}
	k2 := depcache.Key("base", "npm ci", "package-lock.json", "lock v2")
	put(t, c, "team_a", "app_1", k2, 50)
	if has(c, "team_a", "app_1", k1) || !has(c, "team_a", "app_1", k2) {
		t.Fatal("the app's old archive is kept beside its new one")
	}
	if u := c.Usage("team_a"); u != 50 {
		t.Fatalf("usage %d, want 50", u)
	}
	if _, _, ok := c.Get("../etc", "app_1", k2); ok {
		t.Fatal("a path element with a slash was accepted")
	}
}

// A team's archives stay within its budget, least recently used out
// first; other teams are untouched; an archive over the whole budget, or
// one admit refuses, leaves nothing behind.
func TestBudget(t *testing.T) {
	dir := t.TempDir()
	c := depcache.New(dir, 1000)
	put(t, c, "team_a", "app_1", "k1", 400)
	time.Sleep(10 * time.Millisecond)
	put(t, c, "team_a", "app_2", "k2", 400)
	time.Sleep(10 * time.Millisecond)
	put(t, c, "team_b", "app_9", "k9", 900)
	time.Sleep(10 * time.Millisecond)
	if !has(c, "team_a", "app_1", "k1") { // app_1 is now the most recently used
		t.Fatal("app_1 missing")
	}
	time.Sleep(10 * time.Millisecond)
	put(t, c, "team_a", "app_3", "k3", 400)
	if !has(c, "team_a", "app_1", "k1") || has(c, "team_a", "app_2", "k2") || !has(c, "team_a", "app_3", "k3") {
		t.Fatal("GC did not drop the least recently used archive (app_2)")
	}
	if u := c.Usage("team_a"); u != 800 {
		t.Fatalf("team_a usage %d, want 800", u)
	}
	if !has(c, "team_b", "app_9", "k9") || c.Usage("team_b") != 900 {
		t.Fatal("another team's archive was collected")
	}

	if _, err := c.Put("team_a", "app_4", "k4", strings.NewReader(strings.Repeat("x", 1001)), nil); !errors.Is(err, depcache.ErrTooLarge) {
		t.Fatalf("an archive over the budget: %v", err)
	}
	refused := errors.New("quota")
	if _, err := c.Put("team_a", "app_4", "k4", strings.NewReader("abc"), func(n int64) error {
		if n != 3 {
			t.Errorf("admit asked with %d bytes", n)
		}
		return refused
	}); !errors.Is(err, refused) {
		t.Fatalf("a refused archive: %v", err)
	}
	if has(c, "team_a", "app_4", "k4") || c.Usage("team_a") != 800 {
		t.Fatal("a refused archive was kept")
	}
	left, _ := filepath.Glob(filepath.Join(dir, "team_a", "app_4", "*"))
	if len(left) != 0 {
		t.Fatalf("refused puts left files: %v", left)
	}
}

// Deleting an app and sweeping forgotten apps free their archives.
func TestDropAndSweep(t *testing.T) {
	c := depcache.New(t.TempDir(), 1000)
	put(t, c, "team_a", "app_1", "k1", 10)
	put(t, c, "team_a", "app_2", "k2", 10)
	if err := c.DropApp("team_a", "app_1"); err != nil || has(c, "team_a", "app_1", "k1") {
		t.Fatalf("drop: %v", err)
	}
	removed := c.Sweep(func(team, app string) bool { return false })
	if len(removed) != 1 || has(c, "team_a", "app_2", "k2") || c.Usage("team_a") != 0 {
		t.Fatalf("sweep removed %v", removed)
	}
}
