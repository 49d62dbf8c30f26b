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
	go func() { _, _ = io.Copy(st, tc); done <- struct{}{} }()
	<-done
	<-done
	return nil
}
