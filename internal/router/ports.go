package router

// Ports gives the backend of a TCP port inside a sandbox. Services that
// route to their machines' ports (databases, apps) take one, so the way a
// port is reached is chosen in one place (internal/nicroute: over the
// sandbox's own NIC when it has one here, else through its guest agent).
type Ports interface {
	Port(sandboxID string, port int) Backend
}

// AgentPorts gives GuestPort backends: every port through the guest agent.
type AgentPorts struct {
	Guests Guests
}

// Port is the GuestPort of port in sandbox sandboxID.
func (p AgentPorts) Port(sandboxID string, port int) Backend {
	return GuestPort{Guests: p.Guests, SandboxID: sandboxID, Port: port}
}
