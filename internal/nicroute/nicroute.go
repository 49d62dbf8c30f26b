// Package nicroute chooses how the router reaches a TCP port inside a
// sandbox: over the sandbox's own NIC (a socket made in its network
// namespace, to the guest's address: the guest kernel's TCP path, no
// guest process in the way) whenever the sandbox has one on this host,
// else through its guest agent's channel (router.GuestPort).
//
// The agent path copies every byte through the agent, a Go process in
// the guest (emulated instruction by instruction under TCG); the NIC path
// is the guest kernel's virtio-net. Either way the machine is first woken
// when it hibernates (router.Guests).
package nicroute

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"syscall"

	"github.com/pandastack/pandastack/internal/network"
	"github.com/pandastack/pandastack/internal/router"
)

// NIC dials a port of a VM over the VM's own NIC (*network.Manager). A VM
// it has no namespace for is network.ErrNoNIC.
type NIC interface {
	DialGuest(ctx context.Context, vmID string, port int) (net.Conn, error)
}

// Path is how a connection reached its port.
type Path string

const (
	// PathNIC is over the sandbox's NIC.
	PathNIC Path = "nic"
	// PathAgent is through the guest agent's channel.
	PathAgent Path = "agent"
)

// Dialer gives backends for ports in sandboxes (router.Ports).
type Dialer struct {
	// Guests gives a sandbox's guest, waking it when it hibernates.
	Guests router.Guests
	// NIC dials over sandboxes' NICs; nil when the server has no sandbox
	// networking (not root, or --no-network): every port then goes
	// through the agent.
	NIC NIC
	Log *slog.Logger

	nic, agent atomic.Int64
}

var _ router.Ports = (*Dialer)(nil)

// Port is the backend of port in sandbox sandboxID.
func (d *Dialer) Port(sandboxID string, port int) router.Backend {
	return backend{d: d, id: sandboxID, port: port}
}

// Counts is how many connections each path has carried.
func (d *Dialer) Counts() (nic, agent int64) {
	return d.nic.Load(), d.agent.Load()
}

type backend struct {
	d    *Dialer
	id   string
	port int
}

// Dial wakes the sandbox when it hibernates, then connects to its port.
func (b backend) Dial(ctx context.Context) (net.Conn, error) {
	c, _, err := b.d.Dial(ctx, b.id, b.port)
	return c, err
}

// Dial connects to port in sandbox id, waking it first (exactly as the
// agent path does), and says which path it took. It goes through the
// agent only when there is no NIC path to the port:
//   - the server has no sandbox networking (NIC nil);
//   - the sandbox has no namespace on this host (network.ErrNoNIC: its VM
//     runs on another host);
//   - the port refuses over the NIC: its service listens on the guest's
//     loopback only (an app bound to 127.0.0.1), which the agent reaches;
//   - the guest does not answer on its NIC at all (it took its interface
//     down, say): logged as a warning, since it costs the connect timeout.
//
// A caller that gives up (ctx done) gets its error, with no second try.
func (d *Dialer) Dial(ctx context.Context, id string, port int) (net.Conn, Path, error) {
	g, err := d.Guests.Guest(ctx, id)
	if err != nil {
		return nil, "", err
	}
	reason := "no sandbox networking on this server"
	if d.NIC != nil {
		c, err := d.NIC.DialGuest(ctx, id, port)
		switch {
		case err == nil:
			d.nic.Add(1)
			d.log().Debug("port dialled", "sandbox", id, "port", port, "path", PathNIC)
			return c, PathNIC, nil
		case ctx.Err() != nil:
			return nil, "", err
		case errors.Is(err, network.ErrNoNIC):
			reason = "no namespace on this host"
		case errors.Is(err, syscall.ECONNREFUSED):
			reason = "refused on the NIC (listens on loopback only)"
		default:
			reason = "NIC unreachable: " + err.Error()
			d.log().Warn("port not reachable over the sandbox's NIC; through its guest agent", "sandbox", id, "port", port, "err", err)
		}
	}
	c, err := g.DialPort(ctx, port)
	if err != nil {
		return nil, "", err
	}
	d.agent.Add(1)
	d.log().Debug("port dialled", "sandbox", id, "port", port, "path", PathAgent, "reason", reason)
	return c, PathAgent, nil
}

func (d *Dialer) log() *slog.Logger {
	if d.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Log
}
