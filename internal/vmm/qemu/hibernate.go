package qemu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Hibernate stops the guest, writes its device state into dir, ends the
// process and moves its RAM and disk files there: nothing is copied. The
// kernel is asked to start writing the RAM file back at once, so its pages
// become clean, reclaimable cache rather than memory held by the sandbox.
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
	if err := vmm.WriteMachine(tmp, q.machine); err != nil {
		return fail(err)
	}
	if err := q.SaveState(ctx, filepath.Join(tmp, vmm.StateFile)); err != nil {
		return fail(err)
	}
	q.Release()
	_ = syscallKill(q.pid)
	select {
	case <-q.exited:
	case <-time.After(10 * time.Second):
		return fail(fmt.Errorf("qemu %d did not exit", q.pid))
	}
	q.mu.Lock()
	q.killed = true
	q.mu.Unlock()
	d.releaseUID(q.uid)
	// A VM recovered after a restart is not our child: its exit released
	// no network (a child's did already; a second release is a no-op).
	d.releaseNet(q.netID())
	q.releaseCgroup()
	keep := []struct{ from, to string }{{q.mem, vmm.MemFile}, {q.disk, vmm.DiskFile}}
	for i := range q.copies { // volume copies go along; durable volumes stay
		if q.copies[i] {
			keep = append(keep, struct{ from, to string }{filepath.Join(q.dir, vmm.VolumeFileName(i)), vmm.VolumeFileName(i)})
		}
	}
	for _, f := range keep {
		to := filepath.Join(tmp, f.to)
		if err := os.Rename(f.from, to); err != nil {
			return fmt.Errorf("hibernate %s: keep %s: %w", q.id, f.to, err)
		}
		// Lchown, and no chmod through a link: a link an unjailed VM
		// planted gets no root's ownership change on its target.
		_ = os.Lchown(to, os.Getuid(), os.Getgid())
		if st, err := os.Lstat(to); err == nil && st.Mode().IsRegular() {
			_ = os.Chmod(to, 0o600)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("hibernate %s: %w", q.id, err)
	}
	cowfs.StartWriteback(filepath.Join(dir, vmm.MemFile))
	return os.RemoveAll(q.dir)
}
