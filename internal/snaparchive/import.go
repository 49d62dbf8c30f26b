package snaparchive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/objstore"
)

// NormalizeKey accepts an export's key as "snapshots/ID", a snapshot id
// alone, or the manifest's key.
func NormalizeKey(key string) (string, error) {
	key = strings.TrimSuffix(strings.Trim(key, " "), "/"+manifestName)
	key = strings.TrimSuffix(key, "/")
	if strings.HasPrefix(key, "snap_") && !strings.Contains(key, "/") {
		key = Key(key)
	}
	if err := objstore.CheckKey(key); err != nil {
		return "", pandastack.Errorf(pandastack.EInvalid, "%q is not an export's key (snapshots/ID)", key)
	}
	return key, nil
}

// Import fetches the export at key, verifies it and records it as a
// snapshot of teamID, named name (the exported name when ""). It keeps the
// exported id unless this server already has a snapshot with it. Only an
// export of teamID itself is found, unless anyTeam (an admin's import, as
// from another server, whose team ids differ). On any failure nothing is
// left: no directory, no record.
func (a *Archive) Import(ctx context.Context, teamID string, anyTeam bool, key, name string) (pandastack.Snapshot, error) {
	key, err := NormalizeKey(key)
	if err != nil {
		return pandastack.Snapshot{}, err
	}
	m, err := a.readManifest(ctx, key)
	if err != nil {
		return pandastack.Snapshot{}, err
	}
	if m.Snapshot.TeamID != teamID && !anyTeam {
		return pandastack.Snapshot{}, pandastack.Errorf(pandastack.ENotFound, "no exported snapshot at %q in the object store", key)
	}
	sn := m.Snapshot
	sn.TeamID, sn.Host = teamID, a.cfg.Host
	sn.ObjectKey, sn.ExportedAt, sn.ExportError = key, m.ExportedAt, ""
	if name != "" {
		sn.Name = name
	}
	if !strings.HasPrefix(sn.ID, "snap_") || strings.ContainsAny(sn.ID, "/\\.") {
		return pandastack.Snapshot{}, pandastack.Errorf(pandastack.EInvalid, "the manifest at %q has a bad snapshot id %q", key, sn.ID)
	}
	if _, err := a.cfg.Store.GetSnapshot(ctx, sn.ID); err == nil {
		sn.ID = "snap_" + randomHex(10)
	} else if _, err := os.Stat(filepath.Join(a.cfg.SnapshotDir, sn.ID)); err == nil {
		sn.ID = "snap_" + randomHex(10) // files without a record: not ours to replace
	}
	if list, err := a.cfg.Store.ListSnapshots(ctx, teamID); err == nil {
		for _, o := range list {
			if o.Name == sn.Name {
				return pandastack.Snapshot{}, pandastack.Errorf(pandastack.EConflict, "a snapshot named %q already exists", sn.Name)
			}
		}
	}
	defer a.lock(sn.ID)()
	dir := filepath.Join(a.cfg.SnapshotDir, sn.ID)
	if err := a.download(ctx, key, m, dir); err != nil {
		return pandastack.Snapshot{}, err
	}
	if err := a.cfg.Store.CreateSnapshot(ctx, sn); err != nil {
		os.RemoveAll(dir)
		return pandastack.Snapshot{}, err
	}
	a.log.Info("snapshot imported", "snapshot", sn.ID, "team", teamID, "key", key, "bytes", sn.SizeBytes)
	return sn, nil
}

