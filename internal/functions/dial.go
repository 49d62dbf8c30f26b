package functions

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/pandastack/pandastack"
)

// portSender is a guest that can send a request with its dial, in one
// write (guestconn.Client.DialPortSend, through the host agent's guest):
// the shim reads the event without the host first waiting for the
// agent's "connected". A guest without it is dialled, then written to.
type portSender interface {
	DialPortSend(ctx context.Context, port int, first []byte) (net.Conn, error)
}

// directDialer is a guest that reaches its VM's direct port
// (hostagent's guest): the stream straight to the shim, which reads the
// port itself (shim.py, shim.mjs), with no agent, no multiplexing and no
// guest TCP between. Under TCG each of those is code a fresh VM's QEMU
// translates before the call can start: the way through the agent cost a
// fresh invocation ~100 ms of its ~260 (2026-12-07).
type directDialer interface {
	DialDirect(ctx context.Context) (net.Conn, error)
}

// dialDirect connects to g's direct port: nil and no error when g or its
// machine has none (the caller goes through the agent).
func dialDirect(ctx context.Context, g pandastack.Guest) (net.Conn, error) {
	dd, ok := g.(directDialer)
	if !ok {
		return nil, nil
	}
	conn, err := dd.DialDirect(ctx)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil, nil
	}
	return conn, err
}

// maxSendWithDial is the most sent with a dial. The stream's window (256
// KiB) takes it without waiting for the agent to read, so a refusal comes
// back as one; a larger event is written after the dial.
const maxSendWithDial = 64 << 10

// dialShim connects to the shim in g, sending first with the dial when g
// can (sent says so; otherwise the caller writes it), and trying again
// while the guest answers that nothing accepts connections: the shim
// listened before the snapshot, so a refusal is the guest agent's own
// connect (5 s) timing out in a VM starved of CPU, not a missing shim.
// A refused dial drops what was sent with it, and the next sends it again.
func dialShim(ctx context.Context, g pandastack.Guest, first []byte) (conn net.Conn, sent bool, err error) {
	ps, send := g.(portSender)
	send = send && len(first) > 0 && len(first) <= maxSendWithDial
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if send {
			conn, err = ps.DialPortSend(ctx, shimPort, first)
		} else {
			conn, err = g.DialPort(ctx, shimPort)
		}
		if pandastack.ErrorCode(err) != pandastack.ERefused {
			return conn, send && err == nil, err
		}
		select {
		case <-ctx.Done():
			return nil, false, errors.Join(ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}
