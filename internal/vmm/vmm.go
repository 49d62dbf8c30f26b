// Package vmm defines the one interface PandaStack drives virtual machine
// monitors through. QEMU implements it (vmm/qemu); a Firecracker or Cloud
// Hypervisor driver would sit behind the same interface.
//
// Every VM's RAM and disk are files of its own, on a filesystem that can
// reflink (see package cowfs), and the VM maps its RAM file shared: so the
// VM's whole state is three files — RAM, disk, and the device state that
// SaveState writes in milliseconds (RAM is not copied). Snapshots, forks,
// hibernation and restores are reflink copies of those files, never copies
// of the bytes.
//
// Lifecycle: Boot cold-boots a VM; SaveState freezes it and writes its device
// state, which with the RAM and disk files makes a snapshot. Restore starts a
// new VM from a snapshot's files. Recover re-attaches to a VM left running by
// an earlier process. Kill ends a VM and removes everything it owned on the
// host.
package vmm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/pandastack/pandastack"
)

// FloorAnswer ends a bare restore's clock (the QEMU driver's
// BareRestores) when the guest has answered: it is given the restored
// VM's agent socket and its direct port (nil when its machine has none).
type FloorAnswer func(ctx context.Context, agent, direct net.Conn) error

// RestoreTime is one bare restore's clock, the floor a create stands on
// (the QEMU driver's BareRestores, measured by `pandastack bench`).
type RestoreTime struct {
	// FromExec runs from the VMM process's exec; FromLoad from the moment
	// a process already up is handed the state, as a pooled one is at a
	// create.
	FromExec, FromLoad time.Duration
}

// ErrGone is returned when a VM's process is no longer running.
var ErrGone = errors.New("vm process is gone")

// Machine is the virtual hardware. A snapshot restores only onto a Machine
// equal to the one that saved it.
type Machine struct {
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model,omitempty"` // e.g. "host" (KVM), "max" (TCG)
	// NoPIT: the machine has no i8254 PIT. A snapshot saved with one
	// carries its state and loads only where it exists, so it is part of
	// the machine (records from before it have one).
	NoPIT bool `json:"no_pit,omitempty"`
	// FreePageReporting: the machine has a virtio balloon that only
	// reports free pages (its guest tells the host which pages it freed,
	// and the host drops them from the RAM file). A device, so part of the
	// machine too.
	FreePageReporting bool   `json:"free_page_reporting,omitempty"`
	MemoryMiB         int    `json:"memory_mib"`
	Kernel            string `json:"kernel"`
	Initrd            string `json:"initrd"`
	Cmdline           string `json:"cmdline"`
	// VolumeSlots is how many volume drives the VM has: VolumeSlots for
	// every machine baked since volumes exist, 0 for one saved before
	// (its snapshots restore onto the devices they were saved with).
	VolumeSlots int `json:"volume_slots,omitempty"`
	// DirectPort: the machine has a second virtio-serial port
	// (guestproto.DirectPortName) that one process in the guest opens
	// itself — a stream from the host straight to it, with no agent, no
	// multiplexing and no guest TCP between (a function's runtime is
	// called on it). A device, so part of the machine: records from
	// before it have none.
	DirectPort bool `json:"direct_port,omitempty"`
}

// BootSpec describes a cold boot.
type BootSpec struct {
	ID      string
	Machine Machine
	Disk    string // root disk (raw or qcow2, by extension), used in place: it becomes the snapshot's disk
	MemFile string // RAM backing file, shared: it becomes the snapshot's memory
}

// Names of a saved VM's files inside its directory.
const (
	MemFile   = "mem"
	StateFile = "state"
	DiskFile  = "disk.raw"
)

// VolumeSlots is how many volume drives every VM has (besides its root
// disk; see Machine.VolumeSlots). A snapshot restores only onto the same
// devices, so the slots exist in every VM, bakes included: an empty slot
// holds a small placeholder file of PlaceholderSize bytes.
const VolumeSlots = 2

// PlaceholderSize is the size of an empty volume slot's file.
const PlaceholderSize = 1 << 20

// VolumeFile is the file in one of a VM's volume slots.
type VolumeFile struct {
	// Path is the file; "" leaves the slot empty (a placeholder).
	Path string
	// Copy: the VM gets a reflink copy of Path of its own (which goes with
	// the VM, like its disk); otherwise the VM opens Path itself, durably
	// (a volume, never copied, never removed by the VM).
	Copy bool
}

// VolumeFileName is the name of slot i's file inside a saved VM's directory.
func VolumeFileName(i int) string { return fmt.Sprintf("vol%d.raw", i) }

// Snapshot is what a VM is restored from: its three files, and what its
// volume slots hold. A restore clones them (reflink), so the files stay as
// they are and serve any number of restores.
type Snapshot struct {
	Key       string // names the snapshot in logs
	Machine   Machine
	MemFile   string // RAM
	StateFile string // device state
	Disk      string // raw root disk
	// Volumes: what the restored VM's volume slots hold. A saved VM's own
	// slot files (copies kept by Checkpoint or Hibernate) come as Copy; the
	// caller sets durable volumes.
	Volumes [VolumeSlots]VolumeFile
}

