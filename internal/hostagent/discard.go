package hostagent

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// discardPrefix names directories set aside for removal (see discard).
const discardPrefix = ".discard-"

// discard removes dir off the request path. Deleting a VM's saved files
// takes tens of milliseconds (a reflinked RAM file's shared extents are
// unshared one by one), so a wake or a fork that is done with them renames
// the directory aside at once — its name is free again for the next
// hibernate — and deletes it in the background. Close waits for those
// deletions; sweep removes what a crash left aside.
func (a *Agent) discard(dir string) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	aside := filepath.Join(filepath.Dir(dir), discardPrefix+filepath.Base(dir)+"-"+hex.EncodeToString(b))
	if err := os.Rename(dir, aside); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("set aside for removal", "dir", dir, "err", err)
			a.remove(dir)
		}
		return
	}
	a.bg.Add(1)
	go func() {
		defer a.bg.Done()
		a.remove(aside)
	}()
}

func (a *Agent) remove(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		a.log.Warn("remove saved vm files", "dir", dir, "err", err)
	}
}

// sweep removes, at start, what an earlier process left half done in the
// hibernate and snapshot directories: directories set aside by discard,
// fork checkpoints (.fork-*) and unfinished saves (*.tmp).
func (a *Agent) sweep() {
	for _, d := range []string{a.cfg.HibernateDir, a.cfg.SnapshotDir} {
		if d == "" {
			continue
		}
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			n := e.Name()
			if strings.HasPrefix(n, discardPrefix) || strings.HasPrefix(n, forkPrefix) || strings.HasSuffix(n, ".tmp") {
				a.log.Info("removing leftover saved vm files", "dir", filepath.Join(d, n))
				a.remove(filepath.Join(d, n))
			}
		}
	}
}
