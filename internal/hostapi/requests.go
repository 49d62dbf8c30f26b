package hostapi

import (
	"time"

	"github.com/pandastack/pandastack"
)

// ForkRequest forks machine ParentID into one child per id in ChildIDs.
type ForkRequest struct {
	ParentID string   `json:"parent_id"`
	ChildIDs []string `json:"child_ids"`
	// Volumes, for a child id, are new durable volumes (recorded and
	// attached to the child by the caller) that the child's copies of the
	// parent's volumes become, slot for slot; a child not listed runs on
	// throwaway copies.
	Volumes map[string][]VolumeAttachment `json:"volumes,omitempty"`
}

// DeadlineRequest moves machine ID's deadline to ExpiresAt (zero: none).
type DeadlineRequest struct {
	ID        string    `json:"id"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// SnapshotRequest saves machine MachineID as snapshot SnapshotID.
type SnapshotRequest struct {
	MachineID  string `json:"machine_id"`
	SnapshotID string `json:"snapshot_id"`
}

// SnapshotInfo is a snapshot the host saved.
type SnapshotInfo struct {
	ID         string `json:"id"`
	MachineID  string `json:"machine_id"`
	Template   string `json:"template"`
	TemplateID string `json:"template_id"`
	SizeBytes  int64  `json:"size_bytes"`
}

// KillRequest ends machine ID in State (killed, expired, ...), with
// Reason ("" : the state's name).
type KillRequest struct {
	ID     string                  `json:"id"`
	State  pandastack.SandboxState `json:"state"`
	Reason string                  `json:"reason,omitempty"`
}

// VolumeSpec asks for an empty volume file of SizeMiB for volume ID.
type VolumeSpec struct {
	ID      string `json:"id"`
	SizeMiB int    `json:"size_mib"`
}

// Inventory is what a host found at its start.
type Inventory struct {
	// Machines are re-attached (running) or kept asleep (hibernated).
	Machines []Machine `json:"machines"`
	// Ended are machines the host lost while it was down (their VM was
	// gone, their agent did not answer, their deadline passed), each
	// with its end state and reason.
	Ended []Machine `json:"ended"`
	// Unclaimed are running VMs no host record claims; they are left
	// running until Settle, so that the caller may Adopt them.
	Unclaimed []string `json:"unclaimed,omitempty"`
	// Fresh: the host had no records yet (a first start, or an upgrade
	// from a version without them): the caller's records say what to
	// Adopt.
	Fresh bool `json:"fresh,omitempty"`
}

// SettleRequest ends a host's reconciliation.
type SettleRequest struct {
	// Volumes are the ids of the volumes the caller knows on this host;
	// the host removes volume files of any other.
	Volumes []string `json:"volumes"`
}
