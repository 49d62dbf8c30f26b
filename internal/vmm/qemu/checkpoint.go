package qemu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Checkpoint saves a running VM whole into dir and lets it run on: its
// device state, and reflink copies of its RAM and disk files. The guest is
// paused for the save and the two clones; a clone first writes back the
// pages the VM has dirty since they were last written, which is most of the
// pause when the guest has written much memory lately.
func (d *Driver) Checkpoint(ctx context.Context, v vmm.VM, dir string) error {
	q := v.(*vm)
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	err := func() (err error) {
		defer func() {
			if cerr := q.q.run(context.WithoutCancel(ctx), "cont", nil, nil); cerr != nil && err == nil {
				err = fmt.Errorf("resume: %w: %s", cerr, q.logTail())
			}
		}()
		if err := q.SaveState(ctx, filepath.Join(tmp, vmm.StateFile)); err != nil {
			return err
		}
		// Stopped: QEMU has drained the disk; RAM is the file.
		if err := cowfs.Clone(filepath.Join(tmp, vmm.MemFile), q.mem, 0o400); err != nil {
			return err
		}
		if err := cowfs.Clone(filepath.Join(tmp, vmm.DiskFile), q.disk, 0o400); err != nil {
			return err
		}
		// Volumes, durable ones too, are saved as copies: what restores
		// from here gets a copy of its own (see vmm.Snapshot.Volumes).
		for i := range q.vols {
			if f, ok := q.slotFile(i); ok {
				if err := cowfs.Clone(filepath.Join(tmp, vmm.VolumeFileName(i)), f, 0o400); err != nil {
					return err
				}
			}
		}
		return vmm.WriteMachine(tmp, q.machine)
	}()
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("checkpoint %s: %w", q.id, err)
	}
	return nil
}
