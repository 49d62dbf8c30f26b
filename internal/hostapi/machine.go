package hostapi

import (
	"time"

	"github.com/pandastack/pandastack"
)

// MachineSpec is everything a host needs to start a machine, passed
// explicitly (nothing travels in a context value).
type MachineSpec struct {
	// ID is the machine's id, minted by the caller.
	ID string `json:"id"`
	// Template is the template build to restore ("name@build-id" or a
	// name the host resolves), unless Snapshot is set.
	Template string `json:"template,omitempty"`
	// TemplateVersion is the version the caller resolved Template to
	// (recorded on the machine; 0: unknown).
	TemplateVersion int `json:"template_version,omitempty"`
	// Snapshot, when set, is the snapshot to restore instead.
	Snapshot *SnapshotRef `json:"snapshot,omitempty"`
	// CPUs, MemoryMiB and DiskGiB ask for a size other than the
	// template's (0: the template's).
	CPUs      int `json:"cpus,omitempty"`
	MemoryMiB int `json:"memory_mib,omitempty"`
	DiskGiB   int `json:"disk_gib,omitempty"`
	// Env is merged into every command's environment.
	Env map[string]string `json:"env,omitempty"`
	// Network is the machine's egress policy, in force from its first
	// instruction; nil allows all.
	Network *pandastack.NetworkPolicy `json:"network,omitempty"`
	// Volumes are durable volumes (already attached to ID by the caller)
	// to open and mount. With Snapshot set they are what the snapshot's
	// saved volume copies become, slot for slot (already mounted in the
	// guest as they were saved; grown to SizeMiB when larger).
	Volumes []VolumeAttachment `json:"volumes,omitempty"`
	// Lifetime is the machine's class: a service machine has no deadline.
	Lifetime pandastack.Lifetime `json:"lifetime,omitempty"`
	// TTL is how long a sandbox-class machine lives from its start.
	TTL time.Duration `json:"ttl,omitempty"`
	// AutoHibernateSeconds, above 0, hibernates the machine after that
	// long without activity.
	AutoHibernateSeconds int `json:"auto_hibernate_seconds,omitempty"`
	// OnExpiry hibernates a sandbox-class machine when its deadline
	// passes (its deadline is then cleared until it is woken) instead of
	// ending it.
	OnExpiry pandastack.OnExpiry `json:"on_expiry,omitempty"`
	// DeferSession is pandastack.CreateRequest's: with Snapshot (and no
	// Volumes) the agent's session begins at the guest's first use.
	DeferSession bool `json:"defer_session,omitempty"`
}

// SnapshotRef names a snapshot to restore: its id (its files on the
// host), the template build it came from, and where it was exported.
type SnapshotRef struct {
	ID         string `json:"id"`
	Template   string `json:"template,omitempty"`
	TemplateID string `json:"template_id,omitempty"`
	// ObjectKey, when set, is the export the host fetches the files
	// from when they are gone from its disk.
	ObjectKey string `json:"object_key,omitempty"`
}

// VolumeAttachment is a durable volume a machine opens in a slot and
// mounts at MountPath.
type VolumeAttachment struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	SizeMiB   int    `json:"size_mib"`
	MountPath string `json:"mount_path"`
	Slot      int    `json:"slot"`
}

// Machine is a machine as the host runs it. Seq grows with every change
// the host makes to it, so that a caller applying results and events in
// any order keeps the newest.
type Machine struct {
	ID         string                  `json:"id"`
	Host       string                  `json:"host"`
	Accel      pandastack.Accel        `json:"accel"`
	State      pandastack.SandboxState `json:"state"`
	Lifetime   pandastack.Lifetime     `json:"lifetime,omitempty"`
	Template   string                  `json:"template"`
	TemplateID string                  `json:"template_id"`
	// TemplateVersion is the version of the build (0: unknown).
	TemplateVersion      int                         `json:"template_version,omitempty"`
	CPUs                 int                         `json:"cpus"`
	MemoryMiB            int                         `json:"memory_mib"`
	DiskMiB              int                         `json:"disk_mib,omitempty"`
	Env                  map[string]string           `json:"env,omitempty"`
	Defaults             *pandastack.CommandDefaults `json:"defaults,omitempty"`
	CreatedAt            time.Time                   `json:"created_at"`
	ExpiresAt            time.Time                   `json:"expires_at,omitzero"`
	AutoHibernateSeconds int                         `json:"auto_hibernate_seconds,omitempty"`
	EndedAt              *time.Time                  `json:"ended_at,omitempty"`
	EndReason            string                      `json:"end_reason,omitempty"`
	Volumes              []VolumeAttachment          `json:"volumes,omitempty"`
	Seq                  uint64                      `json:"seq,omitempty"`
	// OnExpiry is the spec's; TTL is the life a machine hibernated at its
	// deadline gets again when it is woken (0: DefaultResumeTTL).
	OnExpiry pandastack.OnExpiry `json:"on_expiry,omitempty"`
	TTL      time.Duration       `json:"ttl,omitempty"`
}

// DefaultResumeTTL is the life a machine hibernated at its deadline gets
// when it is woken and its own TTL is not known.
const DefaultResumeTTL = 5 * time.Minute
