package hostagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/vmm"
)

// snapDir is where a snapshot's state and disk are kept.
func (a *Agent) snapDir(id string) string { return filepath.Join(a.cfg.SnapshotDir, id) }

// Snapshot saves a running sandbox whole — memory, processes, devices, disk —
// under a name unique in its team; the sandbox runs on. A hibernated one is
// woken first. The files are written to a temporary directory and renamed:
// a snapshot that fails half way (a full disk) leaves nothing listed.
func (a *Agent) Snapshot(ctx context.Context, id, name string) (pandastack.Snapshot, error) {
	src, err := a.get(ctx, id)
	if err != nil {
		return pandastack.Snapshot{}, err
	}
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	sn := pandastack.Snapshot{ID: "snap_" + hex.EncodeToString(b), Name: name, Host: a.cfg.Host, CreatedAt: time.Now().UTC()}
	if sn.Name == "" {
		sn.Name = sn.ID
	}
	src.mu.Lock()
	sn.TeamID = src.rec.TeamID
	src.mu.Unlock()
	// Refuse a taken name before the work.
	if list, err := a.cfg.Store.ListSnapshots(ctx, sn.TeamID); err == nil {
		for _, o := range list {
			if o.Name == sn.Name {
				return pandastack.Snapshot{}, pandastack.Errorf(pandastack.EConflict, "a snapshot named %q already exists", sn.Name)
			}
		}
	}
	const failMsg = "could not save the sandbox; it keeps running"
	fail := func(err error) (pandastack.Snapshot, error) {
		return pandastack.Snapshot{}, saveError(fmt.Errorf("snapshot %s: %w", id, err), a.cfg.SnapshotDir, id, failMsg)
	}
	tmp := a.snapDir(sn.ID) + ".tmp"
	defer os.RemoveAll(tmp)
	rec, err := a.checkpoint(ctx, id, tmp, failMsg)
	if err != nil {
		return pandastack.Snapshot{}, err
	}
	// Durable before it is listed; the sandbox already runs on.
	if err := cowfs.SyncDir(tmp); err != nil {
		return fail(err)
	}
	sn.SandboxID, sn.Template, sn.TemplateID = rec.ID, rec.Template, rec.TemplateID
	sn.SizeBytes = dirSize(tmp)
	if err := os.Rename(tmp, a.snapDir(sn.ID)); err != nil {
		return fail(err)
	}
	if err := cowfs.Fsync(a.cfg.SnapshotDir); err != nil {
		os.RemoveAll(a.snapDir(sn.ID))
		return fail(err)
	}
	if err := a.cfg.Store.CreateSnapshot(ctx, sn); err != nil {
		os.RemoveAll(a.snapDir(sn.ID))
		return pandastack.Snapshot{}, err
	}
	a.log.Info("sandbox snapshot", "sandbox", id, "snapshot", sn.ID, "name", sn.Name, "bytes", sn.SizeBytes)
	if a.cfg.Archive != nil {
		a.cfg.Archive.Snapshotted(sn)
	}
	return sn, nil
}

// DeleteSnapshot removes a snapshot's files and record. Sandboxes created
// from it are not affected: each has its own copy of the disk.
func (a *Agent) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	if _, err := a.cfg.Store.GetSnapshot(ctx, snapshotID); err != nil {
		return err
	}
	if err := os.RemoveAll(a.snapDir(snapshotID)); err != nil {
		return fmt.Errorf("delete snapshot files: %w", err)
	}
	return a.cfg.Store.DeleteSnapshot(ctx, snapshotID)
}

// createFromSnapshot starts a new sandbox from a snapshot.
func (a *Agent) createFromSnapshot(ctx context.Context, req pandastack.CreateRequest) (pandastack.Sandbox, error) {
	sn, err := a.cfg.Store.GetSnapshot(ctx, req.Snapshot)
	if err != nil || sn.TeamID != req.TeamID {
		return pandastack.Sandbox{}, pandastack.Errorf(pandastack.ENotFound, "snapshot %s not found", req.Snapshot)
	}
	// A snapshot holds everything it restores from (memory, disk, device
	// state, machine): it outlives rebuilds and deletions of its template.
	snap, err := a.loadSnapshot(ctx, sn)
	if err != nil {
		var pe *pandastack.Error
		if errors.As(err, &pe) {
			return pandastack.Sandbox{}, err // the archive's: unreachable, damaged export
		}
		return pandastack.Sandbox{}, pandastack.Errorf(pandastack.ENotFound, "snapshot %s has no files on this host", sn.ID)
	}
	tpl := pandastack.Template{Name: sn.Template, ID: sn.TemplateID}
	if _, t, err := a.cfg.Templates.Snapshot(ctx, templateRef(sn.Template, sn.TemplateID)); err == nil {
		tpl = t // its version, when the build is still known
	}
	v, err := a.cfg.Driver.Restore(ctx, snap, vmm.RestoreOptions{ID: newSandboxID(), Network: startPolicy(req.Network)})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return pandastack.Sandbox{}, pandastack.Errorf(pandastack.ENotFound, "snapshot %s has no files on this host", sn.ID)
		}
		return pandastack.Sandbox{}, &pandastack.Error{Code: pandastack.EUnavailable, Message: "could not start the sandbox from the snapshot", Err: err}
	}
	return a.register(ctx, v, req, tpl, snap.Machine.CPUs, snap.Machine.MemoryMiB)
}

func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
