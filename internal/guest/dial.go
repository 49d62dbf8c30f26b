package guest

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/pandastack/pandastack/internal/guestproto"
)

// dial connects to a TCP port on the guest's loopback and splices the
// stream to it: the host's way into a server running in the sandbox.
func dial(c *guestproto.Conn, st net.Conn, port int) error {
	if port < 1 || port > 65535 {
		return &guestproto.Error{Code: guestproto.ErrInvalid, Message: fmt.Sprintf("port %d is outside 1-65535", port)}
	}
	tc, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		return &guestproto.Error{Code: guestproto.ErrRefused, Message: fmt.Sprintf("nothing accepts connections on port %d in the sandbox", port)}
	}
	defer tc.Close()
	if err := c.WriteJSON(guestproto.PktOK, struct{}{}); err != nil {
		return nil
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(tc, st); tc.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(st, tc); closeWrite(st); done <- struct{}{} }()
	<-done
	<-done
	return nil
}

// closeWrite passes the server's end of its output on to the host: a
// response that ends at the close (HTTP/1.0, no Content-Length) must end
// on the host too, while the host's side may still be open. A yamux
// stream's Close is that half-close: it sends FIN and keeps reading until
// the host closes its side.
func closeWrite(st net.Conn) {
	if cw, ok := st.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = st.Close()
}
