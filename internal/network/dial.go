package network

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// ErrNoNIC is what DialGuest answers for a VM this manager gives no
// namespace: none attached on this host (a VM on another host, or not
// running). The caller reaches the guest some other way.
var ErrNoNIC = errors.New("no network namespace for this VM on this host")

// GuestDialTimeout bounds DialGuest's connect: the guest's kernel answers
// a SYN on its own NIC in well under a millisecond once it runs, so a
// guest that has not answered by then is not answering on its NIC.
const GuestDialTimeout = 2 * time.Second

// DialGuest connects to TCP port in VM vmID over the VM's own NIC: the
// socket is made on a thread inside the VM's namespace (a socket keeps
// the namespace it was made in; the returned connection is then used from
// any goroutine) and connects from the tap's side (the gateway address)
// to the guest's address. The namespace's rules let it: a connection
// from the namespace itself leaves on the tap, and its answers are
// accepted as established, while the guest still opens nothing towards
// the namespace (nsRules' input chain). A VM without a namespace here is
// ErrNoNIC; a closed port is a refused dial (syscall.ECONNREFUSED).
func (m *Manager) DialGuest(ctx context.Context, vmID string, port int) (net.Conn, error) {
	m.mu.Lock()
	n := m.nets[vmID]
	m.mu.Unlock()
	if n == nil {
		return nil, fmt.Errorf("dial port %d of %s over its NIC: %w", port, vmID, ErrNoNIC)
	}
	ctx, cancel := context.WithTimeout(ctx, GuestDialTimeout)
	defer cancel()
	addr := net.JoinHostPort(guestAddr, strconv.Itoa(port))
	var c net.Conn
	err := inNetns(n.NS, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "tcp4", addr)
		return err
	})
	if err != nil {
		if c != nil { // made, but the thread could not leave the namespace
			c.Close()
		}
		return nil, fmt.Errorf("dial port %d of %s over its NIC: %w", port, vmID, err)
	}
	return c, nil
}
