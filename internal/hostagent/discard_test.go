package hostagent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func writeTree(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mem"), make([]byte, 1<<16), 0o600); err != nil {
		t.Fatal(err)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return n
}

// A discarded directory's name is free at once (a hibernate may reuse it
// right away), and the directory is gone once the background removal is
// done.
func TestDiscardFreesTheNameAtOnce(t *testing.T) {
	hib := t.TempDir()
	a := New(Config{HibernateDir: hib})
	dir := filepath.Join(hib, "sbx_1")
	writeTree(t, dir)
	a.discard(dir)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s still there after discard: %v", dir, err)
	}
	writeTree(t, dir) // the next hibernate of the same sandbox
	a.bg.Wait()
	if got := names(t, hib); !slices.Equal(got, []string{"sbx_1"}) {
		t.Fatalf("after the background removal: %v, want only the new sbx_1", got)
	}
	a.discard(filepath.Join(hib, "missing")) // nothing to do is fine
	a.bg.Wait()
}

// What a crash left half done is removed at start; saved sandboxes and
// snapshots are not touched.
func TestSweepRemovesLeftovers(t *testing.T) {
	hib, snaps := t.TempDir(), t.TempDir()
	for _, d := range []string{
		filepath.Join(hib, "sbx_keep"), filepath.Join(hib, "sbx_2.tmp"), filepath.Join(hib, discardPrefix+"sbx_3-abc"),
		filepath.Join(snaps, "snap_keep"), filepath.Join(snaps, forkPrefix+"123"), filepath.Join(snaps, "snap_4.tmp"),
		filepath.Join(snaps, "snap_5.import-0a1b2c.tmp"), // an import or fetch a crash interrupted (snaparchive)
	} {
		writeTree(t, d)
	}
	New(Config{HibernateDir: hib, SnapshotDir: snaps}).sweep()
	if got := names(t, hib); !slices.Equal(got, []string{"sbx_keep"}) {
		t.Errorf("hibernate dir after sweep: %v", got)
	}
	if got := names(t, snaps); !slices.Equal(got, []string{"snap_keep"}) {
		t.Errorf("snapshot dir after sweep: %v", got)
	}
}
