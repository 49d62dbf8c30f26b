package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pandastack/pandastack/internal/cowfs"
)

// A run that was killed (a machine restarted under it, a CI timeout) leaves
// its servers' data dirs in the temp dir: each a loop-mounted VM store that
// can hold tens of GiB. And every change to the guest agent bakes new disk
// images into the shared build cache. On a thin disk both add up until a
// later run fails with "no space left on device" in tests that have nothing
// to do with disk. sweepStale removes both before the suite starts.

// staleAfter is how long a data dir's server log must have been still, with
// no process naming the dir, before the dir counts as abandoned; and
// imageUnusedFor how long a cached disk image may go unused (the template
// builder touches an image each time it bakes from it) before it goes:
// longer than a run, since a run's servers bake from it (and cold-boot
// over it) while it lasts; each change to the guest agent makes a new
// set of a few GiB.
const (
	staleAfter     = 15 * time.Minute
	imageUnusedFor = 2 * time.Hour
	// rootfsUnusedFor: a root filesystem takes minutes to debootstrap, and
	// the build touches it on each use.
	rootfsUnusedFor = 3 * 24 * time.Hour
)

func sweepStale(cacheDir string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "ps-*"))
	for _, dir := range dirs {
		st, err := os.Stat(filepath.Join(dir, "server.log"))
		if err != nil || time.Since(st.ModTime()) < staleAfter || len(processesNaming(dir)) > 0 {
			continue
		}
		fmt.Fprintf(os.Stderr, "e2e: removing %s, left by a run that ended without cleaning up\n", dir)
		if err := cowfs.Unmount(filepath.Join(dir, "cow")); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			continue
		}
		os.RemoveAll(dir)
	}
	// Root filesystems are keyed by their definition (suite, packages,
	// steps): a changed definition leaves the old tree, a GiB or two.
	trees, _ := filepath.Glob(filepath.Join(cacheDir, "rootfs", "*"))
	for _, tree := range trees {
		if st, err := os.Stat(tree); err == nil && st.IsDir() && !strings.HasPrefix(filepath.Base(tree), ".") && time.Since(st.ModTime()) > rootfsUnusedFor {
			fmt.Fprintf(os.Stderr, "e2e: removing root filesystem %s, unused for %v\n", tree, time.Since(st.ModTime()).Round(time.Hour))
			os.RemoveAll(tree)
		}
	}
	imgs, _ := filepath.Glob(filepath.Join(cacheDir, "images", "*.raw"))
	for _, img := range imgs {
		if st, err := os.Stat(img); err == nil && time.Since(st.ModTime()) > imageUnusedFor {
			fmt.Fprintf(os.Stderr, "e2e: removing disk image %s, unused for %v\n", img, time.Since(st.ModTime()).Round(time.Hour))
			os.Remove(img)
		}
	}
}

// processesNaming lists the pids whose command line names dir: its server,
// its QEMUs and their jail children.
func processesNaming(dir string) []int {
	return processesWhere(func(cl string) bool {
		return strings.Contains(cl, dir+"/") || strings.Contains(cl, dir+"\x00") || strings.HasSuffix(cl, dir)
	})
}
