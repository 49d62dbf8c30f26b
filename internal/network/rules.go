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

// nsRules is the whole ruleset of a sandbox namespace: DNS to the gateway
// goes to the host's forwarder, the guest's traffic is masqueraded to the
// namespace's transit address, and the egress chain holds the policy.
func nsRules(n *sandboxNet, dnsPort int, p pandastack.NetworkPolicy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {}\ndelete table ip %s\n", nsTable, nsTable)
	fmt.Fprintf(&b, `table ip %[1]s {
	set dns_allowed { type ipv4_addr; flags timeout; }
	counter denied {}
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		iifname %[2]q ip daddr %[3]s meta l4proto { tcp, udp } th dport 53 dnat to %[4]s:%[5]d
	}
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname %[6]q masquerade
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
		iifname %[6]q drop
		iifname %[2]q ip daddr %[4]s meta l4proto { tcp, udp } th dport %[5]d accept
		iifname %[2]q jump egress
	}
	chain deny {
		counter name denied
		meta l4proto tcp reject with tcp reset
		reject with icmp type admin-prohibited
	}
	chain egress {
	}
}
`, nsTable, tapName, gatewayIP, n.hostIP, dnsPort, vethNS)
	b.WriteString(egressRules(p))
	return b.String()
}

// egressRules replaces the egress chain (atomically, with nft -f) and
// leaves the DNS-learned set alone unless the domains changed.
func egressRules(p pandastack.NetworkPolicy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "flush chain ip %s egress\n", nsTable)
	add := func(rule string) { fmt.Fprintf(&b, "add rule ip %s egress %s\n", nsTable, rule) }
	if len(p.DenyCIDRs) > 0 {
		add(fmt.Sprintf("ip daddr { %s } goto deny", strings.Join(p.DenyCIDRs, ", ")))
	}
	if len(p.AllowCIDRs) > 0 {
		add(fmt.Sprintf("ip daddr { %s } accept", strings.Join(p.AllowCIDRs, ", ")))
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
// sandboxes send out, keep them off the host's own services (the DNS
// forwarder excepted) and off each other.
func hostRules(table, linkGlob string, pool netip.Prefix, dnsPort int) string {
	return fmt.Sprintf(`table ip %[1]s {}
delete table ip %[1]s
table ip %[1]s {
	chain input {
		type filter hook input priority filter - 1; policy accept;
		iifname %[2]q ct state established,related accept
		iifname %[2]q meta l4proto { tcp, udp } th dport %[4]d accept
		iifname %[2]q counter reject with icmp type admin-prohibited
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
`, table, linkGlob, pool, dnsPort)
}
