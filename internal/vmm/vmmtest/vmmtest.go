// Package vmmtest is a fake vmm.Driver for tests of the layers above the
// VMM (the host agent): a "VM" is a directory holding copies of its
// snapshot's files, and its guest is the real guest agent
// (internal/guest/guesttest) running unprivileged on this host, served on
// the VM's agent socket. Restores, saves, hibernations and recoveries move
// and copy files the way the QEMU driver does, without QEMU, root or KVM,
// so host-agent tests run under go test in seconds. The driver records
// what each restore was asked for (Restores), so tests can check that a
// VM's network policy was passed before it ran.
//
// It is for tests only: the product's own tests of VMs run real QEMU.
package vmmtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guest/guesttest"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Restore is one call of Driver.Restore, as asked.
type Restore struct {
	Snapshot vmm.Snapshot
	Options  vmm.RestoreOptions
}

// Driver is the fake driver.
type Driver struct {
	dir   string // VM directories
	agent string // guest agent binary

	mu       sync.Mutex
	vms      map[string]*VM
	restores []Restore
	prewarm  map[string]int
}

var _ vmm.Driver = (*Driver)(nil)

// New makes a driver whose VMs live under a temporary directory of t's and
// run the guest agent built for t. Every VM still running when t ends is
// killed.
func New(t testing.TB) *Driver {
	t.Helper()
	d := NewDriver(t.TempDir(), guesttest.Binary(t))
	t.Cleanup(d.KillAll)
	return d
}

// NewDriver makes a driver keeping VMs under dir and running agentBinary
// (see guesttest.Binary) as each VM's guest.
func NewDriver(dir, agentBinary string) *Driver {
	return &Driver{dir: dir, agent: agentBinary, vms: map[string]*VM{}, prewarm: map[string]int{}}
}

// Restores returns the restores asked so far, in order.
func (d *Driver) Restores() []Restore {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.restores)
}

// Running returns the ids of the VMs running now, sorted.
func (d *Driver) Running() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []string
	for id := range d.vms {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// VM returns the running VM id, or nil.
func (d *Driver) VM(id string) *VM {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.vms[id]
}

// KillAll kills every running VM.
func (d *Driver) KillAll() {
	d.mu.Lock()
	all := make([]*VM, 0, len(d.vms))
	for _, v := range d.vms {
		all = append(all, v)
	}
	d.mu.Unlock()
	for _, v := range all {
		_ = v.Kill(context.Background())
	}
}

// Template writes a snapshot of machine m into dir (files of a few bytes)
// and returns it, as a template build would.
func Template(dir string, m vmm.Machine) (vmm.Snapshot, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return vmm.Snapshot{}, err
	}
	for _, f := range []string{vmm.MemFile, vmm.StateFile, vmm.DiskFile} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f+" of "+dir), 0o600); err != nil {
			return vmm.Snapshot{}, err
		}
	}
	if err := vmm.WriteMachine(dir, m); err != nil {
		return vmm.Snapshot{}, err
	}
	return vmm.Saved(dir, m), nil
}

func (d *Driver) Name() string            { return "vmmtest" }
func (d *Driver) Accel() pandastack.Accel { return pandastack.AccelTCG }

// Boot is not supported: tests restore from Template snapshots.
func (d *Driver) Boot(ctx context.Context, spec vmm.BootSpec) (vmm.VM, error) {
	return nil, errors.New("vmmtest: cold boot is not supported")
}

// Restore copies snap's files into the VM's directory and starts it.
func (d *Driver) Restore(ctx context.Context, snap vmm.Snapshot, opts vmm.RestoreOptions) (vmm.VM, error) {
	d.mu.Lock()
	d.restores = append(d.restores, Restore{Snapshot: snap, Options: opts})
	d.mu.Unlock()
	id := opts.ID
	if id == "" {
		b := make([]byte, 10)
		_, _ = rand.Read(b)
		id = "vm_" + hex.EncodeToString(b)
	}
	if id != filepath.Base(id) || strings.HasPrefix(id, ".") {
		return nil, fmt.Errorf("restore %s: %q is not a valid vm name", snap.Key, id)
	}
	p, err := opts.Network.Normalize()
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", id, err)
	}
	dir := filepath.Join(d.dir, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("restore %s: %w", id, err)
	}
	v := &VM{d: d, id: id, dir: dir, machine: snap.Machine, network: p, exited: make(chan struct{})}
	files := []struct{ from, to string }{{snap.MemFile, vmm.MemFile}, {snap.StateFile, vmm.StateFile}, {snap.Disk, vmm.DiskFile}}
	for i, f := range snap.Volumes {
		if f.Path == "" {
			continue
		}
		if i >= snap.Machine.VolumeSlots {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("restore %s: volume slot %d: the machine has %d", id, i, snap.Machine.VolumeSlots)
		}
		if f.Copy {
			files = append(files, struct{ from, to string }{f.Path, vmm.VolumeFileName(i)})
		} else {
			v.durable[i] = f.Path
		}
	}
	for _, f := range files {
		if err := copyFile(filepath.Join(dir, f.to), f.from); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("restore %s: %w", id, err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.vms[id] != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("restore %s: a vm with this id runs", id)
	}
	d.vms[id] = v
	return v, nil
}

// Hibernate moves the VM's files into dir and ends it.
func (d *Driver) Hibernate(ctx context.Context, v vmm.VM, dir string) error {
	fv := v.(*VM)
	if err := fv.save(dir, os.Rename); err != nil {
		return fmt.Errorf("hibernate %s: %w", fv.id, err)
	}
	fv.end()
	return os.RemoveAll(fv.dir)
}

