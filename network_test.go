package pandastack

import (
	"strconv"
	"strings"
	"testing"
)

func TestNetworkPolicyNormalize(t *testing.T) {
	ok := []struct {
		name string
		in   NetworkPolicy
		want string // egress|allow|deny|domains|ports
	}{
		{"empty allows all", NetworkPolicy{}, "allow||||"},
		{"domains imply deny", NetworkPolicy{AllowDomains: []string{"Example.COM.", "*.example.com"}}, "deny|||example.com,*.example.com|"},
		{"cidrs masked, ips widened", NetworkPolicy{Egress: "DENY", AllowCIDRs: []string{"10.1.2.3/8", "1.2.3.4"}, DenyCIDRs: []string{"10.9.0.0/16"}}, "deny|10.0.0.0/8,1.2.3.4/32|10.9.0.0/16||"},
		{"ports sorted, deduplicated", NetworkPolicy{PublicPorts: []int{8080, 80, 8080}}, "allow||||80,8080"},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			p, err := c.in.Normalize()
			if err != nil {
				t.Fatal(err)
			}
			var ports []string
			for _, p := range p.PublicPorts {
				ports = append(ports, strconv.Itoa(p))
			}
			got := strings.Join([]string{p.Egress, strings.Join(p.AllowCIDRs, ","), strings.Join(p.DenyCIDRs, ","),
				strings.Join(p.AllowDomains, ","), strings.Join(ports, ",")}, "|")
			if got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
	bad := []struct {
		name string
		in   NetworkPolicy
		msg  string
	}{
		{"unknown egress", NetworkPolicy{Egress: "maybe"}, `egress must be "allow" or "deny"`},
		{"domains with allow", NetworkPolicy{Egress: "allow", AllowDomains: []string{"a.com"}}, `allow_domains needs egress "deny"`},
		{"glued wildcard", NetworkPolicy{AllowDomains: []string{"*example.com"}}, "ambiguous wildcard"},
		{"inner wildcard", NetworkPolicy{AllowDomains: []string{"a.*.com"}}, "ambiguous wildcard"},
		{"bare star", NetworkPolicy{AllowDomains: []string{"*"}}, "ambiguous wildcard"},
		{"double star", NetworkPolicy{AllowDomains: []string{"*.*.example.com"}}, "ambiguous wildcard"},
		{"tld wildcard", NetworkPolicy{AllowDomains: []string{"*.com"}}, "top-level domain"},
		{"ip as domain", NetworkPolicy{AllowDomains: []string{"10.0.0.1"}}, "use allow_cidrs"},
		{"bad char", NetworkPolicy{AllowDomains: []string{"ex ample.com"}}, "invalid character"},
		{"empty label", NetworkPolicy{AllowDomains: []string{"a..com"}}, "empty or over-long label"},
		{"bad cidr", NetworkPolicy{AllowCIDRs: []string{"10.0.0.0/33"}}, `allow_cidrs entry "10.0.0.0/33"`},
		{"ipv6", NetworkPolicy{DenyCIDRs: []string{"::1/128"}}, "IPv6"},
		{"port zero", NetworkPolicy{PublicPorts: []int{0}}, "outside 1-65535"},
		{"port too big", NetworkPolicy{PublicPorts: []int{65536}}, "outside 1-65535"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.in.Normalize()
			if err == nil || ErrorCode(err) != EInvalid || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("err = %v, want invalid_argument containing %q", err, c.msg)
			}
		})
	}
}

func TestAllowsDomain(t *testing.T) {
	p, err := NetworkPolicy{AllowDomains: []string{"example.com", "*.pypi.org"}}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"example.com": true, "EXAMPLE.com.": true, "www.example.com": false,
		"pypi.org": false, "files.pypi.org": true, "a.b.pypi.org": true, "evilpypi.org": false, "pypi.org.evil.com": false,
	} {
		if got := p.AllowsDomain(name); got != want {
			t.Errorf("AllowsDomain(%q) = %v, want %v", name, got, want)
		}
	}
}
