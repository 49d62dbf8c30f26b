package apps

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/apps/depcache"
	"github.com/pandastack/pandastack/internal/apps/detect"
	"github.com/pandastack/pandastack/internal/quotas"
)

// DefaultCacheBudget is the dependency archives a team keeps by default.
const DefaultCacheBudget = 2 << 30

// guestDepsTar is where a dependency archive passes through a build
// machine.
const guestDepsTar = "/tmp/pandastack-deps.tar"

// maxLockfile bounds the lockfile read to key the cache.
const maxLockfile = 64 << 20

// Reserver admits new usage into a team's quotas (*quotas.Service).
type Reserver interface {
	Reserve(ctx context.Context, teamID string, want quotas.Usage) (release func(), err error)
}

func newDepCache(cfg Config) *depcache.Cache {
	if cfg.CacheBudget < 0 || cfg.WorkDir == "" {
		return nil
	}
	return depcache.New(filepath.Join(cfg.WorkDir, "depcache"), cfg.CacheBudget)
}

// lockfiles are the lockfiles whose install fills node_modules, in the
// order detection prefers them.
var lockfiles = []string{"package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lock"}

// depsPlan is what the dependency cache can do for one build: the
// archive key of the node_modules its install makes, and the lockfile
// that decided it.
type depsPlan struct {
	key, lockfile, sum string
}

// depsFor keys the dependencies of the source in src, built with plan:
// only an install that follows a lockfile is cached (without one, what
// npm installs changes with the registry).
func (s *Service) depsFor(src string, plan detect.Plan) (depsPlan, bool) {
	if s.deps == nil || plan.Install == "" {
		return depsPlan{}, false
	}
	for _, name := range lockfiles {
		f, err := os.Open(filepath.Join(src, name))
		if err != nil {
			continue
		}
		h := sha256.New()
		_, err = io.Copy(h, io.LimitReader(f, maxLockfile))
		f.Close()
		if err != nil {
			return depsPlan{}, false
		}
		sum := hex.EncodeToString(h.Sum(nil))
		return depsPlan{key: depcache.Key(s.cfg.Template, plan.Install, name, sum), lockfile: name, sum: sum[:12]}, true
	}
	return depsPlan{}, false
}

// restoreDeps unpacks the app's cached node_modules for dp into the build
// machine's source tree; it reports whether the install can be skipped.
func (s *Service) restoreDeps(ctx context.Context, g pandastack.Guest, a App, dp depsPlan, l *deployLog) bool {
	path, size, ok := s.deps.Get(a.TeamID, a.ID, dp.key)
	if !ok {
		l.printf("dependency cache: miss for %s (sha256 %s)", dp.lockfile, dp.sum)
		return false
	}
	err := func() error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := g.WriteFile(ctx, guestDepsTar, 0o600, f); err != nil {
			return err
		}
		code, err := s.exec(ctx, g, "tar -xf "+guestDepsTar+" && rm -f "+guestDepsTar, nil, nil)
		if err == nil && code != 0 {
			err = fmt.Errorf("tar exited with status %d", code)
		}
		return err
	}()
	if err != nil {
		l.printf("dependency cache: restoring node_modules failed (%v); installing instead", err)
		_, _ = s.exec(ctx, g, "rm -rf node_modules "+guestDepsTar, nil, nil)
		return false
	}
	l.printf("dependency cache: hit for %s (sha256 %s): node_modules restored (%s), install skipped", dp.lockfile, dp.sum, mib(size))
	return true
}

// saveDeps keeps the node_modules the build machine's install made, for
// the app's next build with the same lockfile: within the team's cache
// budget and its max_disk_gib. A failure only costs the next build its
// cache.
func (s *Service) saveDeps(ctx context.Context, g pandastack.Guest, a App, dp depsPlan, l *deployLog) {
	if code, err := s.exec(ctx, g, "test -d node_modules", nil, nil); err != nil || code != 0 {
		l.printf("dependency cache: nothing kept (no node_modules after the install)")
		return
	}
	defer func() { _, _ = s.exec(context.WithoutCancel(ctx), g, "rm -f "+guestDepsTar, nil, nil) }()
	// The archive goes through the machine's /tmp, a tmpfs of half its
	// memory: tar's own complaint (no space left) goes to the log.
	if code, err := s.exec(ctx, g, "tar -cf "+guestDepsTar+" node_modules", nil, l); err != nil || code != 0 {
		if err == nil {
			err = fmt.Errorf("tar exited with status %d", code)
		}
		l.printf("dependency cache: node_modules not kept: archiving it in the build machine failed: %v", err)
		return
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(g.ReadFile(ctx, guestDepsTar, pw, func(pandastack.FileInfo) error { return nil }))
	}()
	admit := func(size int64) error {
		if s.cfg.Quotas == nil {
			return nil
		}
		release, err := s.cfg.Quotas.Reserve(ctx, a.TeamID, quotas.Usage{DiskMiB: int((size + 1<<20 - 1) >> 20)})
		if err != nil {
			return err
		}
		release() // from now on DiskUsage counts it
		return nil
	}
	size, err := s.deps.Put(a.TeamID, a.ID, dp.key, pr, admit)
	pr.CloseWithError(errors.New("done"))
	switch {
	case errors.Is(err, depcache.ErrTooLarge):
		l.printf("dependency cache: node_modules not kept: over the team's build cache budget of %s", mib(s.deps.Budget()))
	case err != nil:
		l.printf("dependency cache: node_modules not kept: %s", pandastack.ErrorMessage(err))
	default:
		l.printf("dependency cache: node_modules kept for %s (sha256 %s, %s)", dp.lockfile, dp.sum, mib(size))
	}
}

// DiskUsage is what the team's apps hold on the host's disk besides their
// machines and snapshots: dependency archives and git repositories. It
// is a quotas.Counter: both count in the team's max_disk_gib.
func (s *Service) DiskUsage(ctx context.Context, teamID string) (quotas.Usage, error) {
	var bytes int64
	if s.deps != nil {
		bytes += s.deps.Usage(teamID)
	}
	if s.cfg.RepoDir != "" {
		all, err := s.cfg.Store.ListApps(ctx, teamID)
		if err != nil {
			return quotas.Usage{}, fmt.Errorf("list apps of team %s: %w", teamID, err)
		}
		for _, a := range all {
			bytes += dirBytes(s.repoDir(a))
		}
	}
	return quotas.Usage{DiskMiB: int((bytes + 1<<20 - 1) >> 20)}, nil
}

// dirBytes is the bytes of the regular files under dir (0 if none).
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
