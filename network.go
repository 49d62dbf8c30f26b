package pandastack

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Egress modes of a NetworkPolicy.
const (
	EgressAllow = "allow"
	EgressDeny  = "deny"
)

// NetworkPolicy is a sandbox's network settings: what it may reach
// (egress) and which of its ports anyone may reach without a key.
//
// Egress is decided in this order: deny_cidrs reject; allow_cidrs entries
// inside one of the server's default-denied ranges accept; those ranges
// reject (by default link-local, private and shared addresses and the
// host's own networks: see internal/network.DefaultEgressDeny); the other
// allow_cidrs accept; addresses the DNS answered for allow_domains accept
// (for the answer's TTL); then the mode, "allow" (the default) or "deny".
// A denied connection fails at once (TCP reset, ICMP admin-prohibited for
// the rest) and is counted.
//
// Domains: "example.com" matches that name only; "*.example.com" matches
// every name below it (a.example.com, a.b.example.com) but not
// example.com itself. A "*" anywhere else ("*example.com", "a.*.com", "*"),
// a wildcard over a single label ("*.com") and IP addresses are rejected.
// With allow_domains the sandbox's DNS answers only those names (REFUSED
// otherwise), and allow_domains needs egress "deny" (implied when egress is
// left empty). With egress "deny" and no domains, DNS answers nothing.
type NetworkPolicy struct {
	Egress       string   `json:"egress"`
	AllowCIDRs   []string `json:"allow_cidrs,omitempty"`
	DenyCIDRs    []string `json:"deny_cidrs,omitempty"`
	AllowDomains []string `json:"allow_domains,omitempty"`
	// PublicPorts are reachable through the proxy without a key or token.
	PublicPorts []int `json:"public_ports,omitempty"`
}

// maxPolicyEntries bounds each list of a policy.
const maxPolicyEntries = 256

// Normalize validates p and returns it in canonical form: egress filled
// in, CIDRs masked, domains lower-case without a trailing dot, ports sorted.
// Errors are EInvalid and name the offending entry.
func (p NetworkPolicy) Normalize() (NetworkPolicy, error) {
	bad := func(format string, args ...any) (NetworkPolicy, error) {
		return NetworkPolicy{}, Errorf(EInvalid, "network: "+format, args...)
	}
	out := NetworkPolicy{Egress: strings.ToLower(strings.TrimSpace(p.Egress))}
	for name, l := range map[string]int{"allow_cidrs": len(p.AllowCIDRs), "deny_cidrs": len(p.DenyCIDRs),
		"allow_domains": len(p.AllowDomains), "public_ports": len(p.PublicPorts)} {
		if l > maxPolicyEntries {
			return bad("%s has %d entries, at most %d are allowed", name, l, maxPolicyEntries)
		}
	}
	switch out.Egress {
	case "":
		out.Egress = EgressAllow
		if len(p.AllowDomains) > 0 {
			out.Egress = EgressDeny
		}
	case EgressAllow, EgressDeny:
	default:
		return bad("egress must be %q or %q, not %q", EgressAllow, EgressDeny, p.Egress)
	}
	if out.Egress == EgressAllow && len(p.AllowDomains) > 0 {
		return bad(`allow_domains needs egress "deny" (with egress "allow" every domain is reachable)`)
	}
	var err error
	if out.AllowCIDRs, err = normalizeCIDRs("allow_cidrs", p.AllowCIDRs); err != nil {
		return NetworkPolicy{}, err
	}
	if out.DenyCIDRs, err = normalizeCIDRs("deny_cidrs", p.DenyCIDRs); err != nil {
		return NetworkPolicy{}, err
	}
	for _, d := range p.AllowDomains {
		n, err := normalizeDomain(d)
		if err != nil {
			return NetworkPolicy{}, err
		}
		if !slices.Contains(out.AllowDomains, n) {
			out.AllowDomains = append(out.AllowDomains, n)
		}
	}
	for _, port := range p.PublicPorts {
		if port < 1 || port > 65535 {
			return bad("public port %d is outside 1-65535", port)
		}
		if !slices.Contains(out.PublicPorts, port) {
			out.PublicPorts = append(out.PublicPorts, port)
		}
	}
	slices.Sort(out.PublicPorts)
	return out, nil
}

func normalizeCIDRs(field string, in []string) ([]string, error) {
	var out []string
	for _, s := range in {
		s = strings.TrimSpace(s)
		var pfx netip.Prefix
		var err error
		if strings.Contains(s, "/") {
			pfx, err = netip.ParsePrefix(s)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(s); err == nil {
				pfx = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil {
			return nil, Errorf(EInvalid, "network: %s entry %q is not an IPv4 address or CIDR", field, s)
		}
		if !pfx.Addr().Is4() {
			return nil, Errorf(EInvalid, "network: %s entry %q is IPv6; sandboxes have IPv4 only", field, s)
		}
		c := pfx.Masked().String()
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// normalizeDomain checks one allow_domains entry (see NetworkPolicy).
func normalizeDomain(d string) (string, error) {
	bad := func(why string) (string, error) {
		return "", Errorf(EInvalid, "network: allow_domains entry %q %s", d, why)
	}
	n := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
	if n == "" {
		return bad("is empty")
	}
	if _, err := netip.ParseAddr(n); err == nil {
		return bad("is an IP address: use allow_cidrs")
	}
	rest, wild := strings.CutPrefix(n, "*.")
	if strings.Contains(rest, "*") || n == "*" {
		return bad(`has an ambiguous wildcard: only a leading "*." is allowed, as in "*.example.com"`)
	}
	labels := strings.Split(rest, ".")
	if wild && len(labels) < 2 {
		return bad(`wildcards a whole top-level domain: use "*.name.tld"`)
	}
	if len(rest) > 253 {
		return bad("is longer than 253 characters")
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return bad("has an empty or over-long label")
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return bad(fmt.Sprintf("has an invalid character %q", c))
			}
		}
	}
	return n, nil
}

// AllowsDomain reports whether name (as asked in DNS, any case, with or
// without a trailing dot) matches the policy's allow_domains.
func (p NetworkPolicy) AllowsDomain(name string) bool {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	for _, d := range p.AllowDomains {
		if suffix, ok := strings.CutPrefix(d, "*"); ok {
			if strings.HasSuffix(name, suffix) && len(name) > len(suffix) {
				return true
			}
		} else if name == d {
			return true
		}
	}
	return false
}

// PortIsPublic reports whether port is reachable without a key.
func (p NetworkPolicy) PortIsPublic(port int) bool { return slices.Contains(p.PublicPorts, port) }
