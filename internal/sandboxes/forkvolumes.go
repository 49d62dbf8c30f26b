package sandboxes

import (
	"context"
	"fmt"
	"maps"
	"sort"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
)

// ForkKeepingVolumes makes one child of running sandbox id whose copies
// of the parent's volumes are kept as new durable volumes of the team
// (copy-on-write), attached to the child where the parent has them:
// names[i] names the copy of the parent's volume in its i-th slot in use.
// The child's metadata is the parent's with metadata's keys set over it;
// managedBy is the service that owns the child (pandastack.Sandbox.ManagedBy).
// A managed database's fork keeps its data this way (internal/databases).
// Nothing is left when it fails: no child, no volume record or file.
func (e *Engine) ForkKeepingVolumes(ctx context.Context, id string, names []string, metadata map[string]string, managedBy string) (pandastack.Sandbox, []pandastack.Volume, error) {
	parent, err := e.live(ctx, id)
	if err != nil {
		return pandastack.Sandbox{}, nil, err
	}
	have, err := e.attached(ctx, id)
	if err != nil {
		return pandastack.Sandbox{}, nil, fmt.Errorf("fork %s: volumes: %w", id, err)
	}
	sort.Slice(have, func(i, j int) bool { return have[i].Slot < have[j].Slot })
	if len(names) != len(have) {
		return pandastack.Sandbox{}, nil, pandastack.Errorf(pandastack.EInvalid, "sandbox %s has %d volumes; %d names given", id, len(have), len(names))
	}
	childID := pandastack.NewID("sbx_")
	ok := false
	srcs := make([]hostapi.VolumeAttachment, len(have))
	for i, pv := range have {
		srcs[i] = hostapi.VolumeAttachment{Name: names[i], SizeMiB: pv.SizeMiB, MountPath: pv.MountPath, Slot: pv.Slot}
	}
	copies, err := e.recordVolumeCopies(ctx, childID, parent.TeamID, managedBy, srcs)
	defer func() {
		if !ok {
			copies.undo(ctx, "fork")
		}
	}()
	if err != nil {
		return pandastack.Sandbox{}, nil, err
	}
	ms, err := e.cfg.Host.Fork(ctx, hostapi.ForkRequest{ParentID: id, ChildIDs: []string{childID},
		Volumes: map[string][]hostapi.VolumeAttachment{childID: copies.atts}})
	if err != nil || len(ms) != 1 {
		if err == nil {
			err = fmt.Errorf("fork %s: the host made %d children", id, len(ms))
		}
		return pandastack.Sandbox{}, nil, e.hostErr(ctx, id, err)
	}
	meta := maps.Clone(parent.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	maps.Copy(meta, metadata)
	meta["forked_from"] = parent.ID
	rec := fromMachine(pandastack.Sandbox{TeamID: parent.TeamID, Metadata: meta, ManagedBy: managedBy}, ms[0])
	if err := e.first(ctx, rec, ms[0].Seq); err != nil {
		// first killed the child and freed its volumes; the deferred
		// cleanup removes them.
		return pandastack.Sandbox{}, nil, fmt.Errorf("record fork: %w", err)
	}
	ok = true
	return rec, copies.vols, nil
}
