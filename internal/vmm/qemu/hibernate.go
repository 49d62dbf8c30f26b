package qemu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pandastack/pandastack/internal/vmm"
)

// Files of a hibernated VM.
const (
	hibState = "state"
	hibDisk  = "disk.qcow2"
)

// Hibernate stops the guest, streams its device state and all of its RAM
// (the restored VM's RAM is private, so the migration carries it; zero
// pages cost nothing) into dir, moves the disk overlay there, and ends the
// process.
func (d *Driver) Hibernate(ctx context.Context, v vmm.VM, dir string) error {
	q := v.(*vm)
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("hibernate: %w", err)
	}
	fail := func(err error) error {
		os.RemoveAll(tmp)
		_ = q.q.run(context.Background(), "cont", nil, nil) // keep the sandbox running
		return fmt.Errorf("hibernate %s: %w", q.id, err)
	}
	if err := q.SaveState(ctx, filepath.Join(tmp, hibState)); err != nil {
		return fail(err)
	}
	// The migration flushed the disk; the process can go.
	q.Release()
	_ = syscallKill(q.pid)
	select {
	case <-q.exited:
	case <-time.After(10 * time.Second):
		return fail(fmt.Errorf("qemu %d did not exit", q.pid))
	}
	if err := os.Rename(filepath.Join(q.dir, diskFile), filepath.Join(tmp, hibDisk)); err != nil {
		return fmt.Errorf("hibernate %s: keep disk: %w", q.id, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("hibernate %s: %w", q.id, err)
	}
	q.mu.Lock()
	q.killed = true
	q.mu.Unlock()
	d.releaseUID(q.uid)
	return os.RemoveAll(q.dir)
}

// WakeVM starts the VM again from what Hibernate kept in dir.
func (d *Driver) WakeVM(ctx context.Context, id, dir string, snap vmm.Snapshot) (vmm.VM, error) {
	vdir := filepath.Join(d.cfg.Dir, id)
	if err := os.MkdirAll(vdir, 0o700); err != nil {
		return nil, fmt.Errorf("wake: %w", err)
	}
	disk := filepath.Join(vdir, diskFile)
	if err := os.Rename(filepath.Join(dir, hibDisk), disk); err != nil {
		return nil, fmt.Errorf("wake %s: take disk: %w", id, err)
	}
	putBack := func() { _ = os.Rename(disk, filepath.Join(dir, hibDisk)) }
	full := snap
	full.StateFile = filepath.Join(dir, hibState)
	v, err := d.prepareAt(ctx, id, full, disk)
	if err != nil {
		putBack()
		os.RemoveAll(vdir)
		return nil, err
	}
	if err := d.load(ctx, v); err != nil {
		putBack()
		v.Kill(context.Background())
		return nil, fmt.Errorf("wake %s: %w", id, err)
	}
	return v, nil
}
