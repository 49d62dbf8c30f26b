package network

import (
	"context"
	"time"

	"github.com/pandastack/pandastack"
)

// denialLogInterval is how often the denied-connection counters of
// sandboxes with a restrictive policy are read and increases logged.
const denialLogInterval = 10 * time.Second

// logDenials logs, for each sandbox whose policy can deny, how many
// connections were denied since the last look (the counter is also served
// by the API as denied_connections).
func (m *Manager) logDenials(ctx context.Context) {
	seen := map[string]int64{}
	t := time.NewTicker(denialLogInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		var ids []string
		for id, n := range m.nets {
			n.mu.Lock()
			if n.rules.Egress == pandastack.EgressDeny || len(n.rules.DenyCIDRs) > 0 {
				ids = append(ids, id)
			}
			n.mu.Unlock()
		}
		m.mu.Unlock()
		next := map[string]int64{}
		for _, id := range ids {
			c, err := m.Denied(ctx, id)
			if err != nil {
				continue
			}
			if d := c - seen[id]; d > 0 {
				m.log.Info("egress connections denied by network policy", "sandbox", id, "count", d, "total", c)
			}
			next[id] = c
		}
		seen = next
	}
}
