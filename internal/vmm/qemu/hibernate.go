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

// Hibernate stops the guest, writes its device state into dir, moves its
// RAM and disk files there (nothing is copied) and ends the process, or
// parks it for a while (park.go). The kernel is asked to start writing the
// RAM file back at once, so its pages become clean, reclaimable cache
// rather than memory held by the sandbox.
func (d *Driver) Hibernate(ctx context.Context, v vmm.VM, dir string) error {
	q := v.(*vm)
	id := q.id
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("hibernate: %w", err)
	}
	fail := func(err error) error {
		os.RemoveAll(tmp)
		_ = q.q.run(context.Background(), "cont", nil, nil) // keep the sandbox running
		return fmt.Errorf("hibernate %s: %w", id, err)
	}
	if err := vmm.WriteMachine(tmp, q.machine); err != nil {
		return fail(err)
	}
	t0 := time.Now()
	if err := q.SaveState(ctx, filepath.Join(tmp, vmm.StateFile)); err != nil {
		return fail(err)
	}
	tSaved := time.Since(t0)
	// The VM's id and directory go aside before its process ends (or is
	// parked): a wake names its VM the same, and the network this process
	// releases when it exits (keyed by id) must not be the wake's.
	park := d.parkFor > 0
	aside := reapPrefix + q.name
	if park {
		aside = parkPrefix + id
	}
	if err := q.rename(aside); err != nil {
		return fail(err)
	}
	defer func() {
		d.log.Debug("hibernate timing", "vm", id, "save_ms", ms(tSaved), "ms", ms(time.Since(t0)), "parked", park)
	}()
	if !park {
		q.Release()
		q.mu.Lock()
		q.killed = true
		q.mu.Unlock()
		_ = syscallKill(q.pid)
		// SaveState stopped the guest and drained its devices: the files
		// moved below are final, and the killed process only has to end.
		// A jailed QEMU's end (its namespaces and mounts torn down) took
		// 30-50 ms against 6-13 ms unjailed (measured under TCG): it is
		// waited for off the hibernate's path, and what the process held
		// is released after it, however this returns.
		d.reaps.Add(1)
		defer func() { go q.reap() }()
	}
	keep := []struct{ from, to string }{{q.mem, vmm.MemFile}, {q.disk, vmm.DiskFile}}
	for i := range q.copies { // volume copies go along; durable volumes stay
		if q.copies[i] {
			keep = append(keep, struct{ from, to string }{filepath.Join(q.dir, vmm.VolumeFileName(i)), vmm.VolumeFileName(i)})
		}
	}
	var moved []string
	for _, f := range keep {
		to := filepath.Join(tmp, f.to)
		if err := os.Rename(f.from, to); err != nil {
			if park {
				q.Kill(context.Background())
			}
			return fmt.Errorf("hibernate %s: keep %s: %w", id, f.to, err)
		}
		moved = append(moved, f.to)
		// Lchown, and no chmod through a link: a link an unjailed VM
		// planted gets no root's ownership change on its target.
		_ = os.Lchown(to, os.Getuid(), os.Getgid())
		if st, err := os.Lstat(to); err == nil && st.Mode().IsRegular() {
			_ = os.Chmod(to, 0o600)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if park {
			q.Kill(context.Background())
		}
		return fmt.Errorf("hibernate %s: %w", id, err)
	}
	cowfs.StartWriteback(filepath.Join(dir, vmm.MemFile))
	if park {
		d.park(id, q, dir, moved)
	}
	return nil
}

// reapPrefix names the directories of ended VMs whose processes are still
// being reaped; List skips them (a dot) and New removes what a crash left.
const reapPrefix = ".reap-"

// sweepReaped removes the directories of ended VMs a crashed server left.
func (d *Driver) sweepReaped() {
	old, _ := filepath.Glob(filepath.Join(d.cfg.Dir, reapPrefix+"*"))
	for _, dir := range old {
		if err := os.RemoveAll(dir); err != nil {
			d.log.Warn("remove an ended vm's directory", "dir", dir, "err", err)
		}
	}
}

// reap waits for a killed VM's process to end, then releases its uid,
// network, cgroup and directory.
func (q *vm) reap() {
	d := q.d
	defer d.reaps.Done()
	select {
	case <-q.exited:
	case <-time.After(time.Minute):
		d.log.Error("hibernated vm's process did not exit; its uid, network and cgroup stay held", "vm", q.id, "pid", q.pid)
		return
	}
	d.releaseUID(q.uid)
	// A VM recovered after a restart is not our child: its exit released
	// no network (a child's did already; a second release is a no-op).
	d.releaseNet(q.netID())
	q.releaseCgroup()
	if err := os.RemoveAll(q.dir); err != nil {
		d.log.Warn("remove hibernated vm's directory", "vm", q.id, "err", err)
	}
}
