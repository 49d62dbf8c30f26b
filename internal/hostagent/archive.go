package hostagent

import (
	"context"
	"os"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// SnapshotArchive fetches snapshots back from object storage
// (internal/snaparchive implements it; the sandboxes service tells it of
// new snapshots).
type SnapshotArchive interface {
	// Fetch brings an exported snapshot's files back into dir.
	Fetch(ctx context.Context, sn pandastack.Snapshot, dir string) error
}

// loadSnapshot is a snapshot's files on this host, fetched back from
// object storage first when they are gone and the snapshot was exported.
func (a *Agent) loadSnapshot(ctx context.Context, ref hostapi.SnapshotRef) (vmm.Snapshot, error) {
	sn := pandastack.Snapshot{ID: ref.ID, Template: ref.Template, TemplateID: ref.TemplateID, ObjectKey: ref.ObjectKey, Host: a.cfg.Host}
	snap, err := vmm.LoadSaved(a.snapDir(sn.ID))
	if err == nil {
		for _, f := range []string{snap.MemFile, snap.StateFile, snap.Disk} {
			if _, serr := os.Stat(f); serr != nil {
				err = serr
			}
		}
	}
	if err == nil || a.cfg.Archive == nil || sn.ObjectKey == "" {
		return snap, err
	}
	a.log.Info("snapshot files are gone from this host; fetching them from object storage", "snapshot", sn.ID, "key", sn.ObjectKey)
	if err := a.cfg.Archive.Fetch(ctx, sn, a.snapDir(sn.ID)); err != nil {
		return snap, err
	}
	return vmm.LoadSaved(a.snapDir(sn.ID))
}
