package sandboxes

import (
	"context"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
)

// volumeCopies are the records of new durable volumes of a team that a
// machine about to start gets as copies of others' (a fork's of its
// parent's, a restore's of a base's), each attached where its source is.
type volumeCopies struct {
	e       *Engine
	machine string
	vols    []pandastack.Volume
	atts    []hostapi.VolumeAttachment // for the host: the same volumes, in order
}

// recordVolumeCopies records, for machine, a new volume of the team per
// source (its Name, SizeMiB, MountPath and Slot; the ID is a new one),
// attached to the machine. On failure what it recorded stays in the
// returned copies for undo.
func (e *Engine) recordVolumeCopies(ctx context.Context, machine, teamID, managedBy string, srcs []hostapi.VolumeAttachment) (*volumeCopies, error) {
	c := &volumeCopies{e: e, machine: machine}
	for _, src := range srcs {
		v := pandastack.Volume{ID: pandastack.NewID("vol_"), TeamID: teamID, Name: src.Name, SizeMiB: src.SizeMiB,
			Host: e.cfg.Host.Name(), CreatedAt: time.Now().UTC(), ManagedBy: managedBy}
		if err := e.cfg.Store.CreateVolume(ctx, v); err != nil {
			return c, err
		}
		c.vols = append(c.vols, v)
		if err := e.cfg.Store.AttachVolume(ctx, v.ID, machine, src.MountPath, src.Slot); err != nil {
			return c, err
		}
		v.SandboxID, v.MountPath, v.Slot = machine, src.MountPath, src.Slot
		c.vols[len(c.vols)-1] = v
		c.atts = append(c.atts, hostapi.VolumeAttachment{ID: v.ID, Name: v.Name, SizeMiB: v.SizeMiB, MountPath: src.MountPath, Slot: src.Slot})
	}
	return c, nil
}

// undo removes what the copies left when their machine did not start
// (what says which operation, for the log): the machine's attachments,
// then each volume's record and file.
func (c *volumeCopies) undo(ctx context.Context, what string) {
	ctx = context.WithoutCancel(ctx)
	c.e.detach(ctx, c.machine)
	for _, v := range c.vols {
		if err := c.e.cfg.Store.DeleteVolume(ctx, v.ID); err != nil {
			c.e.log.Error("delete volume record of a failed "+what, "volume", v.ID, "err", err)
		}
		if err := c.e.cfg.Host.DeleteVolume(ctx, v.ID); err != nil {
			c.e.log.Error("delete volume file of a failed "+what, "volume", v.ID, "err", err)
		}
	}
}
