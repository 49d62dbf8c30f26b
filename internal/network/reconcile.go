package network

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// Reconcile makes the host match what survived a restart: the namespaces of
// VMs in running (their VMM processes outlived the last server) are taken
// over and their rules rewritten (the forwarder's port may have changed);
// every other namespace, host link and state file with this server's prefix
// is removed, and policies of sandboxes not in known are dropped.
func (m *Manager) Reconcile(ctx context.Context, running, known []string) error {
	keep := map[string]bool{}
	for _, id := range running {
		keep[id] = true
	}
	var errs []error
	kept := map[string]bool{} // host links in use
	ents, _ := os.ReadDir(filepath.Join(m.dir, "ns"))
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		n, err := m.loadNS(id)
		if err != nil {
			_ = os.Remove(filepath.Join(m.dir, "ns", e.Name()))
			continue
		}
		if _, err := os.Stat(filepath.Join(netnsDir, n.NS)); err != nil || !keep[id] {
			errs = append(errs, m.teardown(ctx, n))
			continue
		}
		p := m.Policy(id)
		if err := inNetns(n.NS, func() error { return run(ctx, nsRules(n, m.guard, p), "nft", "-f", "-") }); err != nil {
			errs = append(errs, fmt.Errorf("rewrite rules of %s: %w", id, err))
		}
		n.rules = p
		m.mu.Lock()
		m.nets[id] = n
		m.bySrc[n.nsIP] = n
		m.mu.Unlock()
		kept[m.hostLink(n.Slot)] = true
		kept[n.NS] = true
	}
	// Objects with our prefix that no state file accounts for (a crash
	// between creating them and recording them).
	nss, _ := os.ReadDir(netnsDir)
	for _, e := range nss {
		if strings.HasPrefix(e.Name(), m.prefix+"-") && !kept[e.Name()] {
			errs = append(errs, deleteNetns(e.Name()))
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, m.prefix+"h") && !kept[i.Name] {
			if err := run(ctx, "", "ip", "link", "del", i.Name); err != nil && !linkGone(err) {
				errs = append(errs, err)
			}
		}
	}
	live := map[string]bool{}
	for _, id := range known {
		live[id] = true
	}
	m.mu.Lock()
	var gone []string
	for id := range m.policies {
		if !live[id] {
			gone = append(gone, id)
		}
	}
	m.mu.Unlock()
	for _, id := range gone {
		m.Forget(id)
	}
	m.fillSpares() // after the sweep, which would take them for leftovers
	return errors.Join(errs...)
}

// Teardown removes everything of this server's networking from the host:
// every namespace and link with its prefix, and its nftables table. For a
// server that ends its sandboxes as it stops.
func (m *Manager) Teardown(ctx context.Context) error {
	m.dropSpares()
	err := m.Reconcile(ctx, nil, m.knownIDs())
	return errors.Join(err, run(ctx, "", "nft", "delete", "table", "ip", m.hostTable()))
}

func (m *Manager) knownIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.policies))
	for id := range m.policies {
		ids = append(ids, id)
	}
	return ids
}

// linkGone reports whether ip's error says the link is not there (any
// more): deleting a namespace destroys its veth pair asynchronously, so
// the host side may vanish between listing and deleting it.
func linkGone(err error) bool {
	return strings.Contains(err.Error(), "Cannot find") || strings.Contains(err.Error(), "No such device")
}
