package network

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/pandastack/pandastack"
)

// Inside every sandbox namespace: the guest's side (identical everywhere,
// so clones of one snapshot keep their address) and the link to the host.
const (
	tapName    = "tap0"
	vethNS     = "veth0"
	guestAddr  = "172.16.0.2"
	gatewayNet = "172.16.0.1/30"
	gatewayIP  = "172.16.0.1"
	// gatewayMAC is the tap's address: the same in every namespace, because
	// a restored guest's ARP cache still holds it from bake time.
	gatewayMAC = "02:50:53:00:00:01"
	nsTable    = "pandastack"
)

// GuestAddr is every guest's address on its NIC and GatewayAddr the
// tap's, where connections made in a sandbox's namespace (DialGuest) come
// from: services in a machine that the router reaches over the NIC listen
// on the one and let the other in (internal/databases, internal/pgbouncer).
const (
	GuestAddr   = guestAddr
	GatewayAddr = gatewayIP
)

// nsRules is the whole ruleset of a sandbox namespace: the server's
// services (DNS first) at the gateway go to the host, the guest's traffic is
// masqueraded to the namespace's transit address, and the egress chain holds
// the default-denied ranges and the policy.
func nsRules(n *sandboxNet, g guard, p pandastack.NetworkPolicy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {}\ndelete table ip %s\n", nsTable, nsTable)
	var dnat, fwd strings.Builder
	for _, s := range g.services {
		fmt.Fprintf(&dnat, "\t\tiifname %q ip daddr %s %s th dport %d dnat to %s:%d\n", tapName, gatewayIP, s.protos(), s.Port, n.hostIP, s.HostPort)
		fmt.Fprintf(&fwd, "\t\tiifname %q ip daddr %s %s th dport %d accept\n", tapName, n.hostIP, s.protos(), s.HostPort)
	}
	fmt.Fprintf(&b, `table ip %[1]s {
	set dns_allowed { type ipv4_addr; flags timeout; }
	counter denied {}
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
%[4]s	}
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname %[3]q masquerade
	}
	chain input {
		type filter hook input priority filter; policy accept;
		iifname %[2]q ct state established,related accept
		iifname %[2]q icmp type echo-request accept
		iifname %[2]q reject with icmp type admin-prohibited
	}
	chain forward {
		type filter hook forward priority filter; policy accept;
		ct state established,related accept
		iifname %[3]q drop
%[5]s		iifname %[2]q jump egress
	}
	chain deny {
		counter name denied
		meta l4proto tcp reject with tcp reset
		reject with icmp type admin-prohibited
	}
	chain egress {
	}
}
`, nsTable, tapName, vethNS, dnat.String(), fwd.String())
	b.WriteString(egressRules(g, p))
	return b.String()
}

// egressRules replaces the egress chain (atomically, with nft -f) and
// leaves the DNS-learned set alone unless the domains changed. Order:
// deny_cidrs; allow_cidrs inside a default-denied range (a policy that
// names a private range reaches it); the default-denied ranges; the other
// allow_cidrs; DNS-learned addresses (an allowed name that resolves to a
// private address stays denied); the mode.
func egressRules(g guard, p pandastack.NetworkPolicy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "flush chain ip %s egress\n", nsTable)
	add := func(rule string) { fmt.Fprintf(&b, "add rule ip %s egress %s\n", nsTable, rule) }
	if len(p.DenyCIDRs) > 0 {
		add(fmt.Sprintf("ip daddr { %s } goto deny", strings.Join(p.DenyCIDRs, ", ")))
	}
	var inside, outside []string
	for _, c := range p.AllowCIDRs {
		if g.opensDenied(c) {
			inside = append(inside, c)
		} else {
			outside = append(outside, c)
		}
	}
	if len(inside) > 0 {
		add(fmt.Sprintf("ip daddr { %s } accept", strings.Join(inside, ", ")))
	}
	if len(g.deny) > 0 {
		add(fmt.Sprintf("ip daddr { %s } goto deny", g.denySet()))
	}
	if len(outside) > 0 {
		add(fmt.Sprintf("ip daddr { %s } accept", strings.Join(outside, ", ")))
	}
	if len(p.AllowDomains) > 0 {
		add("ip daddr @dns_allowed accept")
	}
	if p.Egress == pandastack.EgressDeny {
		add("goto deny")
	}
	return b.String()
}

// hostRules is this server's table in the host namespace: masquerade what
// sandboxes send out, keep them off the host's own services (the server's
// sandbox services excepted, on transit addresses only) and off each other.
func hostRules(table, linkGlob string, pool netip.Prefix, services []Service) string {
	var svc strings.Builder
	for _, s := range services {
		fmt.Fprintf(&svc, "\t\tiifname %q ip daddr %s %s th dport %d accept\n", linkGlob, pool, s.protos(), s.HostPort)
	}
	return fmt.Sprintf(`table ip %[1]s {}
delete table ip %[1]s
table ip %[1]s {
	chain input {
		type filter hook input priority filter - 1; policy accept;
		iifname %[2]q ct state established,related accept
%[4]s		iifname %[2]q counter reject with icmp type admin-prohibited
	}
	chain forward {
		type filter hook forward priority filter - 1; policy accept;
		iifname %[2]q ip daddr %[3]s drop
	}
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr %[3]s oifname != %[2]q masquerade
	}
}
`, table, linkGlob, pool, svc.String())
}
