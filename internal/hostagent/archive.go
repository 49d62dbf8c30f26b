package hostagent

import (
	"context"
	"os"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
)

// SnapshotArchive keeps snapshots in object storage as well
// (internal/snaparchive implements it).
type SnapshotArchive interface {
	// Snapshotted is told of each new snapshot once it is durable and
	// listed; it may export it in the background.
	Snapshotted(sn pandastack.Snapshot)
	// Fetch brings an exported snapshot's files back into dir.
	Fetch(ctx context.Context, sn pandastack.Snapshot, dir string) error
}

// loadSnapshot is a snapshot's files on this host, fetched back from
// object storage first when they are gone and the snapshot was exported.
func (a *Agent) loadSnapshot(ctx context.Context, sn pandastack.Snapshot) (vmm.Snapshot, error) {
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
