package guest

import "time"

// hostWait paces the agent's reads of its virtio port while no host has
// it open. Such a read ends at once (end of file), and so does poll, so
// the agent used to read again every 2 ms forever: ~750 wakeups of its VM
// a second under TCG, in every VM, from a server's stop until it
// re-attached them. Now the first ~0.2 s of a disconnect keep the 2 ms
// pace (a host that comes back at once — a restore, a wake, a reconnect
// — is found as fast as before), then the pause doubles up to
// hostWaitMax: ~10 reads a second while no host is there, and a host
// found within 0.1 s of its connect.
//
// Session 18 waited on SIGIO (virtio_console signals a host's connect to
// a port opened O_ASYNC) instead of the longer pauses; with it, a
// create's first command took ~60 ms longer (two A/B rounds, same images,
// session 19), against an unchanged floor. No signal here.
type hostWait struct {
	// spins is how many 2 ms pauses are left in this disconnect.
	spins int
	// next is the pause after them, doubled each time up to hostWaitMax.
	next  time.Duration
	sleep func(time.Duration)
}

// hostSpins is the 2 ms pauses of a disconnect before they grow (~0.2 s).
const hostSpins = 100

// hostWaitMax bounds a pause: how late a host's connect can be found.
const hostWaitMax = 100 * time.Millisecond

func newHostWait() *hostWait {
	return &hostWait{spins: hostSpins, next: 4 * time.Millisecond, sleep: time.Sleep}
}

// wait is called when a read found no host: it pauses before the next.
func (h *hostWait) wait() {
	if h.spins > 0 {
		h.spins--
		h.sleep(2 * time.Millisecond)
		return
	}
	h.sleep(h.next)
	h.next = min(2*h.next, hostWaitMax)
}

// connected is called when a frame arrived: the next disconnect starts
// at the 2 ms pace again.
func (h *hostWait) connected() {
	h.spins, h.next = hostSpins, 4*time.Millisecond
}
