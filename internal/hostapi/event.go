package hostapi

import "github.com/pandastack/pandastack"

// EventKind says what happened to a machine.
type EventKind string

// The events a host reports.
const (
	// EventExited: the machine's VM exited on its own; it is failed.
	EventExited EventKind = "exited"
	// EventExpired: the machine's deadline passed; the host ended it.
	EventExpired EventKind = "expired"
	// EventEnded: the machine was ended on request (Kill, or the host
	// shutting down with its machines).
	EventEnded EventKind = "ended"
	// EventHibernated: the machine was hibernated (on request, or after
	// its idle time: Idle is set then).
	EventHibernated EventKind = "hibernated"
	// EventWoken: the machine was woken (on request or on use).
	EventWoken EventKind = "woken"
)

// Event is a change to a machine: the machine as it is after it.
type Event struct {
	Kind    EventKind `json:"kind"`
	Machine Machine   `json:"machine"`
	// Idle: a hibernation the host did because the machine was idle.
	Idle bool `json:"idle,omitempty"`
}

// Ended reports whether the event ends its machine.
func (e Event) Ended() bool { return !e.Machine.State.Live() }

// ErrUnknownMachine is wrapped by errors about a machine the host does
// not hold.
var ErrUnknownMachine = pandastack.Errorf(pandastack.EUnavailable, "machine not on this host")

// Unknown is the error for machine id, which the host does not hold.
func Unknown(id string) error {
	return &pandastack.Error{Code: pandastack.EUnavailable, Message: "sandbox " + id + " is not running on this host", Err: ErrUnknownMachine}
}
