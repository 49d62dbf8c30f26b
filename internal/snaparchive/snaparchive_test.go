package snaparchive_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/objstore"
	"github.com/pandastack/pandastack/internal/objstore/file"
	"github.com/pandastack/pandastack/internal/objstore/objstoretest"
	"github.com/pandastack/pandastack/internal/objstore/s3"
	"github.com/pandastack/pandastack/internal/snaparchive"
	"github.com/pandastack/pandastack/internal/store/sqlite"
)

// host is one server's side: its store, snapshot directory and archive.
type host struct {
	store   *sqlite.Store
	snapDir string
	bootDir string
	arch    *snaparchive.Archive
}

func newHost(t *testing.T, objects objstore.Store) *host {
	t.Helper()
	st, err := sqlite.Open(t.Context(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := &host{store: st, snapDir: t.TempDir(), bootDir: filepath.Join(t.TempDir(), "boot")}
	h.arch = snaparchive.New(snaparchive.Config{Objects: objects, Store: st, SnapshotDir: h.snapDir, BootDir: h.bootDir})
	t.Cleanup(h.arch.Close)
	return h
}

const (
	memSize  = 64 << 20
	diskSize = 256 << 20
)

// makeSnapshot writes a snapshot's files as a checkpoint leaves them: a
// RAM file with data, zeros and holes, a sparse disk, a small state file
// and machine.json naming a kernel and initrd outside the directory.
func (h *host) makeSnapshot(t *testing.T, id, team string) pandastack.Snapshot {
	t.Helper()
	dir := filepath.Join(h.snapDir, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeAt := func(name string, size int64, chunks map[int64][]byte) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		for off, b := range chunks {
			if _, err := f.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
		}
	}
	random := func(n int) []byte { b := make([]byte, n); rand.Read(b); return b }
	writeAt("mem", memSize, map[int64][]byte{0: random(3 << 20), 10 << 20: make([]byte, 4<<20), memSize - 5000: random(5000)})
	writeAt("disk.raw", diskSize, map[int64][]byte{4096: random(1 << 20), 200 << 20: []byte("the file written in the sandbox")})
	writeAt("state", 57000, map[int64][]byte{0: random(57000)})
	boot := t.TempDir()
	os.WriteFile(filepath.Join(boot, "vmlinuz-6.12"), random(100000), 0o644)
	os.WriteFile(filepath.Join(boot, "initrd.img"), random(50000), 0o644)
	m, _ := json.Marshal(map[string]any{"cpus": 1, "memory_mib": 64, "kernel": filepath.Join(boot, "vmlinuz-6.12"),
		"initrd": filepath.Join(boot, "initrd.img"), "cmdline": "console=hvc0"})
	os.WriteFile(filepath.Join(dir, "machine.json"), m, 0o600)
	sn := pandastack.Snapshot{ID: id, TeamID: team, Name: "snap-" + id, SandboxID: "sbx_1", Template: "base", TemplateID: "tpl_1",
		SizeBytes: memSize + diskSize + 57000 + int64(len(m)), CreatedAt: time.Now().UTC()}
	if err := h.store.CreateSnapshot(t.Context(), sn); err != nil {
		t.Fatal(err)
	}
	return sn
}

// sums are the SHA-256 and size of a snapshot's files (machine.json aside).
type sums map[string]struct {
	sum [32]byte
	n   int64
}

func dirSums(t *testing.T, dir string) sums {
	t.Helper()
	out := sums{}
	for _, name := range []string{"mem", "disk.raw", "state"} {
		s, n := fileSum(t, filepath.Join(dir, name))
		out[name] = struct {
			sum [32]byte
			n   int64
		}{s, n}
	}
	return out
}

// sameFiles checks dir holds the files orig summed, byte for byte, and
// that the disk is still sparse.
func sameFiles(t *testing.T, orig sums, b string) {
	t.Helper()
	for name, got := range dirSums(t, b) {
		if got != orig[name] {
			t.Fatalf("%s differs after the round trip (%d vs %d bytes)", name, got.n, orig[name].n)
		}
	}
	var st syscall.Stat_t
	syscall.Stat(filepath.Join(b, "disk.raw"), &st)
	if st.Blocks*512 > 64<<20 {
		t.Errorf("the restored 256 MiB disk holding ~1 MiB takes %d MiB: holes were filled", st.Blocks*512>>20)
	}
}

func fileSum(t *testing.T, path string) ([32]byte, int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		t.Fatal(err)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out, n
}

func backends(t *testing.T) map[string]func(t *testing.T) objstore.Store {
	return map[string]func(t *testing.T) objstore.Store{
		"file": func(t *testing.T) objstore.Store {
			s, err := file.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"s3": func(t *testing.T) objstore.Store {
			g := objstoretest.StartVersityGW(t, "snaps")
			s, err := s3.New(s3.Config{Bucket: "snaps", Prefix: "cluster", Endpoint: g.Endpoint, AccessKeyID: g.AccessKey, SecretAccessKey: g.SecretKey})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

// Export, lose the local files, fetch them back; and import the export on
// another host (new store, new directories, no kernel at the old path).
func TestExportFetchImport(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			objects := open(t)
			a := newHost(t, objects)
			sn := a.makeSnapshot(t, "snap_aaa", "team_a")
			orig := dirSums(t, filepath.Join(a.snapDir, sn.ID))
			machine, _ := os.ReadFile(filepath.Join(a.snapDir, sn.ID, "machine.json"))

			got, err := a.arch.Export(ctx, sn.ID)
			if err != nil {
				t.Fatalf("Export: %v", err)
			}
			if got.ObjectKey != "snapshots/snap_aaa" || got.ExportedAt.IsZero() {
				t.Fatalf("exported record %+v", got)
			}
			rec, _ := a.store.GetSnapshot(ctx, sn.ID)
			if rec.ObjectKey != got.ObjectKey || rec.ExportedAt.IsZero() {
				t.Fatalf("the store does not record the export: %+v", rec)
			}
			// The sparse encoding carries data, not holes: ~5 MiB of 320 MiB.
			list, _ := objects.List(ctx, "snapshots/snap_aaa/")
			var stored int64
			for _, o := range list {
				stored += o.Size
			}
			if stored > 16<<20 {
				t.Errorf("the export stores %d MiB for ~5 MiB of data", stored>>20)
			}
			if again, err := a.arch.Export(ctx, sn.ID); err != nil || !again.ExportedAt.Equal(got.ExportedAt) {
				t.Fatalf("a second Export redid the work: %+v, %v", again, err)
			}

			// Local files lost: Fetch brings them back.
			dir := filepath.Join(a.snapDir, sn.ID)
			os.RemoveAll(dir)
			if err := a.arch.Fetch(ctx, rec, dir); err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			sameFiles(t, orig, dir)

			// Only some files lost (the directory stays): fetched whole.
			os.Remove(filepath.Join(dir, "mem"))
			if err := a.arch.Fetch(ctx, rec, dir); err != nil {
				t.Fatalf("Fetch with mem lost: %v", err)
			}
			sameFiles(t, orig, dir)
			if ents, _ := os.ReadDir(a.snapDir); len(ents) != 1 {
				t.Fatalf("the fetch left %d entries in the snapshot dir", len(ents))
			}

			// Another host: the snapshot lands in the importing team, its
			// kernel and initrd fetched (the old paths do not exist there).
			var m map[string]any
			json.Unmarshal(machine, &m)
			os.RemoveAll(filepath.Dir(m["kernel"].(string)))
			h2 := newHost(t, objects)
			imp, err := h2.arch.Import(ctx, "team_b", true, "snapshots/snap_aaa", "")
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			if imp.ID != sn.ID || imp.TeamID != "team_b" || imp.Name != sn.Name || imp.ObjectKey != "snapshots/snap_aaa" {
				t.Fatalf("imported %+v", imp)
			}
			if r, err := h2.store.GetSnapshot(ctx, imp.ID); err != nil || r.TeamID != "team_b" {
				t.Fatalf("not recorded: %+v %v", r, err)
			}
			sameFiles(t, orig, filepath.Join(h2.snapDir, imp.ID))
			b, _ := os.ReadFile(filepath.Join(h2.snapDir, imp.ID, "machine.json"))
			var m2 map[string]any
			json.Unmarshal(b, &m2)
			for _, role := range []string{"kernel", "initrd"} {
				p := m2[role].(string)
				if !strings.HasPrefix(p, h2.bootDir) {
					t.Fatalf("%s is %s, not fetched into %s", role, p, h2.bootDir)
				}
				if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o004 == 0 {
					t.Fatalf("fetched %s: %v %v (VM uids must read it)", role, fi, err)
				}
			}
			if m2["cmdline"] != "console=hvc0" {
				t.Fatalf("machine.json lost fields: %v", m2)
			}
			// Without anyTeam, another team's export is not found.
			if _, err := h2.arch.Import(ctx, "team_c", false, "snapshots/snap_aaa", ""); pandastack.ErrorCode(err) != pandastack.ENotFound {
				t.Fatalf("import of another team's export: %v", err)
			}
			// Imported again into the same team: the name is taken.
			if _, err := h2.arch.Import(ctx, "team_b", true, "snap_aaa", ""); pandastack.ErrorCode(err) != pandastack.EConflict {
				t.Fatalf("second import under the same name: %v", err)
			}
			// Under another name it gets a new id (the old one is taken).
			imp2, err := h2.arch.Import(ctx, "team_b", true, "snapshots/snap_aaa/manifest.json", "again")
			if err != nil || imp2.ID == imp.ID || imp2.Name != "again" {
				t.Fatalf("import under a new name: %+v, %v", imp2, err)
			}
		})
	}
}

// An export that lost an object, or holds a truncated or altered one,
// fails the import clearly and leaves nothing: no directory, no record,
// no temporary files.
func TestBrokenExportLeavesNothing(t *testing.T) {
	ctx := context.Background()
	objects, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := newHost(t, objects)
	sn := a.makeSnapshot(t, "snap_bbb", "team_a")
	if _, err := a.arch.Export(ctx, sn.ID); err != nil {
		t.Fatal(err)
	}
	diskKey := "snapshots/snap_bbb/files/disk.raw"
	good := readObject(t, objects, diskKey)
	cases := []struct {
		name   string
		break_ func()
		want   string
	}{
		{"missing", func() { objects.Delete(ctx, diskKey) }, "disk.raw is missing"},
		{"truncated", func() { objects.Put(ctx, diskKey, bytes.NewReader(good[:len(good)/2])) }, "disk.raw is truncated or corrupt"},
		{"a flipped bit", func() {
			bad := bytes.Clone(good)
			bad[len(bad)-100] ^= 1
			objects.Put(ctx, diskKey, bytes.NewReader(bad))
		}, "damaged (disk.raw"},
		{"another file's object", func() {
			objects.Put(ctx, diskKey, bytes.NewReader(readObject(t, objects, "snapshots/snap_bbb/files/state")))
		}, "disk.raw does not match its checksum"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.break_()
			defer objects.Put(ctx, diskKey, bytes.NewReader(good))
			h2 := newHost(t, objects)
			_, err := h2.arch.Import(ctx, "team_b", true, "snapshots/snap_bbb", "")
			if pandastack.ErrorCode(err) != pandastack.EUnavailable || !strings.Contains(pandastack.ErrorMessage(err), c.want) {
				t.Fatalf("Import = %v (%s), want %q", err, pandastack.ErrorCode(err), c.want)
			}
			if ents, _ := os.ReadDir(h2.snapDir); len(ents) != 0 {
				t.Fatalf("the failed import left %v", ents[0].Name())
			}
			if list, _ := h2.store.ListSnapshots(ctx, "team_b"); len(list) != 0 {
				t.Fatalf("the failed import left a record: %+v", list)
			}
			// Fetch-back fails the same way and leaves no directory.
			rec, _ := a.store.GetSnapshot(ctx, sn.ID)
			dir := filepath.Join(a.snapDir, sn.ID)
			os.Rename(dir, dir+".keep")
			defer os.Rename(dir+".keep", dir)
			if err := a.arch.Fetch(ctx, rec, dir); err == nil || !strings.Contains(pandastack.ErrorMessage(err), c.want) {
				t.Fatalf("Fetch = %v", err)
			}
			if _, err := os.Stat(dir); err == nil {
				t.Fatal("the failed fetch left the directory")
			}
			if ents, _ := os.ReadDir(a.snapDir); len(ents) != 1 {
				t.Fatalf("the failed fetch left files: %d entries", len(ents))
			}
		})
	}
	// An object that disappears while the import runs.
	t.Run("disappears mid-import", func(t *testing.T) {
		stateKey := "snapshots/snap_bbb/files/state"
		state := readObject(t, objects, stateKey)
		h2 := newHost(t, vanishing{Store: objects, on: "snapshots/snap_bbb/files/mem", gone: stateKey})
		defer objects.Put(ctx, stateKey, bytes.NewReader(state))
		_, err := h2.arch.Import(ctx, "team_b", true, "snapshots/snap_bbb", "")
		if err == nil || !strings.Contains(pandastack.ErrorMessage(err), "state is missing") {
			t.Fatalf("Import = %v", err)
		}
		if ents, _ := os.ReadDir(h2.snapDir); len(ents) != 0 {
			t.Fatalf("the failed import left %v", ents[0].Name())
		}
	})
	t.Run("no such export", func(t *testing.T) {
		_, err := a.arch.Import(ctx, "team_b", true, "snapshots/snap_nope", "")
		if pandastack.ErrorCode(err) != pandastack.ENotFound {
			t.Fatalf("Import = %v", err)
		}
	})
}

func readObject(t *testing.T, s objstore.Store, key string) []byte {
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return b
}

// vanishing deletes one object when another is first read.
type vanishing struct {
	objstore.Store
	on, gone string
}

func (v vanishing) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if key == v.on {
		v.Store.Delete(ctx, v.gone)
	}
	return v.Store.Get(ctx, key)
}

// A failed export says why on the snapshot and stores nothing.
func TestFailedExportIsRecorded(t *testing.T) {
	ctx := context.Background()
	objects, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := newHost(t, failingPuts{Store: objects, after: 2})
	sn := a.makeSnapshot(t, "snap_ccc", "team_a")
	if _, err := a.arch.Export(ctx, sn.ID); err == nil {
		t.Fatal("Export succeeded")
	}
	rec, _ := a.store.GetSnapshot(ctx, sn.ID)
	if rec.ObjectKey != "" || !strings.Contains(rec.ExportError, "could not export") {
		t.Fatalf("record after a failed export: %+v", rec)
	}
	if list, _ := objects.List(ctx, "snapshots/"); len(list) != 0 {
		t.Fatalf("a failed export left %d objects", len(list))
	}
}

type failingPuts struct {
	objstore.Store
	after int
}

var puts int

func (f failingPuts) Put(ctx context.Context, key string, r io.Reader) error {
	if puts++; puts > f.after {
		io.Copy(io.Discard, r)
		return fmt.Errorf("store is full")
	}
	return f.Store.Put(ctx, key, r)
}

// At start, with AutoExport, snapshots a stop interrupted (or whose export
// failed) are exported; without it, nothing is.
func TestResumeExports(t *testing.T) {
	ctx := context.Background()
	objects, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := newHost(t, objects)
	pending := h.makeSnapshot(t, "snap_pending", "team_a")
	failed := h.makeSnapshot(t, "snap_failed", "team_b")
	h.store.SetSnapshotExport(ctx, failed.ID, "", time.Time{}, "object store unreachable")
	h.makeSnapshot(t, "snap_gone", "team_a")
	os.RemoveAll(filepath.Join(h.snapDir, "snap_gone")) // nothing to export

	h.arch.ResumeExports(ctx) // AutoExport off
	h.arch.Close()
	if list, _ := objects.List(ctx, ""); len(list) != 0 {
		t.Fatalf("without AutoExport %d objects were stored", len(list))
	}
	arch := snaparchive.New(snaparchive.Config{Objects: objects, Store: h.store, SnapshotDir: h.snapDir, AutoExport: true})
	defer arch.Close()
	arch.ResumeExports(ctx)
	deadline := time.Now().Add(2 * time.Minute)
	for _, id := range []string{pending.ID, failed.ID} {
		for {
			rec, _ := h.store.GetSnapshot(ctx, id)
			if rec.ObjectKey == "snapshots/"+id && rec.ExportError == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not exported: %+v", id, rec)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if _, err := objects.Stat(ctx, "snapshots/snap_gone/manifest.json"); !objstore.IsNotFound(err) {
		t.Fatalf("a snapshot without files was exported: %v", err)
	}
}
