package network

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// DefaultEgressDeny is what every sandbox's egress is denied unless its
// policy names it (Config.EgressDefaultDeny): link-local addresses (the
// cloud metadata service among them), the private and shared ranges, and
// the networks the host itself is on.
const DefaultEgressDeny = "link-local,private,shared,host"

// egressRanges are the words EgressDefaultDeny accepts besides CIDRs; "host"
// is the host's own networks, read when the server starts.
var egressRanges = map[string][]netip.Prefix{
	"link-local": {netip.MustParsePrefix("169.254.0.0/16")},
	"private": {netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16")},
	"shared": {netip.MustParsePrefix("100.64.0.0/10")},
}

// Service is one of the server's own services that every sandbox reaches
// whatever its policy: the guest connects to its gateway (172.16.0.1) on
// Port, and its namespace forwards that to HostPort on the namespace's
// host-side transit address, where the service listens. The DNS forwarder
// is always the first.
type Service struct {
	Name     string
	Port     int  // on the guest's gateway
	HostPort int  // on the host
	UDP      bool // UDP as well as TCP
}

// guard is what the server, not a sandbox's policy, decides for every
// sandbox: the ranges denied unless a policy names them, and the services
// reached whatever the policy.
type guard struct {
	deny     []netip.Prefix
	services []Service
}

// parseEgressDeny reads an EgressDefaultDeny setting: comma-separated IPv4
// CIDRs and the words link-local, private, shared and host; "none" (or
// only spaces) denies nothing. Prefixes inside another are dropped, so the
// result is a valid nftables interval set.
func parseEgressDeny(spec string, hostNets func() ([]netip.Prefix, error)) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, w := range strings.Split(spec, ",") {
		w = strings.ToLower(strings.TrimSpace(w))
		switch {
		case w == "" || w == "none":
		case w == "host":
			nets, err := hostNets()
			if err != nil {
				return nil, fmt.Errorf("egress default deny: host networks: %w", err)
			}
			out = append(out, nets...)
		case egressRanges[w] != nil:
			out = append(out, egressRanges[w]...)
		default:
			p, err := netip.ParsePrefix(w)
			if err != nil {
				a, aerr := netip.ParseAddr(w)
				if aerr != nil {
					return nil, fmt.Errorf("egress default deny: %q is neither an IPv4 CIDR nor one of link-local, private, shared, host, none", w)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			if !p.Addr().Is4() {
				return nil, fmt.Errorf("egress default deny: %q is IPv6; sandboxes have IPv4 only (IPv6 is never forwarded)", w)
			}
			out = append(out, p.Masked())
		}
	}
	return mergePrefixes(out), nil
}

// mergePrefixes sorts ps and drops every prefix inside another (two CIDRs
// either nest or do not overlap).
func mergePrefixes(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	var out []netip.Prefix
	for _, p := range ps {
		if len(out) > 0 && out[len(out)-1].Contains(p.Addr()) && out[len(out)-1].Bits() <= p.Bits() {
			continue
		}
		out = append(out, p)
	}
	return out
}

// hostNetworks is every IPv4 network the host has an address on, loopback
// excepted (sandboxes' packets to 127/8 are never forwarded).
func hostNetworks() ([]netip.Prefix, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := i.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", i.Name, err)
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || ipn.IP.To4() == nil {
				continue
			}
			ip, _ := netip.AddrFromSlice(ipn.IP.To4())
			ones, bits := ipn.Mask.Size()
			if bits == 128 {
				ones -= 96
			}
			out = append(out, netip.PrefixFrom(ip, ones).Masked())
		}
	}
	return out, nil
}

// opensDenied reports whether an allow_cidrs entry names addresses inside
// the default-denied ranges: it lies within one of them. 0.0.0.0/0 names
// no range (it lies within none), so it opens the internet, not them.
func (g guard) opensDenied(cidr string) bool {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return false
	}
	for _, d := range g.deny {
		if d.Bits() <= p.Bits() && d.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// denySet renders the default-denied ranges as nftables set elements.
func (g guard) denySet() string {
	s := make([]string, len(g.deny))
	for i, p := range g.deny {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// protos is a service's nftables l4proto match.
func (s Service) protos() string {
	if s.UDP {
		return "meta l4proto { tcp, udp }"
	}
	return "meta l4proto tcp"
}
