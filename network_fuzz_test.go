package pandastack

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzNetworkPolicy decodes arbitrary network policy bodies (PUT
// /v1/sandboxes/{id}/network, the network field of a create) and
// normalizes them: a refusal is EInvalid and says "network:"; an accepted
// policy is canonical (normalizing it again changes nothing, nor does a
// JSON round trip), its CIDRs are masked IPv4 prefixes, its ports sorted,
// unique and in range, and each plain domain it lists is one it allows.
func FuzzNetworkPolicy(f *testing.F) {
	for _, s := range []string{
		`{"egress":"deny","allow_cidrs":["1.1.1.1"],"allow_domains":["Example.COM.","*.example.org"],"public_ports":[8080,80,8080]}`,
		`{"egress":"ALLOW","deny_cidrs":["10.1.2.3/8"," 169.254.169.254 "]}`,
		`{"allow_domains":["*.com"]}`,
		`{"allow_cidrs":["::1/128"]}`,
		`{"public_ports":[0,65536]}`,
		`{"allow_domains":["a.*.com","1.2.3.4"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var p NetworkPolicy
		if json.Unmarshal(body, &p) != nil {
			return
		}
		n, err := p.Normalize()
		if err != nil {
			if ErrorCode(err) != EInvalid || !strings.HasPrefix(ErrorMessage(err), "network: ") {
				t.Fatalf("refusal %q (code %s), want invalid_argument naming the network", err, ErrorCode(err))
			}
			return
		}
		again, err := n.Normalize()
		if err != nil || !reflect.DeepEqual(again, n) {
			t.Fatalf("normalizing twice: %+v (%v), once: %+v", again, err, n)
		}
		b, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		var back NetworkPolicy
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, n) {
			t.Fatalf("JSON round trip: %+v (%v), want %+v", back, err, n)
		}
		for _, c := range slices.Concat(n.AllowCIDRs, n.DenyCIDRs) {
			pfx, err := netip.ParsePrefix(c)
			if err != nil || !pfx.Addr().Is4() || pfx.Masked() != pfx || pfx.String() != c {
				t.Fatalf("CIDR %q is not a masked IPv4 prefix", c)
			}
		}
		if !slices.IsSorted(n.PublicPorts) || len(slices.Compact(slices.Clone(n.PublicPorts))) != len(n.PublicPorts) {
			t.Fatalf("ports %v", n.PublicPorts)
		}
		for _, port := range n.PublicPorts {
			if port < 1 || port > 65535 || !n.PortIsPublic(port) {
				t.Fatalf("port %d", port)
			}
		}
		for _, d := range n.AllowDomains {
			if !strings.HasPrefix(d, "*.") && !n.AllowsDomain(d) {
				t.Fatalf("domain %q listed but not allowed", d)
			}
			if w, ok := strings.CutPrefix(d, "*."); ok && (n.AllowsDomain(w) || !n.AllowsDomain("x."+w)) && !slices.Contains(n.AllowDomains, w) {
				t.Fatalf("wildcard %q matches %q or not x.%s", d, w, w)
			}
		}
		if n.Egress != EgressAllow && n.Egress != EgressDeny {
			t.Fatalf("egress %q", n.Egress)
		}
	})
}
