package hostagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// createKeepingVolumes starts machine spec.ID from snapshot spec.Snapshot
// whose saved volume copies become the durable volumes spec.Volumes, slot
// for slot (by reflink into each one's own volume file, opened in place):
// a platform service's base machine restored with its data already on
// the volume (internal/databases). A volume larger than its saved copy
// is grown (the guest is told the new size; growing the filesystem is the
// guest's work); a smaller one is EInvalid. On failure the volume files
// are removed.
func (a *Agent) createKeepingVolumes(ctx context.Context, spec hostapi.MachineSpec) (hostapi.Machine, error) {
	t0 := time.Now()
	sn := *spec.Snapshot
	snap, err := a.loadSnapshot(ctx, sn)
	if err != nil {
		var pe *pandastack.Error
		if errors.As(err, &pe) {
			return hostapi.Machine{}, err
		}
		return hostapi.Machine{}, pandastack.Errorf(pandastack.ENotFound, "snapshot %s has no files on this host", sn.ID)
	}
	if len(spec.Volumes) > snap.Machine.VolumeSlots {
		return hostapi.Machine{}, pandastack.Errorf(pandastack.EInvalid, "at most %d volumes per sandbox", snap.Machine.VolumeSlots)
	}
	if snap, err = a.keepVolumeCopies(snap, spec.Volumes); err != nil {
		return hostapi.Machine{}, fmt.Errorf("create %s from snapshot %s: %w", spec.ID, sn.ID, err)
	}
	if err := a.growVolumes(spec.Volumes); err != nil {
		a.dropVolumeFiles(spec.Volumes)
		return hostapi.Machine{}, fmt.Errorf("create %s from snapshot %s: %w", spec.ID, sn.ID, err)
	}
	tCloned := time.Since(t0)
	tpl := pandastack.Template{Name: sn.Template, ID: sn.TemplateID}
	if _, t, err := a.cfg.Templates.Snapshot(ctx, templateRef(sn.Template, sn.TemplateID)); err == nil {
		tpl = t
	}
	v, err := a.cfg.Driver.Restore(ctx, snap, vmm.RestoreOptions{ID: spec.ID, Network: startPolicy(spec.Network)})
	if err != nil {
		a.dropVolumeFiles(spec.Volumes)
		return hostapi.Machine{}, &pandastack.Error{Code: pandastack.EUnavailable, Message: "could not start the machine from the snapshot", Err: err}
	}
	tRestored := time.Since(t0)
	m, err := a.register(ctx, v, spec, tpl, snap.Machine.CPUs, snap.Machine.MemoryMiB)
	if err != nil {
		a.dropVolumeFiles(spec.Volumes)
		return m, err
	}
	a.log.Info("machine restored with kept volumes", "sandbox", m.ID, "snapshot", sn.ID, "volumes", len(spec.Volumes),
		"clone_ms", ms(tCloned), "restore_ms", ms(tRestored-tCloned), "ready_ms", ms(time.Since(t0)-tRestored), "ms", ms(time.Since(t0)))
	return m, nil
}

// growVolumes makes each volume file vols asks for at least its size
// (sparse): a saved copy smaller than the volume is grown, a larger one
// is EInvalid.
func (a *Agent) growVolumes(vols []hostapi.VolumeAttachment) error {
	for _, v := range vols {
		f := a.volFile(v.ID)
		st, err := os.Stat(f)
		if err != nil {
			return fmt.Errorf("volume %s: %w", v.ID, err)
		}
		want := int64(v.SizeMiB) << 20
		switch {
		case st.Size() > want:
			return pandastack.Errorf(pandastack.EInvalid, "volume %s of %d MiB is smaller than the snapshot's copy (%d MiB)", v.Name, v.SizeMiB, st.Size()>>20)
		case st.Size() < want:
			if err := os.Truncate(f, want); err != nil {
				return fmt.Errorf("grow volume %s: %w", v.ID, err)
			}
		}
	}
	return nil
}
