package functions

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/pandastack/pandastack"
)

// dialShim connects to the shim in g, trying again while the guest
// answers that nothing accepts connections: the shim listened before the
// snapshot, so a refusal is the guest agent's own connect (5 s) timing out
// in a VM starved of CPU, not a missing shim.
func dialShim(ctx context.Context, g pandastack.Guest) (net.Conn, error) {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		conn, err := g.DialPort(ctx, shimPort)
		if pandastack.ErrorCode(err) != pandastack.ERefused {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}
