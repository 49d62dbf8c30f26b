package server

import (
	"context"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// benchFunctions finds a function's snapshot for the bench's function
// floor (hostbench.Functions): the latest version's, of the caller's team.
type benchFunctions struct{ s *Server }

func (b benchFunctions) FunctionSnapshot(ctx context.Context, teamID, name string) (vmm.Snapshot, error) {
	if b.s.fns == nil || b.s.agent == nil {
		return vmm.Snapshot{}, pandastack.Errorf(pandastack.EUnavailable, "functions are not enabled on this server")
	}
	f, err := b.s.fns.Get(ctx, teamID, name)
	if err != nil {
		return vmm.Snapshot{}, err
	}
	sn, err := b.s.store.GetSnapshot(ctx, f.Latest.SnapshotID)
	if err != nil {
		return vmm.Snapshot{}, err
	}
	return b.s.agent.SnapshotFiles(ctx, hostapi.SnapshotRef{ID: sn.ID, Template: sn.Template, TemplateID: sn.TemplateID, ObjectKey: sn.ObjectKey})
}
