package qemu

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/jail"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Jailing. When the server runs as root with per-VM uids, every QEMU runs
// in a jail (package jail): its own mount, network, pid, ipc and uts
// namespaces, a root holding only its RAM file, serial log, kernel and
// initrd (and, for a cold boot, its disk and the disk's backing chain),
// the host's /usr read-only, a cgroup capping it, no capabilities. Its disk
// and volumes are passed as descriptors, and so are its QMP and agent
// sockets, which the server binds: the VM directory stays root's, so the
// VM's uid can neither plant links in it nor rename what the server reads.

// cgroupGroup is the server's group of VM cgroups.
const cgroupGroup = "pandastack-vms"

// tcgOverhead is what a QEMU process may use beyond its guest's RAM under
// TCG: the translated-code cache (up to 1 GiB by default in QEMU 7.2) and
// QEMU's own heap. Under KVM there is no translation cache.
const (
	tcgOverhead = 1280 << 20
	kvmOverhead = 256 << 20
	vmPids      = 256 // QEMU's threads: vCPUs, I/O workers (up to 64), RCU, ...
	// Per-VM bandwidth on the device of the VM files, where the kernel
	// can throttle it.
	vmReadBPS  = 512 << 20
	vmWriteBPS = 256 << 20
)

// setupJail decides whether VMs are jailed and prepares their cgroups.
func (d *Driver) setupJail() {
	switch {
	case d.cfg.UIDBase <= 0:
		d.jailWhy = "off: VMs run as the server's own user (no per-VM uids)"
		return
	case d.cfg.NoJail || os.Getenv("PANDASTACK_JAIL") == "off":
		d.jailWhy = "off: disabled by configuration"
		return
	}
	if err := jail.Available(); err != nil {
		d.jailWhy = "off: " + err.Error()
		return
	}
	d.jailed = true
	// One group per server (by its VM directory), so that a sweep never
	// meets another server's VMs.
	h := sha256.Sum256([]byte(d.cfg.Dir))
	d.cgroups = jail.ProbeCgroups(cgroupGroup + "/" + hex.EncodeToString(h[:4]))
	d.cgroups.Sweep()
	var st unix.Stat_t
	if err := unix.Stat(d.cfg.Dir, &st); err == nil {
		d.ioDev = fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	}
	d.jailWhy = "on: mount, network, pid, ipc and uts namespaces, a root of its own files, no capabilities; " + d.cgroups.Status()
	d.log.Info("vm jail", "status", d.jailWhy)
}

// Confinement says how VMs are confined on this host (for doctor and logs).
func (d *Driver) Confinement() string { return d.jailWhy }

// Jailed reports whether VM processes run in jails.
func (d *Driver) Jailed() bool { return d.jailed }

// CgroupMode is the cgroup hierarchy VMs are capped with: "v2", "v1" or "".
func (d *Driver) CgroupMode() string {
	if d.cgroups == nil {
		return ""
	}
	return d.cgroups.Mode()
}

// vmFiles are the files a VM opens by path, which its jail must hold.
type vmFiles struct {
	mem      string
	bootDisk string // a cold boot's disk ("" when the disk is passed open)
}

// limits are the cgroup caps of a VM of machine m.
func (d *Driver) limits(m vmm.Machine) jail.Limits {
	over := int64(tcgOverhead)
	if d.cfg.Accel == pandastack.AccelKVM {
		over = kvmOverhead
	}
	// One CPU per vCPU, plus one for QEMU's own threads (device
	// emulation in the main loop, a save's or a load's stream), which run
	// beside the vCPUs: capped at the vCPUs alone, a wake or a fork's save
	// used its period's quota in tens of milliseconds and then waited out
	// the rest of the 100 ms period (measured under TCG: wake p50 1.5–2.3×,
	// fork 1.5× against no cgroups; BENCHMARKS.md, session 7).
	cpus := max(m.CPUs, 1) + 1
	return jail.Limits{CPUs: cpus, MemoryBytes: int64(m.MemoryMiB)<<20 + over, Pids: vmPids,
		IODevice: d.ioDev, ReadBPS: vmReadBPS, WriteBPS: vmWriteBPS}
}

