package network

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/pandastack/pandastack"
)

func TestNamesFitLinuxLimits(t *testing.T) {
	m := &Manager{cfg: Config{Pool: DefaultPool}, prefix: Prefix("/var/lib/pandastack")}
	if Prefix("/a") == Prefix("/b") {
		t.Error("two data directories got one prefix")
	}
	if Prefix("/x/../a") != Prefix("/a") {
		t.Error("the prefix depends on how the path is spelled")
	}
	// Interface names are at most 15 bytes; the largest slot of a /16.
	if l := m.hostLink(m.slots() - 1); len(l) > 15 {
		t.Errorf("host link name %q is %d bytes, over IFNAMSIZ-1", l, len(l))
	}
}

func TestSlotAddresses(t *testing.T) {
	m := &Manager{cfg: Config{Pool: netip.MustParsePrefix("10.223.0.0/16")}}
	for _, c := range []struct {
		slot       int
		host, inNS string
	}{{0, "10.223.0.1", "10.223.0.2"}, {1, "10.223.0.5", "10.223.0.6"}, {64, "10.223.1.1", "10.223.1.2"}, {16383, "10.223.255.253", "10.223.255.254"}} {
		h, n := m.slotAddrs(c.slot)
		if h.String() != c.host || n.String() != c.inNS {
			t.Errorf("slot %d: %s %s, want %s %s", c.slot, h, n, c.host, c.inNS)
		}
	}
	if m.slots() != 16384 {
		t.Errorf("a /16 has %d slots, want 16384", m.slots())
	}
}

func TestEgressRulesOrder(t *testing.T) {
	p, err := pandastack.NetworkPolicy{AllowDomains: []string{"example.com"}, AllowCIDRs: []string{"10.0.0.0/8"},
		DenyCIDRs: []string{"10.1.0.0/16"}}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	r := egressRules(guard{}, p)
	order := []string{"flush chain", "10.1.0.0/16 } goto deny", "10.0.0.0/8 } accept", "@dns_allowed accept", "egress goto deny"}
	at := -1
	for _, want := range order {
		i := strings.Index(r, want)
		if i < 0 || i < at {
			t.Fatalf("rule %q missing or out of order in:\n%s", want, r)
		}
		at = i
	}
	if allow := egressRules(guard{}, pandastack.NetworkPolicy{Egress: pandastack.EgressAllow}); strings.Contains(allow, "deny") {
		t.Errorf("allow-all rules with no default-denied ranges deny something:\n%s", allow)
	}
}
