package e2bcompat

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"

	"github.com/pandastack/pandastack"
)

// Network is what the E2B layer needs of the sandboxes' network
// (internal/network): changing a live sandbox's egress policy.
type Network interface {
	SetPolicy(ctx context.Context, id string, p pandastack.NetworkPolicy) (pandastack.NetworkPolicy, error)
}

// networkRequest is E2B's network options, on create (with
// allow_internet_access beside them) and on updateNetwork.
type networkRequest struct {
	AllowOut           []string `json:"allowOut"`
	DenyOut            []string `json:"denyOut"`
	AllowPublicTraffic *bool    `json:"allowPublicTraffic"`
	// AllowInternetAccess is only in updateNetwork's body; create has it
	// at the top level.
	AllowInternetAccess *bool `json:"allow_internet_access"`
	// Not served here: a request that sets them fails rather than runs
	// without what it asked for.
	Rules       json.RawMessage `json:"rules"`
	EgressProxy json.RawMessage `json:"egressProxy"`
}

// unsupported refuses the options this server does not implement.
func (n *networkRequest) unsupported() error {
	if n == nil {
		return nil
	}
	for name, v := range map[string]json.RawMessage{"rules": n.Rules, "egressProxy": n.EgressProxy} {
		if s := strings.TrimSpace(string(v)); s != "" && s != "null" && s != "{}" {
			return pandastack.Errorf(pandastack.EInvalid, "network.%s is not supported by this server", name)
		}
	}
	return nil
}

// allTraffic is how E2B's SDKs write "everything" in allowOut and denyOut.
const allTraffic = "0.0.0.0/0"

// egressPolicy turns E2B's egress options into ours. E2B: entries are IPv4
// addresses, CIDRs or domain names; allowOut wins over denyOut;
// internet access off is denyOut 0.0.0.0/0. Ours: egress "deny" with
// allow_cidrs and allow_domains, or egress "allow" with deny_cidrs, where a
// deny wins. Everything E2B can say maps, except what ours cannot hold: a
// domain in denyOut, and an allowOut range carved out of a narrower denyOut
// range — each a clear 400.
func egressPolicy(allowOut, denyOut []string, internet *bool) (*pandastack.NetworkPolicy, error) {
	denyAll := internet != nil && !*internet
	var allowCIDRs, allowDomains, denyCIDRs []string
	for _, e := range allowOut {
		e = strings.TrimSpace(e)
		if e == allTraffic {
			return nil, nil // everything allowed, whatever denyOut says
		}
		if isCIDR(e) {
			allowCIDRs = append(allowCIDRs, e)
		} else {
			allowDomains = append(allowDomains, e)
		}
	}
	for _, e := range denyOut {
		e = strings.TrimSpace(e)
		switch {
		case e == allTraffic:
			denyAll = true
		case isCIDR(e):
			denyCIDRs = append(denyCIDRs, e)
		default:
			return nil, pandastack.Errorf(pandastack.EInvalid,
				"network.denyOut entry %q is a domain: this server denies addresses, and names only by allowing (allowOut with denyOut %q)", e, allTraffic)
		}
	}
	var p pandastack.NetworkPolicy
	if denyAll {
		p = pandastack.NetworkPolicy{Egress: pandastack.EgressDeny, AllowCIDRs: allowCIDRs, AllowDomains: allowDomains}
	} else {
		if len(allowOut) == 0 && len(denyCIDRs) == 0 {
			return nil, nil
		}
		// With everything allowed, allowOut matters only where it opens a
		// denyOut range, which ours cannot express.
		for _, a := range allowCIDRs {
			for _, d := range denyCIDRs {
				if overlaps(a, d) {
					return nil, pandastack.Errorf(pandastack.EInvalid,
						"network.allowOut %q opens part of denyOut %q: this server cannot allow inside a denied range unless denyOut is %q", a, d, allTraffic)
				}
			}
		}
		p = pandastack.NetworkPolicy{Egress: pandastack.EgressAllow, DenyCIDRs: denyCIDRs}
	}
	n, err := p.Normalize()
	if err != nil {
		return nil, err
	}
	return &n, nil
}

func isCIDR(s string) bool {
	if strings.Contains(s, "/") {
		_, err := netip.ParsePrefix(s)
		return err == nil
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}

func prefix(s string) netip.Prefix {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked()
	}
	a, _ := netip.ParseAddr(s)
	return netip.PrefixFrom(a, a.BitLen())
}

func overlaps(a, b string) bool { return prefix(a).Overlaps(prefix(b)) }

// updateNetwork: PUT /sandboxes/{id}/network → 204. The body replaces the
// sandbox's egress rules (E2B's semantics); its public ports stay.
func (s *Server) updateNetwork(w http.ResponseWriter, r *http.Request, team string) error {
	sb, err := s.ownSandbox(r, team)
	if err != nil {
		return err
	}
	var req networkRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if err := req.unsupported(); err != nil {
		return err
	}
	if s.cfg.Network == nil {
		return pandastack.Errorf(pandastack.EUnavailable, "sandbox networking is off on this server")
	}
	p, err := egressPolicy(req.AllowOut, req.DenyOut, req.AllowInternetAccess)
	if err != nil {
		return err
	}
	if p == nil {
		p = &pandastack.NetworkPolicy{Egress: pandastack.EgressAllow}
	}
	if _, err := s.cfg.Network.SetPolicy(r.Context(), sb.ID, *p); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "network policy set", "sandbox", sb.ID, "egress", p.Egress,
		"allow_cidrs", len(p.AllowCIDRs), "allow_domains", len(p.AllowDomains), "deny_cidrs", len(p.DenyCIDRs))
	w.WriteHeader(http.StatusNoContent)
	return nil
}