// jailCommand makes the command that starts a VM's QEMU in its jail: its
// cgroup made, its sockets bound (passed after files), its serial log
// created for uid. cleanup undoes what it made if the VM does not start.
func (d *Driver) jailCommand(v *vm, uid int, args []string, f vmFiles, nfiles int) (cmd *exec.Cmd, sockets []*os.File, err error) {
	fail := func(err error) (*exec.Cmd, []*os.File, error) {
		closeAll(sockets)
		_ = d.cgroups.Remove(v.name)
		return nil, nil, err
	}
	serial := filepath.Join(v.dir, serialLog)
	sf, err := jail.OpenBeneath(v.dir, serialLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fail(fmt.Errorf("create serial log: %w", err))
	}
	err = sf.Chown(uid, uid)
	sf.Close()
	if err != nil {
		return fail(fmt.Errorf("chown serial log: %w", err))
	}
	for _, name := range socketNames(v.machine) {
		s, err := listenUnix(filepath.Join(v.dir, name))
		if err != nil {
			return fail(err)
		}
		sockets = append(sockets, s)
	}
	binds := []jail.Bind{{Path: v.machine.Kernel}, {Path: serial, Writable: true}, {Path: f.mem, Writable: true}}
	if v.machine.Initrd != "" {
		binds = append(binds, jail.Bind{Path: v.machine.Initrd})
	}
	if f.bootDisk != "" {
		binds = append(binds, jail.Bind{Path: f.bootDisk, Writable: true})
		chain, err := jail.BackingChain(f.bootDisk)
		if err != nil {
			return fail(err)
		}
		for _, p := range chain {
			binds = append(binds, jail.Bind{Path: p})
		}
	}
	spec := jail.Spec{Binds: binds, UID: uid, GID: uid, Groups: d.groups, Nice: vmNice, MergeMemory: d.merge}
	if d.cfg.Accel == pandastack.AccelKVM {
		spec.Devices = append(spec.Devices, "/dev/kvm")
	}
	lim := d.limits(v.machine)
	lim.ReadBPS = 0 // from the guest's first answer: see (*vm).Settle
	dirs, skipped, err := d.cgroups.Create(v.name, lim)
	if err != nil {
		return fail(err)
	}
	if len(skipped) > 0 {
		d.log.Debug("vm cgroup limits the kernel refused", "vm", v.name, "skipped", skipped)
	}
	spec.Cgroups = dirs
	full := append(append([]string(nil), args...), socketArgs(v.dir, v.machine, 3+nfiles)...)
	cmd, err = jail.Command(spec, d.cfg.Binary, full...)
	if err != nil {
		return fail(err)
	}
	return cmd, sockets, nil
}

// listenUnix binds a listening unix socket at path and returns it as a
// file to pass: the socket file stays when the server's copy is closed.
func listenUnix(path string) (*os.File, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("bind %s: %w", filepath.Base(path), err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("bind %s: %w", filepath.Base(path), err)
	}
	l.SetUnlinkOnClose(false)
	f, err := l.File()
	l.Close()
	if err != nil {
		return nil, fmt.Errorf("bind %s: %w", filepath.Base(path), err)
	}
	return f, nil
}

// Settle puts on the caps a restore must not pay, once the VM's guest
// has answered: the read cap. Until then the guest's page faults read the
// snapshot's memory file cold (a clone has a page cache of its own), and
// under a cap of vmReadBPS a wake waited out ~90 ms of read-around
// (measured under TCG: wake 203 ms capped from the start, 105 ms capped
// from the answer, 92 ms with no cgroup). Calls after the first do
// nothing.
func (v *vm) Settle() error {
	if !v.d.jailed || v.d.cgroups == nil || v.settled.Swap(true) {
		return nil
	}
	return v.d.cgroups.CapReads(v.name, v.d.ioDev, v.d.limits(v.machine).ReadBPS)
}

// releaseCgroupOf removes the cgroup of VM name once process pid has left
// it, in the background: a recovered VM's process is not the server's
// child, and its cgroup holds it until its new parent reaps it.
func (d *Driver) releaseCgroupOf(name string, pid int) {
	if d.cgroups == nil || name == "" {
		return
	}
	go func() { _ = d.removeCgroup(name, 10*time.Second) }()
}

// removeCgroup removes the cgroup of VM name, retrying for up to max while
// the kernel still counts its (exiting, or exited but unreaped) process.
func (d *Driver) removeCgroup(name string, max time.Duration) error {
	deadline := time.Now().Add(max)
	for {
		err := d.cgroups.Remove(name)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// releaseCgroup removes a VM's cgroup once its process is gone.
func (v *vm) releaseCgroup() {
	if v.d.cgroups == nil {
		return
	}
	if err := v.d.removeCgroup(v.name, 5*time.Second); err != nil {
		v.d.log.Warn("remove vm cgroup", "vm", v.name, "err", err)
	}
}

// uidOf returns the real uid of process pid.
func uidOf(pid int) (int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d", pid), &st); err != nil {
		return -1, err
	}
	return int(st.Uid), nil
}
