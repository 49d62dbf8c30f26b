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
	nc := &nicConn{TCPConn: c.(*net.TCPConn), n: n}
	if !n.addConn(nc) {
		c.Close()
		return nil, fmt.Errorf("dial port %d of %s over its NIC: the VM ended: %w", port, vmID, ErrNoNIC)
	}
	return nc, nil
}

// nicConn is a connection DialGuest made. It ends with its VM: a guest
// that dies sends no FIN nor reset, and its namespace's end leaves the
// socket retrying for many minutes, so Release closes what is still open
// (as the guest agent's channel ends the connections it carries).
type nicConn struct {
	*net.TCPConn
	n *sandboxNet
}

// Close closes the connection and forgets it.
func (c *nicConn) Close() error {
	c.n.dropConn(c)
	return c.TCPConn.Close()
}

// addConn records an open connection; false once the namespace is being
// torn down.
func (n *sandboxNet) addConn(c *nicConn) bool {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	if n.ended {
		return false
	}
	if n.conns == nil {
		n.conns = map[*nicConn]struct{}{}
	}
	n.conns[c] = struct{}{}
	return true
}

func (n *sandboxNet) dropConn(c *nicConn) {
	n.connMu.Lock()
	delete(n.conns, c)
	n.connMu.Unlock()
}

// endConns closes the connections still open to the VM and refuses new
// ones.
func (n *sandboxNet) endConns() {
	n.connMu.Lock()
	n.ended = true
	conns := n.conns
	n.conns = nil
	n.connMu.Unlock()
	for c := range conns {
		c.TCPConn.Close()
	}
}