// HasVolumes reports whether any slot holds a file.
func (s Snapshot) HasVolumes() bool {
	for _, v := range s.Volumes {
		if v.Path != "" {
			return true
		}
	}
	return false
}

// machineFile records, next to a saved VM's files, the machine it restores on.
const machineFile = "machine.json"

// WriteMachine records m in dir, for LoadSaved.
func WriteMachine(dir string, m Machine) error {
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, machineFile), b, 0o600); err != nil {
		return fmt.Errorf("record machine: %w", err)
	}
	return nil
}

// LoadSaved is the snapshot a Checkpoint or Hibernate left in dir.
func LoadSaved(dir string) (Snapshot, error) {
	b, err := os.ReadFile(filepath.Join(dir, machineFile))
	if err != nil {
		return Snapshot{}, fmt.Errorf("read saved vm: %w", err)
	}
	var m Machine
	if err := json.Unmarshal(b, &m); err != nil {
		return Snapshot{}, fmt.Errorf("read saved vm %s: %w", dir, err)
	}
	return Saved(dir, m), nil
}

// Saved is the snapshot kept in dir under the standard file names, with
// the volume copies kept there (VolumeFileName) in their slots.
func Saved(dir string, m Machine) Snapshot {
	s := Snapshot{Key: dir, Machine: m, MemFile: filepath.Join(dir, MemFile),
		StateFile: filepath.Join(dir, StateFile), Disk: filepath.Join(dir, DiskFile)}
	for i := range s.Volumes {
		p := filepath.Join(dir, VolumeFileName(i))
		if _, err := os.Stat(p); err == nil {
			s.Volumes[i] = VolumeFile{Path: p, Copy: true}
		}
	}
	return s
}

// RestoreOptions is what a restore needs besides the snapshot. It is
// passed explicitly, never through the context, so that no path (template
// create, snapshot restore, fork, wake) can start a VM without its policy.
type RestoreOptions struct {
	// ID names the VM. The caller names its machines (sandboxes, databases
	// and apps use prefixes of their own); "" lets the driver pick a name.
	// The name must be a valid file name.
	ID string
	// Network is the VM's egress policy from its first instruction. The
	// zero value allows all egress.
	Network pandastack.NetworkPolicy
}

// VM is a running virtual machine.
type VM interface {
	ID() string
	Dir() string
	PID() int
	// AgentSocket is the unix socket of the guest agent's virtio-serial port.
	AgentSocket() string
	// SaveState pauses the VM and writes its device state to path. RAM is not
	// copied: it stays in the shared memory file. The VM stays paused. The
	// file is not fsynced: a caller that keeps it makes it durable.
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
	// Restore starts a VM from a snapshot, named and with the network
	// policy opts gives it: the policy is in force before the guest runs a
	// single instruction. When it returns, the guest runs. A durable volume
	// in a slot is opened in place, and the guest is told its size (a
	// virtio config change); mounting it is the guest's work. The snapshot's
	// files are left as they were (a wake removes its hibernation directory
	// itself once the VM answers).
	Restore(ctx context.Context, snap Snapshot, opts RestoreOptions) (VM, error)
	// Hibernate saves a running VM whole into dir (as Saved(dir, machine))
	// and stops it; its RAM and disk files, and its volume copies, move
	// there, nothing is copied. Durable volumes stay where they are: the
	// caller puts them back in snap.Volumes, and restores it under the
	// same id (RestoreOptions.ID) to wake it. The driver may keep the
	// stopped process a while (QEMU parks it): a wake then continues it,
	// and a wake after it ended restores from dir alike. Removing dir
	// ends a kept process.
	Hibernate(ctx context.Context, v VM, dir string) error
	// Checkpoint saves a running VM whole into dir (as Saved(dir, machine)):
	// device state plus reflink copies of its RAM, disk and the files in its
	// volume slots (durable volumes too); the VM is paused for that time and
	// then runs on. Restore starts forks from it.
	Checkpoint(ctx context.Context, v VM, dir string) error
	// Prewarm keeps n processes ready to restore snapshots of snap's
	// machine, off the create path.
	Prewarm(snap Snapshot, n int)
	// Seal makes a snapshot's files read-only. VMs never open them: a
	// restore clones them into the VM's own files.
	Seal(snap Snapshot) error
	// Recover re-attaches to the VM with this id, if its process still runs.
	// It returns ErrGone, after removing what was left, if it does not.
	Recover(ctx context.Context, id string) (VM, error)
	// List returns the ids of VMs with state on this host (running or not).
	List() ([]string, error)
	Close() error
}

// Network gives VMs their network device's host side. Attach makes the
// VM's network (a tap in a namespace of its own) and returns the tap's
// descriptor for the VMM process; Release removes it (nothing to remove is
// not an error).
type Network interface {
	Attach(ctx context.Context, vmID string) (*os.File, error)
	Release(ctx context.Context, vmID string) error
	// Rename moves a VM's network to its new id (a VM prepared ahead takes
	// the id its restore names; see RestoreOptions.ID).
	Rename(ctx context.Context, from, to string) error
	// Apply gives an attached VM the policy it must start with, before it
	// resumes: the driver calls it on every restore (RestoreOptions.Network).
	Apply(ctx context.Context, vmID string, p pandastack.NetworkPolicy) error
}
