package sandboxes

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
)

// A base is a platform service's own snapshot of one of its machines,
// kept as host files only (no record, no team, never listed): a managed
// database's machine with PostgreSQL already running from its volume
// (internal/databases). New machines restore it with their own copy of
// its volumes kept as durable volumes of their team, so what took a cold
// start (a cluster copied onto a volume and started) is a restore.

// SaveBase saves running machine id whole, its volumes too, as base
// baseID on its host; the machine runs on. A base of that id already
// there is replaced.
func (e *Engine) SaveBase(ctx context.Context, id, baseID string) error {
	if _, err := e.live(ctx, id); err != nil {
		return err
	}
	if err := e.cfg.Host.DeleteSnapshot(ctx, baseID); err != nil {
		return fmt.Errorf("save base %s: replace: %w", baseID, err)
	}
	if _, err := e.cfg.Host.Snapshot(ctx, hostapi.SnapshotRequest{MachineID: id, SnapshotID: baseID}); err != nil {
		return fmt.Errorf("save base %s: %w", baseID, e.hostErr(ctx, id, err))
	}
	return nil
}

// DeleteBase removes base baseID's files (machines restored from it keep
// their own copies).
func (e *Engine) DeleteBase(ctx context.Context, baseID string) error {
	return e.cfg.Host.DeleteSnapshot(ctx, baseID)
}

// BaseVolume is a volume a machine restored from a base keeps: the copy
// of the base's volume in Slot, mounted at MountPath, becomes a new
// volume of the team named Name of SizeMiB (at least the base's).
type BaseVolume struct {
	Name      string
	SizeMiB   int
	MountPath string
	Slot      int
}

// BaseRestore is a machine to start from a base.
type BaseRestore struct {
	TeamID string
	// Base is the base's id; Template and TemplateID the build it was
	// saved from.
	Base, Template, TemplateID string
	Volumes                    []BaseVolume
	Metadata                   map[string]string
	// ManagedBy is the service that owns the machine and its volumes
	// (pandastack.Sandbox.ManagedBy).
	ManagedBy     string
	AutoHibernate time.Duration
}

// RestoreBase starts a service machine for the team from base p.Base,
// whose copies of the base's volumes become new durable volumes of the
// team (p.Volumes), attached to the machine where the base had them. The
// caller counts it against the team's quotas. A base whose files are
// gone is ENotFound. Nothing is left when it fails: no machine, no volume
// record or file.
func (e *Engine) RestoreBase(ctx context.Context, p BaseRestore) (pandastack.Sandbox, []pandastack.Volume, error) {
	id := pandastack.NewID("sbx_")
	ok := false
	srcs := make([]hostapi.VolumeAttachment, len(p.Volumes))
	for i, bv := range p.Volumes {
		srcs[i] = hostapi.VolumeAttachment{Name: bv.Name, SizeMiB: bv.SizeMiB, MountPath: bv.MountPath, Slot: bv.Slot}
	}
	copies, err := e.recordVolumeCopies(ctx, id, p.TeamID, p.ManagedBy, srcs)
	defer func() {
		if !ok {
			copies.undo(ctx, "restore")
		}
	}()
	if err != nil {
		return pandastack.Sandbox{}, nil, err
	}
	m, err := e.cfg.Host.Create(ctx, hostapi.MachineSpec{ID: id, Lifetime: pandastack.LifetimeService,
		Snapshot: &hostapi.SnapshotRef{ID: p.Base, Template: p.Template, TemplateID: p.TemplateID},
		Volumes:  copies.atts, AutoHibernateSeconds: int(p.AutoHibernate / time.Second)})
	if err != nil {
		return pandastack.Sandbox{}, nil, err
	}
	meta := maps.Clone(p.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	rec := fromMachine(pandastack.Sandbox{TeamID: p.TeamID, Metadata: meta, ManagedBy: p.ManagedBy}, m)
	if err := e.first(ctx, rec, m.Seq); err != nil {
		return pandastack.Sandbox{}, nil, fmt.Errorf("record machine restored from base %s: %w", p.Base, err)
	}
	ok = true
	return rec, copies.vols, nil
}
