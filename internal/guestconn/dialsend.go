package guestconn

import (
	"bytes"
	"context"
	"net"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestproto"
)

// DialPortSend is DialPort with the first bytes for the server sent at
// once, in the same write as the dial request, instead of after the
// agent's answer: one round trip between host and guest fewer for a
// request-and-answer protocol (a function's invocation). The agent reads
// the request packet alone and splices everything after it to the port
// once connected, so first reaches the server as if written after the
// dial. When the dial fails (ERefused: nothing listens) first is dropped
// with the stream; a retry sends it again.
func (c *Client) DialPortSend(ctx context.Context, port int, first []byte) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, pandastack.Errorf(pandastack.EInvalid, "port %d is outside 1-65535", port)
	}
	var pkt bytes.Buffer
	if err := guestproto.NewConn(&pkt).WriteJSON(guestproto.PktRequest, guestproto.Request{Op: guestproto.OpDial, Port: port}); err != nil {
		return nil, err
	}
	pkt.Write(first)
	st, err := c.openStream(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	if _, err := st.Write(pkt.Bytes()); err != nil {
		st.Close()
		return nil, unavailable(err)
	}
	if err := guestproto.NewConn(st).ReadJSON(guestproto.PktOK, nil); err != nil {
		st.Close()
		return nil, c.mapErr(ctx, err)
	}
	return st, nil
}
