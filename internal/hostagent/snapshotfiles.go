package hostagent

import (
	"context"

	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// SnapshotFiles is snapshot ref's files on this host (fetched back from
// object storage when it was exported and they are gone): what a bench
// floor restores bare.
func (a *Agent) SnapshotFiles(ctx context.Context, ref hostapi.SnapshotRef) (vmm.Snapshot, error) {
	return a.loadSnapshot(ctx, ref)
}
