package guest

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// hostWait waits for a host to connect to the agent's virtio port. A
// read of a port no host has open ends at once (end of file), and so
// does poll, so the agent used to read again every 2 ms: ~750 wakeups of
// its VM a second under TCG, in every VM, from a server's stop until it
// re-attached them. Linux's virtio_console instead signals a host's
// connect (and disconnect) with SIGIO to a port opened O_ASYNC; the
// agent asks for that only while no host is there, since the driver also
// signals every buffer of data that arrives, and only after a short
// spell of the old polling, so a host that comes back at once costs no
// signal.
type hostWait struct {
	port  syscall.Conn
	sigio chan os.Signal
	armed bool
	// spins is how many 2 ms polls are left before the wait turns to
	// SIGIO: a host that comes back at once (a restore, a wake, a
	// reconnect) is found as fast as before, with no signal to handle.
	spins int
	// max bounds a wait, should a signal be missed (its cost: one read a
	// second while no host is connected).
	max time.Duration
}

func newHostWait(port any) *hostWait {
	c, ok := port.(syscall.Conn)
	if !ok {
		return nil
	}
	return &hostWait{port: c, max: time.Second, spins: hostSpins}
}

// hostSpins is the 2 ms polls of a disconnect before its wait turns to
// SIGIO (~0.2 s).
const hostSpins = 100

// wait is called when a read found no host. For the first spins calls
// of a disconnect it sleeps 2 ms, as the agent always did; then it asks
// the driver for SIGIO and returns at once (a host may have connected
// before it asked: the caller reads again); later calls block until a
// signal or max. Without O_ASYNC it always sleeps 2 ms.
func (h *hostWait) wait() {
	if h == nil || h.spins > 0 {
		if h != nil {
			h.spins--
		}
		time.Sleep(2 * time.Millisecond)
		return
	}
	if !h.armed {
		if h.sigio == nil {
			h.sigio = make(chan os.Signal, 1)
			signal.Notify(h.sigio, syscall.SIGIO)
		}
		if err := h.async(true); err != nil {
			time.Sleep(2 * time.Millisecond)
			return
		}
		h.armed = true
		return
	}
	t := time.NewTimer(h.max)
	defer t.Stop()
	select {
	case <-h.sigio:
	case <-t.C:
	}
}

// connected is called when a frame arrived: no more signals per buffer.
func (h *hostWait) connected() {
	if h == nil {
		return
	}
	h.spins = hostSpins
	if !h.armed {
		return
	}
	h.armed = false
	_ = h.async(false)
}

// async turns the port's O_ASYNC on or off, signals going to this
// process.
func (h *hostWait) async(on bool) error {
	rc, err := h.port.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = rc.Control(func(fd uintptr) {
		if on {
			if _, ferr = unix.FcntlInt(fd, unix.F_SETOWN, os.Getpid()); ferr != nil {
				return
			}
		}
		var fl int
		if fl, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0); ferr != nil {
			return
		}
		if on {
			fl |= unix.O_ASYNC
		} else {
			fl &^= unix.O_ASYNC
		}
		_, ferr = unix.FcntlInt(fd, unix.F_SETFL, fl)
	})
	if err != nil {
		return err
	}
	return ferr
}
