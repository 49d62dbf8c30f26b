package pandastack

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Egress modes of a NetworkPolicy.
const (
	EgressAllow = "allow"
	EgressDeny  = "deny"
)

// NetworkPolicy is what a sandbox may reach, and which of its ports anyone
// may reach without a key.
//
// Egress is decided in order: DenyCIDRs reject, AllowCIDRs accept, the
// addresses DNS answered for AllowDomains accept, then Egress ("allow", the
// default, or "deny"). Denied connections fail at once. "example.com"
// matches that name only; "*.example.com" every name below it, not the apex;
// any other "*" is rejected. AllowDomains implies Egress "deny".
type NetworkPolicy struct {
	Egress       string   `json:"egress,omitempty"`
	AllowCIDRs   []string `json:"allow_cidrs,omitempty"`
	DenyCIDRs    []string `json:"deny_cidrs,omitempty"`
	AllowDomains []string `json:"allow_domains,omitempty"`
	PublicPorts  []int    `json:"public_ports,omitempty"`
}

// NetworkStatus is the policy in force and how many connections it denied.
type NetworkStatus struct {
	NetworkPolicy
	DeniedConnections int64 `json:"denied_connections"`
}

// GetNetwork returns the sandbox's policy in force.
func (s *Sandbox) GetNetwork(ctx context.Context) (NetworkStatus, error) {
	var st NetworkStatus
	err := s.c.do(ctx, request{method: "GET", path: s.path("/network")}, &st)
	return st, err
}

// SetNetwork replaces the sandbox's policy; new connections follow it at
// once.
func (s *Sandbox) SetNetwork(ctx context.Context, p NetworkPolicy) (NetworkStatus, error) {
	var st NetworkStatus
	if err := s.c.do(ctx, request{method: "PUT", path: s.path("/network"), body: p}, &st); err != nil {
		return st, err
	}
	s.Network = &st.NetworkPolicy
	return st, nil
}

// PortHost is where port of the sandbox is served through the server:
// "PORT-ID.DOMAIN" (send requests to the server with this Host header, or
// resolve it to the server). Python's get_host and TypeScript's getHost;
// in Go the name Host is the sandbox's machine.
func (s *Sandbox) PortHost(port int) string {
	d := s.Domain
	if d == "" {
		d = "localhost"
	}
	return fmt.Sprintf("%d-%s.%s", port, s.ID, d)
}

// PortURL is a signed URL for one port.
type PortURL struct {
	URL       string    `json:"url"`
	Host      string    `json:"host"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// SignPortURL returns a URL that reaches port without an API key until it
// expires (0: the server's default, an hour).
func (s *Sandbox) SignPortURL(ctx context.Context, port int, expires time.Duration) (PortURL, error) {
	var body any
	if expires > 0 {
		body = map[string]int64{"expires_in_seconds": int64(expires / time.Second)}
	}
	var u PortURL
	err := s.c.do(ctx, request{method: "POST", path: s.path("/ports/" + strconv.Itoa(port) + "/url"), body: body}, &u)
	return u, err
}
