// Package snaparchive keeps snapshots in object storage: Export streams a
// snapshot's files (RAM, disk, device state, machine) and a manifest with
// their sizes and SHA-256 sums to an objstore.Store; Import fetches an
// export into a temporary directory, verifies every sum, renames it into
// place and records the snapshot in the caller's team; Fetch brings back
// the files of a recorded snapshot whose local copy is gone.
//
// What a snapshot depends on outside its directory — the kernel and initrd
// in the build cache — is exported by content, once, and fetched only by a
// host that does not have the same bytes at the same path.
//
// Nothing half done is left behind: an export is listed (recorded on the
// snapshot) only after its manifest is stored, and an import or fetch that
// meets a missing, truncated or altered object removes what it fetched.
package snaparchive

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/objstore"
)

// Config configures an Archive.
type Config struct {
	Objects objstore.Store
	Store   pandastack.Store
	// SnapshotDir is the host agent's: each snapshot's files are in
	// SnapshotDir/ID.
	SnapshotDir string
	// BootDir receives kernels and initrds fetched for imported snapshots;
	// VM processes (unprivileged) must be able to read it.
	BootDir string
	// Host is written on imported snapshots' records.
	Host string
	// AutoExport exports every new snapshot (Snapshotted) in the
	// background: on for an object store off this host (S3).
	AutoExport bool
	Logger     *slog.Logger
}

// Archive exports and imports snapshots. Create it with New.
type Archive struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex // per snapshot id: one export or fetch at a time

	bg     sync.WaitGroup
	ctx    context.Context // background exports; cancelled by Close
	cancel context.CancelFunc
}

// New returns an Archive.
func New(cfg Config) *Archive {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Archive{cfg: cfg, log: cfg.Logger, locks: map[string]*sync.Mutex{}, ctx: ctx, cancel: cancel}
}

// Close stops background exports and waits for them.
func (a *Archive) Close() {
	a.cancel()
	a.bg.Wait()
}

func (a *Archive) lock(id string) func() {
	a.mu.Lock()
	l, ok := a.locks[id]
	if !ok {
		l = &sync.Mutex{}
		a.locks[id] = l
	}
	a.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Key is the object key of snapshot id's export.
func Key(id string) string { return snapshotsPrefix + id }

// Snapshotted is told of each new, durable snapshot: with AutoExport it
// is exported in the background.
func (a *Archive) Snapshotted(sn pandastack.Snapshot) {
	if a.cfg.AutoExport {
		a.ExportInBackground(sn)
	}
}

// ResumeExports, with AutoExport, exports in the background (one at a
// time) every snapshot on this host that is not exported: those a stop or
// crash interrupted, and those whose export failed. The server calls it at
// start.
func (a *Archive) ResumeExports(ctx context.Context) {
	if !a.cfg.AutoExport {
		return
	}
	list, err := a.cfg.Store.ListSnapshots(ctx, "")
	if err != nil {
		a.log.Warn("list snapshots to export", "err", err)
		return
	}
	var todo []string
	for _, sn := range list {
		if sn.ObjectKey != "" || sn.Host != a.cfg.Host {
			continue
		}
		if _, err := os.Stat(filepath.Join(a.cfg.SnapshotDir, sn.ID)); err == nil {
			todo = append(todo, sn.ID)
		}
	}
	if len(todo) == 0 {
		return
	}
	a.log.Info("exporting snapshots not exported yet", "count", len(todo))
	a.bg.Add(1)
	go func() {
		defer a.bg.Done()
		for _, id := range todo {
			if _, err := a.Export(a.ctx, id); err != nil {
				a.log.Warn("snapshot export failed", "snapshot", id, "objects", a.cfg.Objects.String(), "err", err)
			}
			if a.ctx.Err() != nil {
				return
			}
		}
	}()
}

// ExportInBackground exports a new snapshot once it is durable, off the
// caller's path; the outcome is recorded on the snapshot (object_key and
// exported_at, or export_error).
func (a *Archive) ExportInBackground(sn pandastack.Snapshot) {
	a.bg.Add(1)
	go func() {
		defer a.bg.Done()
		if _, err := a.Export(a.ctx, sn.ID); err != nil {
			a.log.Warn("snapshot export failed", "snapshot", sn.ID, "objects", a.cfg.Objects.String(), "err", err)
		}
	}()
}

// Export streams snapshot id to the object store (once: an exported
// snapshot answers at once) and returns its record with the export on it.
// A failed export is recorded as export_error and removes what it stored.
func (a *Archive) Export(ctx context.Context, id string) (pandastack.Snapshot, error) {
	defer a.lock(id)()
	sn, err := a.cfg.Store.GetSnapshot(ctx, id)
	if err != nil {
		return sn, err
	}
	key := Key(id)
	if sn.ObjectKey != "" {
		if _, err := a.cfg.Objects.Stat(ctx, sn.ObjectKey+"/"+manifestName); err == nil {
			return sn, nil
		}
	}
	start := time.Now()
	m, err := a.export(ctx, sn, key)
	if err != nil {
		a.removeExport(key)
		err = &pandastack.Error{Code: pandastack.EUnavailable,
			Message: fmt.Sprintf("could not export snapshot %s to the object store", id), Err: err}
		// Recorded even when the request's context ended.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if rerr := a.cfg.Store.SetSnapshotExport(rctx, id, "", time.Time{}, err.Error()); rerr != nil && pandastack.ErrorCode(rerr) != pandastack.ENotFound {
			a.log.Warn("record failed snapshot export", "snapshot", id, "err", rerr)
		}
		return sn, err
	}
	if err := a.cfg.Store.SetSnapshotExport(ctx, id, key, m.ExportedAt, ""); err != nil {
		return sn, fmt.Errorf("record export of snapshot %s: %w", id, err)
	}
	sn.ObjectKey, sn.ExportedAt, sn.ExportError = key, m.ExportedAt, ""
	var stored int64
	for _, f := range m.Files {
		stored += f.Stored
	}
	a.log.Info("snapshot exported", "snapshot", id, "key", key, "objects", a.cfg.Objects.String(),
		"bytes", sn.SizeBytes, "stored_bytes", stored, "took", time.Since(start).Round(time.Millisecond))
	return sn, nil
}

