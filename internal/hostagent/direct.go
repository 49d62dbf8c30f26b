package hostagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
)

// directConner is implemented by VMs whose machine may have a direct port
// (vmm.Machine.DirectPort): errors.ErrUnsupported when it has none.
type directConner interface {
	DirectConn(ctx context.Context) (net.Conn, error)
}

// DialDirect connects to the sandbox's direct port — the stream straight
// to the process in the guest that reads it, with no agent between —
// holding the sandbox busy while the connection is open, as DialPort
// does. errors.ErrUnsupported when its machine has no such port. The
// port has one host at a time: a second caller waits for the first to
// close.
func (g *guest) DialDirect(ctx context.Context) (net.Conn, error) {
	g.s.mu.Lock()
	v, id := g.s.vm, g.s.rec.ID
	g.s.mu.Unlock()
	dc, ok := v.(directConner)
	if !ok {
		return nil, fmt.Errorf("sandbox %s: %w: no direct port", id, errors.ErrUnsupported)
	}
	release := g.s.hold()
	c, err := dc.DirectConn(ctx)
	if err != nil {
		release()
		return nil, err
	}
	if _, ok := v.(settler); ok {
		c = &answerConn{Conn: c, answered: func() { settle(g.log, v) }}
	}
	return &busyConn{Conn: c, release: release}, nil
}

// answerConn calls answered, in the background, when the first bytes
// come from the guest: its first answer, when the agent's session was
// deferred (Agent.deferSession).
type answerConn struct {
	net.Conn
	once     sync.Once
	answered func()
}

func (c *answerConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.once.Do(func() { go c.answered() })
	}
	return n, err
}
