package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pandastack/pandastack/internal/vmm"
)

// BareRestores restores snap n times at once, each in a QEMU process of its
// own started for it (no pool), with no network, and kills them all: the
// VMM's own cost of a restore, the floor a create stands on (see
// `pandastack bench`). The files are cloned before any process starts; each
// restore is timed until QMP query-status reports the restored VM running,
// or, with answer, until answer returns: it is given the VM's agent socket,
// connected before the state loads (as a pooled process's is), so it can
// time the guest's first answer (and what else it asks of the guest),
// which under TCG costs the re-translation of every guest instruction it
// runs. Each is timed twice: from its QEMU's exec, and from the moment the
// process was up and handed the state (what a create from the pool pays).
// wall is from the first exec until the last one is done.
func (d *Driver) BareRestores(ctx context.Context, snap vmm.Snapshot, n int, answer vmm.FloorAnswer) (each []vmm.RestoreTime, wall time.Duration, err error) {
	if n < 1 {
		return nil, 0, fmt.Errorf("bare restores: n must be at least 1, not %d", n)
	}
	st, err := os.Stat(snap.Disk)
	if err != nil {
		return nil, 0, fmt.Errorf("bare restore %s: %w", snap.Key, err)
	}
	if snap.HasVolumes() {
		return nil, 0, fmt.Errorf("bare restore %s: only snapshots without volumes", snap.Key)
	}
	type floorVM struct {
		id, dir string
		uid     int
		v       *vm
		t       vmm.RestoreTime
		err     error
	}
	vms := make([]*floorVM, n)
	defer func() {
		for _, f := range vms {
			if f == nil {
				continue
			}
			if f.v != nil {
				if kerr := f.v.Kill(context.WithoutCancel(ctx)); kerr != nil {
					err = errors.Join(err, kerr)
				}
				continue
			}
			d.releaseUID(f.uid)
			os.RemoveAll(f.dir)
		}
	}()
	for i := range vms {
		id := "floor_" + newID()[3:]
		f := &floorVM{id: id, dir: filepath.Join(d.cfg.Dir, id), uid: d.allocUID()}
		vms[i] = f
		if err := os.MkdirAll(f.dir, 0o700); err != nil {
			return nil, 0, fmt.Errorf("bare restore: create vm dir: %w", err)
		}
		if err := makeFile(filepath.Join(f.dir, vmm.MemFile), snap.MemFile, int64(snap.Machine.MemoryMiB)<<20, f.uid); err != nil {
			return nil, 0, fmt.Errorf("bare restore: %w", err)
		}
		if err := makeFile(filepath.Join(f.dir, vmm.DiskFile), snap.Disk, st.Size(), f.uid); err != nil {
			return nil, 0, fmt.Errorf("bare restore: %w", err)
		}
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, f := range vms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.v, f.t, f.err = d.bareRestore(ctx, snap, f.id, f.uid, answer)
			if f.v == nil {
				f.uid = 0 // released by the failed start
			}
		}()
	}
	wg.Wait()
	wall = time.Since(t0)
	for _, f := range vms {
		if f.err != nil {
			return nil, 0, fmt.Errorf("bare restore %s: %w", snap.Key, f.err)
		}
		each = append(each, f.t)
	}
	return each, wall, nil
}

