package hostagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// snapDir is where a snapshot's state and disk are kept.
func (a *Agent) snapDir(id string) string { return filepath.Join(a.cfg.SnapshotDir, id) }

// Snapshot saves a running machine whole — memory, processes, devices,
// disk — as snapshot req.SnapshotID; the machine runs on. A hibernated one
// is woken first. The files are written to a temporary directory and
// renamed: a snapshot that fails half way (a full disk) leaves nothing.
func (a *Agent) Snapshot(ctx context.Context, req hostapi.SnapshotRequest) (hostapi.SnapshotInfo, error) {
	id := req.MachineID
	if req.SnapshotID == "" || req.SnapshotID != filepath.Base(req.SnapshotID) || strings.HasPrefix(req.SnapshotID, ".") {
		return hostapi.SnapshotInfo{}, pandastack.Errorf(pandastack.EInvalid, "invalid snapshot id %q", req.SnapshotID)
	}
	if _, err := a.get(ctx, id); err != nil {
		return hostapi.SnapshotInfo{}, err
	}
	const failMsg = "could not save the sandbox; it keeps running"
	fail := func(err error) (hostapi.SnapshotInfo, error) {
		return hostapi.SnapshotInfo{}, saveError(fmt.Errorf("snapshot %s: %w", id, err), a.cfg.SnapshotDir, id, failMsg)
	}
	dir := a.snapDir(req.SnapshotID)
	tmp := dir + ".tmp"
	defer os.RemoveAll(tmp)
	rec, err := a.checkpoint(ctx, id, tmp, failMsg)
	if err != nil {
		return hostapi.SnapshotInfo{}, err
	}
	// Durable before it is listed; the machine already runs on.
	if err := cowfs.SyncDir(tmp); err != nil {
		return fail(err)
	}
	info := hostapi.SnapshotInfo{ID: req.SnapshotID, MachineID: rec.ID, Template: rec.Template, TemplateID: rec.TemplateID, SizeBytes: dirSize(tmp)}
	if err := os.Rename(tmp, dir); err != nil {
		return fail(err)
	}
	if err := cowfs.Fsync(a.cfg.SnapshotDir); err != nil {
		os.RemoveAll(dir)
		return fail(err)
	}
	a.log.Info("sandbox snapshot", "sandbox", id, "snapshot", info.ID, "bytes", info.SizeBytes)
	return info, nil
}

// DeleteSnapshot removes a snapshot's files. Machines created from it are
// not affected: each has its own copy of the disk.
func (a *Agent) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	if snapshotID == "" || snapshotID != filepath.Base(snapshotID) || strings.HasPrefix(snapshotID, ".") {
		return pandastack.Errorf(pandastack.EInvalid, "invalid snapshot id %q", snapshotID)
	}
	if err := os.RemoveAll(a.snapDir(snapshotID)); err != nil {
		return fmt.Errorf("delete snapshot files: %w", err)
	}
	return nil
}

// createFromSnapshot starts a new machine from a snapshot.
func (a *Agent) createFromSnapshot(ctx context.Context, spec hostapi.MachineSpec) (hostapi.Machine, error) {
	t0 := time.Now()
	sn := *spec.Snapshot
	// A snapshot holds everything it restores from (memory, disk, device
	// state, machine): it outlives rebuilds and deletions of its template.
	snap, err := a.loadSnapshot(ctx, sn)
	if err != nil {
		var pe *pandastack.Error
		if errors.As(err, &pe) {
			return hostapi.Machine{}, err // the archive's: unreachable, damaged export
		}
		return hostapi.Machine{}, pandastack.Errorf(pandastack.ENotFound, "snapshot %s has no files on this host", sn.ID)
	}
	tpl := pandastack.Template{Name: sn.Template, ID: sn.TemplateID}
	if _, t, err := a.cfg.Templates.Snapshot(ctx, templateRef(sn.Template, sn.TemplateID)); err == nil {
		tpl = t // its version, when the build is still known
	}
	tRestore := time.Now()
	v, err := a.cfg.Driver.Restore(ctx, snap, vmm.RestoreOptions{ID: spec.ID, Network: startPolicy(spec.Network)})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return hostapi.Machine{}, pandastack.Errorf(pandastack.ENotFound, "snapshot %s has no files on this host", sn.ID)
		}
		return hostapi.Machine{}, &pandastack.Error{Code: pandastack.EUnavailable, Message: "could not start the sandbox from the snapshot", Err: err}
	}
	tRestored := time.Now()
	m, err := a.register(ctx, v, spec, tpl, snap.Machine.CPUs, snap.Machine.MemoryMiB)
	a.log.Debug("sandbox created from snapshot", "sandbox", spec.ID, "snapshot", sn.ID, "lookup_ms", ms(tRestore.Sub(t0)),
		"restore_ms", ms(tRestored.Sub(tRestore)), "ready_ms", ms(time.Since(tRestored)), "err", err)
	return m, err
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
