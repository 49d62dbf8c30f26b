// Package hostapi is the contract between the control plane and a host:
// what a host does with machines. A host restores, boots, forks,
// hibernates, wakes, snapshots and kills machines, serves the guest
// channel (exec, files, ports) of each, keeps volume files, and reports
// what happens to its machines on its own (a VM that exited, a deadline
// that passed, an idle machine it hibernated) as events. It keeps only
// host-local recovery records; it mints no ids, knows no teams, names,
// quotas or records of the control plane: the caller (internal/sandboxes)
// passes everything explicitly in a MachineSpec and turns results and
// events into records.
//
// Every request and response type is a plain struct that survives a JSON
// round trip, so that the contract can be served to other hosts over the
// network; only the guest channel (pandastack.Guest, streamed) and the
// event channel are Go values in process. internal/hostagent implements
// Host in process.
package hostapi

import (
	"context"

	"github.com/pandastack/pandastack"
)

// Host runs machines on one host. Methods that name a machine the host
// does not hold return an error wrapping ErrUnknownMachine (code
// EUnavailable): the caller decides from its records whether the machine
// ended (gone) or lives elsewhere.
type Host interface {
	// Name is the host's name, recorded on its machines and volumes.
	Name() string
	// Accel is the accelerator this host's VMs run under.
	Accel() pandastack.Accel

	// Inventory is what the host found at its start (its own records
	// and the VMs still running): the machines it re-attached or keeps
	// asleep, those it lost (ended, with the reason), and VMs no record
	// claims. Call Settle once the caller has adopted what it knows.
	Inventory(ctx context.Context) (Inventory, error)
	// Adopt re-attaches a machine the host had no record of (a host
	// upgraded from a version without host records): its unclaimed VM,
	// or its hibernated files. ErrUnknownMachine when it has neither.
	Adopt(ctx context.Context, m Machine) (Machine, error)
	// Settle ends reconciliation: unclaimed VMs not adopted are killed,
	// volume files not in req.Volumes are removed, network state of
	// machines the host does not hold is dropped.
	Settle(ctx context.Context, req SettleRequest) error
	// List is the machines the host holds now.
	List(ctx context.Context) ([]Machine, error)

	// Create starts a machine from a template build or a snapshot.
	Create(ctx context.Context, spec MachineSpec) (Machine, error)
	// Fork makes copy-on-write children of a running machine, one per
	// id in req.ChildIDs; each starts from the parent's exact state. On
	// error it returns the children that were made.
	Fork(ctx context.Context, req ForkRequest) ([]Machine, error)
	// Hibernate saves a machine whole and ends its VM; Wake brings it
	// back (any use through Guest wakes it too).
	Hibernate(ctx context.Context, id string) (Machine, error)
	Wake(ctx context.Context, id string) (Machine, error)
	// SetDeadline moves a machine's deadline (zero: none).
	SetDeadline(ctx context.Context, req DeadlineRequest) (Machine, error)
	// Snapshot saves a running machine whole into the host's snapshot
	// files under req.SnapshotID; the machine runs on. DeleteSnapshot
	// removes those files.
	Snapshot(ctx context.Context, req SnapshotRequest) (SnapshotInfo, error)
	DeleteSnapshot(ctx context.Context, id string) error
	// Kill ends a machine and removes its files; it returns the machine
	// as it ended.
	Kill(ctx context.Context, req KillRequest) (Machine, error)

	// Guest is the machine's guest channel: exec, files, ports (streams).
	Guest(ctx context.Context, id string) (pandastack.Guest, error)

	// CreateVolume makes an empty formatted volume file; DeleteVolume
	// removes one.
	CreateVolume(ctx context.Context, spec VolumeSpec) error
	DeleteVolume(ctx context.Context, id string) error

	// Events delivers what happens to machines without a request: the
	// caller drains it until it is closed (when the host closes).
	Events(ctx context.Context) <-chan Event
}
