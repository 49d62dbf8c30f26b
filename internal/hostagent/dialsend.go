package hostagent

import (
	"context"
	"net"
)

// DialPortSend dials a port in the guest with first sent along
// (guestconn.Client.DialPortSend), holding the sandbox busy while the
// connection is open, as DialPort does.
func (g *guest) DialPortSend(ctx context.Context, port int, first []byte) (net.Conn, error) {
	release := g.s.hold()
	c, err := g.Client.DialPortSend(ctx, port, first)
	if err != nil {
		release()
		return nil, err
	}
	return &busyConn{Conn: c, release: release}, nil
}
