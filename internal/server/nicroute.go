package server

import (
	"github.com/pandastack/pandastack/internal/nicroute"
	"github.com/pandastack/pandastack/internal/router"
)

// portDialer is how a service's routes reach ports in its machines: over
// each machine's own NIC when this server runs sandbox networking (s.net),
// else through the guest agent (internal/nicroute says when).
func (s *Server) portDialer(guests router.Guests, service string) router.Ports {
	d := &nicroute.Dialer{Guests: guests, Log: s.log.With("component", "nicroute", "service", service)}
	if s.net != nil { // a nil *network.Manager must not become a non-nil NIC
		d.NIC = s.net
	}
	return d
}
