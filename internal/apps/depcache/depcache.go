// Package depcache keeps the dependency directories app builds installed
// (node_modules) as tar archives on the host, so a rebuild whose lockfile
// did not change restores them instead of downloading its dependencies
// again. Archives are kept per team and app under a key that hashes the
// lockfile and what installed it (Key); an app keeps one archive, its
// newest. A team's archives stay within a disk budget: past it the least
// recently used go first, and an archive larger than the whole budget is
// never kept.
//
// The host only stores and hands back the bytes a build machine produced
// (through the guest agent's file channel); it never unpacks them, so an
// archive a build crafted reaches nothing but that app's next build
// machine.
package depcache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// ErrTooLarge is returned by Put for an archive larger than the budget.
var ErrTooLarge = errors.New("dependency archive is larger than the team's build cache budget")

// suffix names kept archives; partial ones end in ".tmp".
const suffix = ".tar"

// idRE is what a team id, app id or key may be: they are path elements.
var idRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// Key hashes what decides a dependency directory's contents (the build
// template, the install command, the lockfile's name and bytes) into an
// archive key.
func Key(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Cache is a directory of archives: DIR/TEAM/APP/KEY.tar. It is safe for
// concurrent use.
type Cache struct {
	dir    string
	budget int64
	mu     sync.Mutex
}

// New returns a cache in dir keeping at most budget bytes per team.
func New(dir string, budget int64) *Cache { return &Cache{dir: dir, budget: budget} }

// Budget is the bytes a team's archives may take.
func (c *Cache) Budget() int64 { return c.budget }

func (c *Cache) path(team, app, key string) (string, error) {
	for _, s := range []string{team, app, key} {
		if !idRE.MatchString(s) {
			return "", fmt.Errorf("depcache: bad path element %q", s)
		}
	}
	return filepath.Join(c.dir, team, app, key+suffix), nil
}

// Get returns the archive of app under key and its size, marking it
// used; ok is false when there is none.
func (c *Cache) Get(team, app, key string) (path string, size int64, ok bool) {
	p, err := c.path(team, app, key)
	if err != nil {
		return "", 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return "", 0, false
	}
	t := time.Now()
	_ = os.Chtimes(p, t, t)
	return p, fi.Size(), true
}

// Put keeps the archive read from r as app's under key. admit, if set, is
// asked with the archive's size once it is written and before it is kept
// (a quota check); its error, ErrTooLarge, or a read error leave nothing
// behind. The app's other archives are removed, then the team's oldest
// until the team is within its budget. It returns the archive's size.
func (c *Cache) Put(team, app, key string, r io.Reader, admit func(size int64) error) (int64, error) {
	p, err := c.path(team, app, key)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return 0, fmt.Errorf("make cache dir: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), "put-*.tmp")
	if err != nil {
		return 0, fmt.Errorf("make cache file: %w", err)
	}
	tmp := f.Name()
	kept := false
	defer func() {
		if !kept {
			os.Remove(tmp)
		}
	}()
	n, err := io.Copy(f, io.LimitReader(r, c.budget+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("write dependency archive: %w", err)
	}
	if n > c.budget {
		return n, ErrTooLarge
	}
	if admit != nil {
		if err := admit(n); err != nil {
			return n, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.Rename(tmp, p); err != nil {
		return n, fmt.Errorf("keep dependency archive: %w", err)
	}
	kept = true
	olds, _ := filepath.Glob(filepath.Join(filepath.Dir(p), "*"+suffix))
	for _, o := range olds {
		if o != p {
			os.Remove(o)
		}
	}
	c.gc(team, p)
	return n, nil
}

type entry struct {
	path string
	size int64
	used time.Time
}

// entries lists a team's kept archives, least recently used first.
func (c *Cache) entries(team string) []entry {
	files, _ := filepath.Glob(filepath.Join(c.dir, team, "*", "*"+suffix))
	var out []entry
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
			out = append(out, entry{f, fi.Size(), fi.ModTime()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].used.Before(out[j].used) })
	return out
}

// gc removes the team's least recently used archives, never keep, until
// the team is within its budget.
func (c *Cache) gc(team, keep string) {
	es := c.entries(team)
	var total int64
	for _, e := range es {
		total += e.size
	}
	for _, e := range es {
		if total <= c.budget {
			return
		}
		if e.path == keep {
			continue
		}
		if os.Remove(e.path) == nil {
			total -= e.size
		}
	}
}

// Usage is the bytes the team's archives take.
func (c *Cache) Usage(team string) int64 {
	if !idRE.MatchString(team) {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var total int64
	for _, e := range c.entries(team) {
		total += e.size
	}
	return total
}

// DropApp removes app's archives.
func (c *Cache) DropApp(team, app string) error {
	p, err := c.path(team, app, "x")
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.RemoveAll(filepath.Dir(p)); err != nil {
		return fmt.Errorf("remove dependency cache of app %s: %w", app, err)
	}
	return nil
}

// Sweep removes the archives of apps known says are gone, and partial
// archives a stopped server left; it returns the app dirs removed.
func (c *Cache) Sweep(known func(team, app string) bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var removed []string
	dirs, _ := filepath.Glob(filepath.Join(c.dir, "*", "*"))
	for _, d := range dirs {
		team, app := filepath.Base(filepath.Dir(d)), filepath.Base(d)
		if !known(team, app) {
			if os.RemoveAll(d) == nil {
				removed = append(removed, d)
			}
			continue
		}
		tmps, _ := filepath.Glob(filepath.Join(d, "*.tmp"))
		for _, t := range tmps {
			if !strings.HasPrefix(filepath.Base(t), "put-") {
				continue
			}
			os.Remove(t)
		}
	}
	return removed
}
