package sandboxes

import (
	"context"
	"fmt"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
)

// Snapshot saves a running sandbox whole under a name unique in its team
// (its id when name is ""); the sandbox runs on. The record is written
// once the host's files are durable: a snapshot that fails half way leaves
// nothing listed.
func (e *Engine) Snapshot(ctx context.Context, id, name string) (pandastack.Snapshot, error) {
	src, err := e.live(ctx, id)
	if err != nil {
		return pandastack.Snapshot{}, err
	}
	sn := pandastack.Snapshot{ID: pandastack.NewID("snap_"), Name: name, TeamID: src.TeamID, Host: e.cfg.Host.Name()}
	if sn.Name == "" {
		sn.Name = sn.ID
	}
	// Refuse a taken name before the work.
	if list, err := e.cfg.Store.ListSnapshots(ctx, sn.TeamID); err == nil {
		for _, o := range list {
			if o.Name == sn.Name {
				return pandastack.Snapshot{}, pandastack.Errorf(pandastack.EConflict, "a snapshot named %q already exists", sn.Name)
			}
		}
	}
	info, err := e.cfg.Host.Snapshot(ctx, hostapi.SnapshotRequest{MachineID: id, SnapshotID: sn.ID})
	if err != nil {
		return pandastack.Snapshot{}, e.hostErr(ctx, id, err)
	}
	sn.SandboxID, sn.Template, sn.TemplateID, sn.SizeBytes = info.MachineID, info.Template, info.TemplateID, info.SizeBytes
	sn.CreatedAt = time.Now().UTC()
	if err := e.cfg.Store.CreateSnapshot(ctx, sn); err != nil {
		if derr := e.cfg.Host.DeleteSnapshot(context.WithoutCancel(ctx), sn.ID); derr != nil {
			e.log.Error("remove files of an unrecorded snapshot", "snapshot", sn.ID, "err", derr)
		}
		return pandastack.Snapshot{}, err
	}
	if e.cfg.Archive != nil {
		e.cfg.Archive.Snapshotted(sn)
	}
	return sn, nil
}

// DeleteSnapshot removes a snapshot's files and record. Sandboxes created
// from it are not affected: each has its own copy of the disk.
func (e *Engine) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	if _, err := e.cfg.Store.GetSnapshot(ctx, snapshotID); err != nil {
		return err
	}
	if err := e.cfg.Host.DeleteSnapshot(ctx, snapshotID); err != nil {
		return fmt.Errorf("delete snapshot %s: %w", snapshotID, err)
	}
	return e.cfg.Store.DeleteSnapshot(ctx, snapshotID)
}