// Checkpoint copies the VM's files into dir; the VM runs on.
func (d *Driver) Checkpoint(ctx context.Context, v vmm.VM, dir string) error {
	fv := v.(*VM)
	if err := fv.save(dir, func(from, to string) error { return copyFile(to, from) }); err != nil {
		return fmt.Errorf("checkpoint %s: %w", fv.id, err)
	}
	return nil
}

// Prewarm records n; the fake keeps no pool.
func (d *Driver) Prewarm(snap vmm.Snapshot, n int) {
	d.mu.Lock()
	d.prewarm[snap.Key] = n
	d.mu.Unlock()
}

// PoolTarget is how many processes Prewarm last asked to keep for the
// snapshot with key (0 when it never did).
func (d *Driver) PoolTarget(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.prewarm[key]
}

// Seal does nothing: the fake never writes a snapshot's files.
func (d *Driver) Seal(snap vmm.Snapshot) error { return nil }

// Recover returns the running VM id (as a restarted server would find its
// process), or removes what is left of it and returns vmm.ErrGone.
func (d *Driver) Recover(ctx context.Context, id string) (vmm.VM, error) {
	d.mu.Lock()
	v := d.vms[id]
	d.mu.Unlock()
	if v != nil {
		return v, nil
	}
	_ = os.RemoveAll(filepath.Join(d.dir, id))
	return nil, vmm.ErrGone
}

// List returns the VM directories (running VMs and what crashed ones left).
func (d *Driver) List() ([]string, error) {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// Close leaves VMs running, as the QEMU driver leaves restored VMs.
func (d *Driver) Close() error { return nil }

// VM is a fake VM: a directory and, while a host is connected, a guest
// agent process.
type VM struct {
	d       *Driver
	id, dir string
	machine vmm.Machine
	network pandastack.NetworkPolicy
	durable [vmm.VolumeSlots]string

	mu     sync.Mutex
	agent  *guesttest.Agent
	ended  bool
	exited chan struct{}
	// settled counts Settle calls made while a guest agent ran; early
	// counts those made before one did.
	settled, early int
}

// Settle records that the host put on the caps a VM takes once its guest
// answers (the qemu driver's read cap).
func (v *VM) Settle() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.agent == nil {
		v.early++
	} else {
		v.settled++
	}
	return nil
}

// Settled returns how many times Settle was called while the VM's guest
// agent ran, and how many times before it did.
func (v *VM) Settled() (afterAgent, early int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.settled, v.early
}

func (v *VM) ID() string          { return v.id }
func (v *VM) Dir() string         { return v.dir }
func (v *VM) PID() int            { return 0 }
func (v *VM) AgentSocket() string { return filepath.Join(v.dir, "port.sock") }

// Network is the policy the VM was started with, normalized.
func (v *VM) Network() pandastack.NetworkPolicy { return v.network }

// AgentConn starts a guest agent for this VM and returns the host's end of
// its port (the agent of an earlier connection is stopped).
func (v *VM) AgentConn(ctx context.Context) (net.Conn, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ended {
		return nil, vmm.ErrGone
	}
	if v.agent != nil {
		v.agent.Stop()
		v.agent = nil
	}
	a, err := guesttest.Start(ctx, v.d.agent, v.dir)
	if err != nil {
		return nil, fmt.Errorf("start guest agent of %s: %w", v.id, err)
	}
	v.agent = a
	return a.Conn, nil
}

// SaveState writes a device state file.
func (v *VM) SaveState(ctx context.Context, path string) error {
	return os.WriteFile(path, []byte("state of "+v.id), 0o600)
}

// Release stops the guest agent of this process's connection; the VM runs
// on, for Recover.
func (v *VM) Release() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.agent != nil {
		v.agent.Stop()
		v.agent = nil
	}
}

// Kill ends the VM and removes its directory.
func (v *VM) Kill(ctx context.Context) error {
	v.end()
	return os.RemoveAll(v.dir)
}

// Crash ends the VM as a dying process would: its directory stays.
func (v *VM) Crash() { v.end() }

// Exited is closed when the VM has ended.
func (v *VM) Exited() <-chan struct{} { return v.exited }

func (v *VM) end() {
	v.mu.Lock()
	if !v.ended {
		v.ended = true
		if v.agent != nil {
			v.agent.Stop()
			v.agent = nil
		}
		close(v.exited)
	}
	v.mu.Unlock()
	v.d.mu.Lock()
	if v.d.vms[v.id] == v {
		delete(v.d.vms, v.id)
	}
	v.d.mu.Unlock()
}

// save writes the VM into dir as vmm.Saved expects it, moving or copying
// its files with put(from, to).
func (v *VM) save(dir string, put func(from, to string) error) error {
	tmp := dir + ".tmp"
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	fail := func(err error) error { os.RemoveAll(tmp); return err }
	names := []string{vmm.MemFile, vmm.DiskFile}
	for i := 0; i < vmm.VolumeSlots; i++ {
		if _, err := os.Stat(filepath.Join(v.dir, vmm.VolumeFileName(i))); err == nil {
			names = append(names, vmm.VolumeFileName(i))
		}
	}
	for _, n := range names {
		if err := put(filepath.Join(v.dir, n), filepath.Join(tmp, n)); err != nil {
			return fail(err)
		}
	}
	if err := v.SaveState(context.Background(), filepath.Join(tmp, vmm.StateFile)); err != nil {
		return fail(err)
	}
	if err := vmm.WriteMachine(tmp, v.machine); err != nil {
		return fail(err)
	}
	return os.Rename(tmp, dir)
}

func copyFile(to, from string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
