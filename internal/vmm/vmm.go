// Package vmm defines the one interface PandaStack drives virtual machine
// monitors through. QEMU implements it (vmm/qemu); a Firecracker or Cloud
// Hypervisor driver would sit behind the same interface.
//
// Lifecycle: Boot cold-boots a VM whose RAM lives in a shared file; SaveState
// freezes it and writes its device state, which with the RAM file makes a
// snapshot. Restore starts a new VM from such a snapshot, its RAM mapped
// copy-on-write. Recover re-attaches to a VM left running by an earlier
// process. Kill ends a VM and removes everything it owned on the host.
package vmm

import (
	"context"
	"errors"

	"github.com/pandastack/pandastack"
)

// ErrGone is returned when a VM's process is no longer running.
var ErrGone = errors.New("vm process is gone")

// Machine is the virtual hardware. A snapshot restores only onto a Machine
// equal to the one that saved it.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"` // e.g. "host" (KVM), "max" (TCG)
	MemoryMiB int    `json:"memory_mib"`
	Kernel    string `json:"kernel"`
	Initrd    string `json:"initrd"`
	Cmdline   string `json:"cmdline"`
}

// BootSpec describes a cold boot.
type BootSpec struct {
	ID      string
	Machine Machine
	Disk    string // root disk (raw or qcow2, by extension), used in place: it becomes the snapshot's disk
	MemFile string // RAM backing file, shared: it becomes the snapshot's memory
}

// Snapshot is what a VM is restored from.
type Snapshot struct {
	Key       string // identifies the snapshot (pools are kept per key)
	Machine   Machine
	MemFile   string // RAM file, mapped copy-on-write by every restore
	StateFile string // device state
	BaseDisk  string // disk at snapshot time (raw or qcow2, by extension); each restore gets an overlay on it
}

// VM is a running virtual machine.
type VM interface {
	ID() string
	Dir() string
	PID() int
	// AgentSocket is the unix socket of the guest agent's virtio-serial port.
	AgentSocket() string
	// SaveState pauses the VM and writes its device state to path. RAM is not
	// copied: it stays in the shared memory file. The VM stays paused.
	SaveState(ctx context.Context, path string) error
	// Release closes this process's connections to the VM without stopping
	// it; another process re-attaches with Driver.Recover.
	Release()
	// Kill stops the VM and removes its files. Safe to call more than once.
	Kill(ctx context.Context) error
	// Exited is closed when the VM process has ended.
	Exited() <-chan struct{}
}

// Driver starts VMs.
type Driver interface {
	Name() string
	Accel() pandastack.Accel
	Boot(ctx context.Context, spec BootSpec) (VM, error)
	// Restore starts a VM from a snapshot. When it returns, the guest runs.
	Restore(ctx context.Context, snap Snapshot) (VM, error)
	// Hibernate saves a running VM's whole state (devices and all its RAM)
	// and its disk into dir, then ends the VM. WakeVM restores it from dir
	// under the same id; snap is the snapshot it was first restored from
	// (the machine must match).
	Hibernate(ctx context.Context, v VM, dir string) error
	WakeVM(ctx context.Context, id, dir string, snap Snapshot) (VM, error)
	// Checkpoint saves a running VM whole (devices, RAM, a copy of its disk)
	// into dir and lets it run on; RestoreCheckpoint starts a new VM — a fork —
	// from dir. snap is the template snapshot the VM came from.
	Checkpoint(ctx context.Context, v VM, dir string) error
	RestoreCheckpoint(ctx context.Context, dir string, snap Snapshot) (VM, error)
	// Prewarm keeps n processes ready to restore snap, off the create path.
	Prewarm(snap Snapshot, n int)
	// Seal makes a new snapshot's files read-only for VMs (as far as the VMM
	// allows: see the driver's doc).
	Seal(snap Snapshot) error
	// Recover re-attaches to the VM with this id, if its process still runs.
	// It returns ErrGone, after removing what was left, if it does not.
	Recover(ctx context.Context, id string) (VM, error)
	// List returns the ids of VMs with state on this host (running or not).
	List() ([]string, error)
	Close() error
}
