package apps

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"

	"github.com/pandastack/pandastack"
)

// GitGuard keeps the server's clones off its own networks: a tenant names
// the git address and the server fetches it, so without a guard any team
// could make the server reach the cloud metadata service, the host's own
// daemons or the private network behind it (server-side request forgery).
// An address whose host resolves to a loopback, link-local, private,
// shared, unspecified or multicast address, or to one of the host's own,
// is refused unless the operator allowed its range (--git-allow-cidrs,
// for a git server on the LAN). The clone then goes to the very address
// that was checked (pinned for http and https, the host replaced by it
// for git and ssh), so a name that resolves differently a moment later
// reaches nothing new.
type GitGuard struct {
	// Allow lists ranges the server may clone from even though they are
	// its own networks.
	Allow []netip.Prefix
	// Resolve looks a host name up (nil: the system resolver).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Own lists the host's addresses (nil: its interfaces').
	Own func() ([]netip.Addr, error)
}

// closed are ranges no clone reaches unless allowed.
var closed = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{"0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12",
		"192.168.0.0/16", "100.64.0.0/10", "224.0.0.0/4", "240.0.0.0/4", "::/128", "::1/128", "fe80::/10",
		"fc00::/7", "ff00::/8"} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// gitTarget is a git address taken apart: its scheme ("scp" for the
// user@host:path form), host, port ("" for the default) and a way to put
// it back together with another host.
type gitTarget struct {
	scheme, host, port string
	rebuild            func(host string) string
}

// parseGitTarget takes a remote git address apart. Local paths are not
// remote (isLocal).
func parseGitTarget(raw string) (gitTarget, error) {
	if i := strings.Index(raw, "://"); i > 0 {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			return gitTarget{}, invalid("git_url %q is not a repository address", raw)
		}
		scheme := strings.ToLower(u.Scheme)
		switch scheme {
		case "http", "https", "git", "ssh":
		default:
			return gitTarget{}, invalid("git_url %q: only https, http, git and ssh addresses are cloned", raw)
		}
		return gitTarget{scheme: scheme, host: u.Hostname(), port: u.Port(), rebuild: func(h string) string {
			v := *u
			if u.Port() != "" {
				v.Host = net.JoinHostPort(h, u.Port())
			} else if strings.Contains(h, ":") {
				v.Host = "[" + h + "]"
			} else {
				v.Host = h
			}
			return v.String()
		}}, nil
	}
	// scp-like: [user@]host:path
	colon := strings.Index(raw, ":")
	if colon <= 0 {
		return gitTarget{}, invalid("git_url %q is not a repository address", raw)
	}
	userHost, path := raw[:colon], raw[colon+1:]
	user, host := "", userHost
	if at := strings.LastIndex(userHost, "@"); at >= 0 {
		user, host = userHost[:at+1], userHost[at+1:]
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" || strings.ContainsAny(host, "/ ") {
		return gitTarget{}, invalid("git_url %q is not a repository address", raw)
	}
	return gitTarget{scheme: "scp", host: host, rebuild: func(h string) string {
		if strings.Contains(h, ":") {
			h = "[" + h + "]"
		}
		return user + h + ":" + path
	}}, nil
}

// check resolves the address's host and refuses it when any of its
// addresses is closed and not allowed. It returns the address to clone
// and the git options that pin it.
func (g GitGuard) check(ctx context.Context, raw string) (cloneURL string, gitArgs []string, err error) {
	t, err := parseGitTarget(raw)
	if err != nil {
		return "", nil, err
	}
	addrs, err := g.resolve(ctx, t.host)
	if err != nil {
		return "", nil, fmt.Errorf("resolve %s: %w", t.host, err)
	}
	own, err := g.own()
	if err != nil {
		return "", nil, fmt.Errorf("read the host's addresses: %w", err)
	}
	for _, a := range addrs {
		if !g.reachable(a, own) {
			return "", nil, pandastack.Errorf(pandastack.EForbidden,
				"git_url %q: %s resolves to %s, an address on the server's own networks (loopback, link-local, private or shared ranges, or the host itself), which the server does not clone from; its operator can allow a range with --git-allow-cidrs",
				raw, t.host, a)
		}
	}
	pick := addrs[0]
	if t.scheme == "http" || t.scheme == "https" {
		port := t.port
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[t.scheme]
		}
		// libcurl connects to the checked address while TLS still checks
		// the name.
		return raw, []string{"-c", "http.curloptResolve=" + t.host + ":" + port + ":" + pick.String()}, nil
	}
	return t.rebuild(pick.String()), nil, nil
}

func (g GitGuard) reachable(a netip.Addr, own []netip.Addr) bool {
	a = a.Unmap()
	for _, p := range g.Allow {
		if p.Contains(a) {
			return true
		}
	}
	for _, p := range closed {
		if p.Contains(a) {
			return false
		}
	}
	for _, o := range own {
		if o.Unmap() == a {
			return false
		}
	}
	return true
}

func (g GitGuard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if g.Resolve != nil {
		return g.Resolve(ctx, host)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("no addresses")
	}
	return ips, nil
}

func (g GitGuard) own() ([]netip.Addr, error) {
	if g.Own != nil {
		return g.Own()
	}
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}