// Fetch brings back the files of snapshot sn, exported before, into dir
// (its directory here) when they are gone: a create from a snapshot whose
// local files were lost calls it. Files present are left as they are.
func (a *Archive) Fetch(ctx context.Context, sn pandastack.Snapshot, dir string) error {
	if sn.ObjectKey == "" {
		return pandastack.Errorf(pandastack.ENotFound, "snapshot %s has no files on this host and was never exported", sn.ID)
	}
	defer a.lock(sn.ID)()
	m, err := a.readManifest(ctx, sn.ObjectKey)
	if err != nil {
		return err
	}
	if complete(dir, m) {
		return nil // fetched by a concurrent create
	}
	// Some files lost, not all: set the rest aside (swept at start if
	// this process dies before removing it) and fetch the whole.
	if _, err := os.Stat(dir); err == nil {
		stale := dir + ".stale-" + randomHex(6) + ".tmp"
		if err := os.Rename(dir, stale); err != nil {
			return fmt.Errorf("set aside snapshot %s's remaining files: %w", sn.ID, err)
		}
		os.RemoveAll(stale)
	}
	start := time.Now()
	if err := a.download(ctx, sn.ObjectKey, m, dir); err != nil {
		return err
	}
	a.log.Info("snapshot fetched back from the object store", "snapshot", sn.ID, "key", sn.ObjectKey, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// complete reports whether dir holds every file of the manifest, at its size.
func complete(dir string, m *Manifest) bool {
	for _, f := range m.Files {
		fi, err := os.Stat(filepath.Join(dir, f.Name))
		if err != nil || fi.Size() != f.Size {
			return false
		}
	}
	return true
}

// download fetches every file of the export into a temporary directory
// beside dir, checks each object's size and SHA-256 as it streams, fetches
// boot files this host lacks, and renames the directory to dir.
func (a *Archive) download(ctx context.Context, key string, m *Manifest, dir string) (err error) {
	tmp := dir + ".import-" + randomHex(6) + ".tmp" // swept at start if left by a crash
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("import snapshot: %w", err)
	}
	for _, f := range m.Files {
		if err := a.getFile(ctx, key+"/"+filesDir+f.Name, f, filepath.Join(tmp, f.Name)); err != nil {
			return err
		}
	}
	if err := a.fetchBoot(ctx, m, tmp); err != nil {
		return err
	}
	if err := syncInto(tmp, dir); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("import snapshot: %w", err)
	}
	return nil
}

// brokenExport is the error for an export that cannot be restored.
func brokenExport(key, what string, err error) error {
	return &pandastack.Error{Code: pandastack.EUnavailable,
		Message: fmt.Sprintf("the export at %q is incomplete or damaged (%s); nothing was imported", key, what), Err: err}
}

func (a *Archive) getFile(ctx context.Context, objKey string, f File, path string) error {
	rc, err := a.cfg.Objects.Get(ctx, objKey)
	if objstore.IsNotFound(err) {
		return brokenExport(strings.SplitN(objKey, "/"+filesDir, 2)[0], f.Name+" is missing", err)
	}
	if err != nil {
		return &pandastack.Error{Code: pandastack.EUnavailable, Message: "could not read the snapshot from the object store", Err: err}
	}
	defer rc.Close()
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("import snapshot: %w", err)
	}
	defer out.Close()
	h := sha256.New()
	cr := &countReader{r: io.TeeReader(rc, h)}
	size, err := decode(cr, f.Encoding, out)
	if err == nil {
		_, err = io.Copy(io.Discard, cr) // the whole object is summed, trailing bytes too
	}
	exportKey := strings.SplitN(objKey, "/"+filesDir, 2)[0]
	switch {
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("import snapshot: %w", ctx.Err())
	case errors.Is(err, errCorrupt):
		return brokenExport(exportKey, f.Name+" is truncated or corrupt", err)
	case err != nil:
		return &pandastack.Error{Code: pandastack.EUnavailable, Message: "could not read the snapshot from the object store", Err: err}
	case size != f.Size || cr.n != f.Stored || hex.EncodeToString(h.Sum(nil)) != f.SHA256:
		return brokenExport(exportKey, f.Name+" does not match its checksum", fmt.Errorf("%s: %d bytes (%d stored), sha256 %x; manifest: %d (%d), %s",
			f.Name, size, cr.n, h.Sum(nil), f.Size, f.Stored, f.SHA256))
	}
	return out.Close()
}

// decode writes the file an object holds in encoding into out.
func decode(r io.Reader, encoding string, out *os.File) (int64, error) {
	if encoding == encodingSparse {
		return decodeSparse(r, out)
	}
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
	if err != nil {
		return 0, err
	}
	defer zr.Close()
	size, err := decodeSparse(zr, out)
	if err != nil && !errors.Is(err, errCorrupt) && !errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w: %v", errCorrupt, err) // a broken zstd stream
	}
	return size, err
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
