package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/pandastack/pandastack"
)

// Guests gives the live guest of a sandbox, waking it when it hibernates
// (pandastack.Engine does).
type Guests interface {
	Guest(ctx context.Context, id string) (pandastack.Guest, error)
}

// GuestPort is a backend on a TCP port inside a sandbox, reached through
// its guest agent (no guest network needed). A hibernated sandbox is woken
// by the dial.
type GuestPort struct {
	Guests    Guests
	SandboxID string
	Port      int
}

// Dial connects to the port; nothing listening is ERefused.
func (b GuestPort) Dial(ctx context.Context) (net.Conn, error) {
	g, err := b.Guests.Guest(ctx, b.SandboxID)
	if err != nil {
		return nil, err
	}
	return g.DialPort(ctx, b.Port)
}

// Addr is a backend at a network address on the host side.
type Addr struct {
	Network string // "tcp" or "unix"
	Address string
}

// Dial connects to the address; a refused connection is ERefused.
func (b Addr) Dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, b.Network, b.Address)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil, &pandastack.Error{Code: pandastack.ERefused, Message: fmt.Sprintf("nothing listens on %s", b.Address), Err: err}
	}
	return c, err
}
