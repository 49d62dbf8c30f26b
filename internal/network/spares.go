package network

import (
	"context"
	"time"
)

// takeSpare hands out a namespace made ahead, if one is ready, and starts
// making its replacement.
func (m *Manager) takeSpare() *sandboxNet {
	m.mu.Lock()
	var n *sandboxNet
	if len(m.spares) > 0 {
		n = m.spares[0]
		m.spares = m.spares[1:]
	}
	m.mu.Unlock()
	m.fillSpares()
	return n
}

// fillSpares tops the spares up in the background, one at a time.
func (m *Manager) fillSpares() {
	m.mu.Lock()
	if m.filling || m.closed || len(m.spares) >= m.cfg.Spares {
		m.mu.Unlock()
		return
	}
	m.filling = true
	m.fills.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.fills.Done()
		failures := 0
		for {
			m.mu.Lock()
			if m.closed || len(m.spares) >= m.cfg.Spares {
				m.filling = false
				m.mu.Unlock()
				return
			}
			m.mu.Unlock()
			n, err := m.makeNS(context.Background())
			if err != nil {
				failures++
				m.log.Warn("making a spare network namespace failed", "err", err)
				if failures > 5 {
					m.mu.Lock()
					m.filling = false
					m.mu.Unlock()
					return
				}
				time.Sleep(time.Duration(failures) * 200 * time.Millisecond)
				continue
			}
			failures = 0
			m.mu.Lock()
			if m.closed {
				m.mu.Unlock()
				_ = m.teardown(context.Background(), n)
				continue
			}
			m.spares = append(m.spares, n)
			m.mu.Unlock()
		}
	}()
}

// dropSpares stops making spares and removes those made.
func (m *Manager) dropSpares() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.fills.Wait()
	m.mu.Lock()
	spares := m.spares
	m.spares = nil
	m.mu.Unlock()
	for _, n := range spares {
		if err := m.teardown(context.Background(), n); err != nil {
			m.log.Warn("remove spare network namespace", "netns", n.NS, "err", err)
		}
	}
}
