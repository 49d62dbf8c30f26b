package network

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/pandastack/pandastack"
)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestParseEgressDeny(t *testing.T) {
	host := func() ([]netip.Prefix, error) { return prefixes("192.0.2.0/24", "10.98.3.0/24"), nil }
	for _, c := range []struct {
		name, spec string
		want       []netip.Prefix
	}{
		{"default", DefaultEgressDeny, prefixes("10.0.0.0/8", "100.64.0.0/10", "169.254.0.0/16", "172.16.0.0/12", "192.0.2.0/24", "192.168.0.0/16")},
		{"narrowed to link-local", "link-local", prefixes("169.254.0.0/16")},
		{"widened by a CIDR", "link-local, 203.0.113.7", prefixes("169.254.0.0/16", "203.0.113.7/32")},
		{"none", "none", nil},
		{"nested ranges merge", "10.1.0.0/16,private,10.2.3.4", prefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")},
	} {
		got, err := parseEgressDeny(c.spec, host)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	for _, bad := range []string{"intranet", "fe80::/10", "10.0.0.0/33"} {
		if _, err := parseEgressDeny(bad, host); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// The default-denied ranges come after allow_cidrs that name addresses
// inside them, and before everything that opens more (a wide allow_cidrs
// entry, DNS-learned addresses, the allow mode).
func TestEgressRulesDefaultDeny(t *testing.T) {
	g := guard{deny: prefixes("10.0.0.0/8", "169.254.0.0/16")}
	p, err := pandastack.NetworkPolicy{Egress: "deny", AllowCIDRs: []string{"0.0.0.0/0", "10.5.0.0/16"},
		AllowDomains: []string{"example.com"}}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	r := egressRules(g, p)
	order := []string{"{ 10.5.0.0/16 } accept", "{ 10.0.0.0/8, 169.254.0.0/16 } goto deny", "{ 0.0.0.0/0 } accept", "@dns_allowed accept", "egress goto deny"}
	at := -1
	for _, want := range order {
		i := strings.Index(r, want)
		if i < 0 || i < at {
			t.Fatalf("rule %q missing or out of order in:\n%s", want, r)
		}
		at = i
	}
	allow := egressRules(g, pandastack.NetworkPolicy{Egress: pandastack.EgressAllow})
	if !strings.Contains(allow, "169.254.0.0/16 } goto deny") {
		t.Errorf("the default policy does not deny link-local:\n%s", allow)
	}
}

func TestServicesRendered(t *testing.T) {
	g := guard{services: []Service{{Name: "dns", Port: 53, HostPort: 5353, UDP: true}, {Name: "db", Port: 5432, HostPort: 6432}}}
	n := &sandboxNet{hostIP: netip.MustParseAddr("10.223.0.1")}
	r := nsRules(n, g, pandastack.NetworkPolicy{Egress: pandastack.EgressAllow})
	for _, want := range []string{
		"ip daddr 172.16.0.1 meta l4proto { tcp, udp } th dport 53 dnat to 10.223.0.1:5353",
		"ip daddr 172.16.0.1 meta l4proto tcp th dport 5432 dnat to 10.223.0.1:6432",
		"ip daddr 10.223.0.1 meta l4proto tcp th dport 6432 accept\n\t\tiifname \"tap0\" jump egress",
	} {
		if !strings.Contains(r, want) {
			t.Errorf("namespace rules lack %q:\n%s", want, r)
		}
	}
	h := hostRules("t", "psxh*", DefaultPool, g.services)
	if !strings.Contains(h, `ip daddr 10.223.0.0/16 meta l4proto tcp th dport 6432 accept`) {
		t.Errorf("host rules do not let sandboxes reach the db service:\n%s", h)
	}
}
