package network

import "fmt"

// GuestNetns is the network namespace VM vmID's NIC lives in, and the
// guest's address there: where a host process started in that namespace
// (ip netns exec) reaches the guest with nothing else in the way, as
// DialGuest does. A VM with no namespace here is ErrNoNIC.
func (m *Manager) GuestNetns(vmID string) (ns, addr string, err error) {
	m.mu.Lock()
	n := m.nets[vmID]
	m.mu.Unlock()
	if n == nil {
		return "", "", fmt.Errorf("network namespace of %s: %w", vmID, ErrNoNIC)
	}
	return n.NS, guestAddr, nil
}