func (a *Archive) export(ctx context.Context, sn pandastack.Snapshot, key string) (*Manifest, error) {
	dir := filepath.Join(a.cfg.SnapshotDir, sn.ID)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read snapshot files: %w", err)
	}
	m := &Manifest{Format: formatVersion, Snapshot: sn}
	m.Snapshot.ObjectKey, m.Snapshot.ExportedAt, m.Snapshot.ExportError = "", time.Time{}, ""
	for _, e := range ents {
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("snapshot %s holds %s, which is not a regular file", sn.ID, e.Name())
		}
		f, err := a.putFile(ctx, filepath.Join(dir, e.Name()), key+"/"+filesDir+e.Name())
		if err != nil {
			return nil, err
		}
		m.Files = append(m.Files, f)
	}
	if m.Boot, err = a.putBoot(ctx, dir); err != nil {
		return nil, err
	}
	m.ExportedAt = time.Now().UTC()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := a.cfg.Objects.Put(ctx, key+"/"+manifestName, strings.NewReader(string(b))); err != nil {
		return nil, fmt.Errorf("store manifest: %w", err)
	}
	return m, nil
}

// putFile streams one file, sparse-encoded, and returns its entry.
func (a *Archive) putFile(ctx context.Context, path, key string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return File{}, err
	}
	pr, pw := io.Pipe()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(pw, h)}
	go func() {
		zw, err := zstd.NewWriter(cw, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err == nil {
			err = encodeSparse(f, zw)
			if cerr := zw.Close(); err == nil {
				err = cerr
			}
		}
		pw.CloseWithError(err)
	}()
	err = a.cfg.Objects.Put(ctx, key, pr)
	pr.CloseWithError(errors.New("put ended")) // unblocks the encoder if Put stopped reading
	if err != nil {
		return File{}, fmt.Errorf("export %s: %w", filepath.Base(path), err)
	}
	return File{Name: filepath.Base(path), Size: fi.Size(), Stored: cw.n, SHA256: hex.EncodeToString(h.Sum(nil)), Encoding: encodingSparseZstd}, nil
}

// removeExport deletes what a failed export stored (best effort); blobs
// stay, other exports may share them.
func (a *Archive) removeExport(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := a.cfg.Objects.List(ctx, key+"/")
	if err != nil {
		return
	}
	for _, o := range list {
		_ = a.cfg.Objects.Delete(ctx, o.Key)
	}
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// readManifest reads and checks the manifest of the export at key.
func (a *Archive) readManifest(ctx context.Context, key string) (*Manifest, error) {
	rc, err := a.cfg.Objects.Get(ctx, key+"/"+manifestName)
	if objstore.IsNotFound(err) {
		return nil, pandastack.Errorf(pandastack.ENotFound, "no exported snapshot at %q in the object store", key)
	}
	if err != nil {
		return nil, &pandastack.Error{Code: pandastack.EUnavailable, Message: "could not read the snapshot's manifest from the object store", Err: err}
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxManifest+1))
	if err != nil {
		return nil, &pandastack.Error{Code: pandastack.EUnavailable, Message: "could not read the snapshot's manifest from the object store", Err: err}
	}
	var m Manifest
	if len(b) > maxManifest || json.Unmarshal(b, &m) != nil {
		return nil, pandastack.Errorf(pandastack.EInvalid, "the manifest at %q is not a snapshot manifest", key)
	}
	if m.Format != formatVersion {
		return nil, pandastack.Errorf(pandastack.EInvalid, "the export at %q has format %d; this server reads format %d", key, m.Format, formatVersion)
	}
	for _, f := range m.Files {
		if f.Encoding != encodingSparse && f.Encoding != encodingSparseZstd {
			return nil, pandastack.Errorf(pandastack.EInvalid, "the export at %q holds %s in an encoding this server does not read (%q)", key, f.Name, f.Encoding)
		}
		if f.Name == "" || f.Name != filepath.Base(f.Name) || f.Name == "." || f.Name == ".." || strings.ContainsAny(f.Name, "/\\") {
			return nil, pandastack.Errorf(pandastack.EInvalid, "the manifest at %q names a bad file %q", key, f.Name)
		}
	}
	return &m, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// syncInto makes tmp durable, then renames it to dir.
func syncInto(tmp, dir string) error {
	if err := cowfs.SyncDir(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	return cowfs.Fsync(filepath.Dir(dir))
}
