package qemu

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/pandastack/pandastack/internal/vmm"
)

// Checkpoint saves a running VM whole into dir — device state with all of
// its RAM, and a copy of its disk overlay — and lets it run on. New VMs
// start from dir with RestoreCheckpoint (a fork). The guest is paused for
// the time of the save.
func (d *Driver) Checkpoint(ctx context.Context, v vmm.VM, dir string) error {
	q := v.(*vm)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer func() { _ = q.q.run(context.WithoutCancel(ctx), "cont", nil, nil) }()
	if err := q.SaveState(ctx, filepath.Join(dir, hibState)); err != nil {
		return fmt.Errorf("checkpoint %s: %w", q.id, err)
	}
	// Paused and flushed: the overlay is consistent with the saved state.
	if err := copyFile(ctx, filepath.Join(q.dir, diskFile), filepath.Join(dir, hibDisk)); err != nil {
		return fmt.Errorf("checkpoint %s: copy disk: %w", q.id, err)
	}
	return nil
}

// RestoreCheckpoint starts a new VM from a checkpoint; snap is the template
// snapshot the checkpointed VM came from (the machine must match).
func (d *Driver) RestoreCheckpoint(ctx context.Context, dir string, snap vmm.Snapshot) (vmm.VM, error) {
	id := newID()
	vdir := filepath.Join(d.cfg.Dir, id)
	if err := os.MkdirAll(vdir, 0o700); err != nil {
		return nil, fmt.Errorf("restore checkpoint: %w", err)
	}
	disk := filepath.Join(vdir, diskFile)
	if err := copyFile(ctx, filepath.Join(dir, hibDisk), disk); err != nil {
		os.RemoveAll(vdir)
		return nil, fmt.Errorf("restore checkpoint: copy disk: %w", err)
	}
	full := snap
	full.StateFile = filepath.Join(dir, hibState)
	v, err := d.prepareAt(ctx, id, full, disk)
	if err != nil {
		os.RemoveAll(vdir)
		return nil, err
	}
	if err := d.load(ctx, v); err != nil {
		v.Kill(context.Background())
		return nil, fmt.Errorf("restore checkpoint: %w", err)
	}
	return v, nil
}

// copyFile copies a disk image, sparse, sharing blocks where the
// filesystem can (reflink).
func copyFile(ctx context.Context, src, dst string) error {
	out, err := exec.CommandContext(ctx, "cp", "--sparse=always", "--reflink=auto", src, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