// bareRestore starts QEMU on the files already cloned into the VM
// directory id, loads snap's device state and resumes it, timed until QEMU
// reports it running (or answer returned). On error the returned VM, if any, is
// still to be killed. It owns uid (as start does): released on failure
// or when the VM ends.
func (d *Driver) bareRestore(ctx context.Context, snap vmm.Snapshot, id string, uid int, answer vmm.FloorAnswer) (_ *vm, _ vmm.RestoreTime, err error) {
	started := false
	defer func() {
		if err != nil && !started {
			d.releaseUID(uid)
		}
	}()
	dir := filepath.Join(d.cfg.Dir, id)
	mem, disk := filepath.Join(dir, vmm.MemFile), filepath.Join(dir, vmm.DiskFile)
	// The same arguments as a pooled process (prepare), so the state loads.
	args := buildArgs(argSpec{dir: dir, accel: d.cfg.Accel, m: snap.Machine, memFile: mem,
		disk: disk, diskFormat: "raw", diskCache: "unsafe", diskFD: true, incoming: true, volFD: 5})
	rw, err := os.OpenFile(disk, os.O_RDWR, 0)
	if err != nil {
		return nil, vmm.RestoreTime{}, fmt.Errorf("open disk: %w", err)
	}
	defer rw.Close()
	ro, err := os.Open(disk)
	if err != nil {
		return nil, vmm.RestoreTime{}, fmt.Errorf("open disk: %w", err)
	}
	defer ro.Close()
	slots, err := openSlots(dir, [vmm.VolumeSlots]vmm.VolumeFile{}, uid, snap.Machine.VolumeSlots)
	if err != nil {
		return nil, vmm.RestoreTime{}, err
	}
	defer closeAll(slots)
	sf, err := os.Open(snap.StateFile)
	if err != nil {
		return nil, vmm.RestoreTime{}, fmt.Errorf("open state file: %w", err)
	}
	defer sf.Close()
	started = true
	v, err := d.startVM(ctx, id, uid, args, "", snap.Machine, false, vmFiles{mem: mem}, append([]*os.File{rw, ro}, slots...)...)
	if err != nil {
		return nil, vmm.RestoreTime{}, err
	}
	// What a pooled process did while it waited (prepare): capabilities
	// set, the agent's socket connected, and the direct port's.
	caps := map[string]any{"capabilities": []map[string]any{
		{"capability": "x-ignore-shared", "state": true}, {"capability": "events", "state": true}}}
	if err := v.q.run(ctx, "migrate-set-capabilities", caps, nil); err != nil {
		return v, vmm.RestoreTime{}, err
	}
	var agent net.Conn
	if answer != nil {
		if agent, err = v.AgentConn(ctx); err != nil {
			return v, vmm.RestoreTime{}, fmt.Errorf("connect agent socket: %w", err)
		}
		defer agent.Close()
	}
	var direct net.Conn
	if snap.Machine.DirectPort {
		if direct, err = v.DirectConn(ctx); err != nil {
			return v, vmm.RestoreTime{}, fmt.Errorf("connect direct socket: %w", err)
		}
		defer direct.Close()
	}
	loading := time.Now() // a create takes a pooled process here
	done := func() vmm.RestoreTime {
		return vmm.RestoreTime{FromExec: time.Since(v.started), FromLoad: time.Since(loading)}
	}
	if err := v.q.runFD(ctx, "getfd", map[string]any{"fdname": "state"}, nil, int(sf.Fd())); err != nil {
		return v, vmm.RestoreTime{}, fmt.Errorf("pass state file: %w", err)
	}
	if err := d.load(ctx, v, nil); err != nil {
		return v, vmm.RestoreTime{}, err
	}
	if answer != nil {
		if err := answer(ctx, agent, direct); err != nil {
			return v, vmm.RestoreTime{}, fmt.Errorf("the guest's first answer: %w", err)
		}
		return v, done(), nil
	}
	for {
		st, err := v.runState(ctx)
		if err != nil {
			return v, vmm.RestoreTime{}, err
		}
		if st == "running" {
			return v, done(), nil
		}
		select {
		case <-ctx.Done():
			return v, vmm.RestoreTime{}, ctx.Err()
		case <-v.exited:
			return v, vmm.RestoreTime{}, vmmGone()
		case <-time.After(time.Millisecond):
		}
	}
}

// Processes maps the id of every VM with a live process on this host
// (sandboxes, pooled processes, builds) to its QEMU's pid, from the
// records the VMs keep in their directories.
func (d *Driver) Processes() (map[string]int, error) {
	ids, err := d.List()
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, id := range ids {
		b, err := os.ReadFile(filepath.Join(d.cfg.Dir, id, metaFile))
		if err != nil {
			continue // being made or removed
		}
		var m meta
		if json.Unmarshal(b, &m) != nil || m.PID <= 0 || !isOurQEMU(m.PID, m.name()) {
			continue
		}
		out[id] = m.PID
	}
	return out, nil
}
