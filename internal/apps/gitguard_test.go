package apps

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/pandastack/pandastack"
)

// The server clones what a tenant names, so the address is checked before
// any packet leaves: names and literals that land on the server's own
// networks are refused, the operator's allowed ranges and public
// addresses pass, and the clone is pinned to the address checked. The
// resolver here is a table: no lookup or connection is made.
func TestGitGuardKeepsClonesOffTheServersNetworks(t *testing.T) {
	names := map[string][]string{
		"metadata.example":  {"169.254.169.254"},
		"git.example":       {"203.0.113.7"},
		"mixed.example":     {"203.0.113.8", "10.0.0.5"},
		"rebind.example":    {"::ffff:127.0.0.1"},
		"lan-git.example":   {"10.1.2.3"},
		"self.example":      {"198.51.100.9"},
		"v6.example":        {"2001:db8::1"},
		"v6-local.example":  {"fd00::1"},
		"shared.example":    {"100.64.0.1"},
		"broadcast.example": {"255.255.255.255"},
	}
	g := GitGuard{
		Allow: []netip.Prefix{netip.MustParsePrefix("10.1.2.0/24")},
		Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			var out []netip.Addr
			for _, a := range names[host] {
				out = append(out, netip.MustParseAddr(a))
			}
			if out == nil {
				return nil, errors.New("no such host")
			}
			return out, nil
		},
		Own: func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("198.51.100.9")}, nil },
	}
	refused := []string{
		"http://169.254.169.254/latest/meta-data",
		"https://metadata.example/x.git",
		"git://127.0.0.1:9418/x.git",
		"git://mixed.example/x.git",
		"ssh://git@rebind.example/x.git",
		"git@metadata.example:org/repo.git",
		"https://self.example/x.git",
		"https://[fd00::1]/x.git",
		"https://v6-local.example/x.git",
		"git://shared.example/x.git",
		"git://broadcast.example/x.git",
		"git://[::1]/x.git",
		"https://0.0.0.0/x.git",
	}
	for _, u := range refused {
		_, _, err := g.check(context.Background(), u)
		var pe *pandastack.Error
		if !errors.As(err, &pe) || pe.Code != pandastack.EForbidden || !strings.Contains(err.Error(), "--git-allow-cidrs") {
			t.Errorf("%s: %v, want forbidden", u, err)
		}
	}
	allowed := []struct{ in, url, pin string }{
		{"https://git.example/org/repo.git", "https://git.example/org/repo.git", "http.curloptResolve=git.example:443:203.0.113.7"},
		{"http://git.example:8080/repo.git", "http://git.example:8080/repo.git", "http.curloptResolve=git.example:8080:203.0.113.7"},
		{"git://git.example/repo.git", "git://203.0.113.7/repo.git", ""},
		{"git://lan-git.example:9418/repo.git", "git://10.1.2.3:9418/repo.git", ""},
		{"ssh://git@git.example:2222/org/repo.git", "ssh://git@203.0.113.7:2222/org/repo.git", ""},
		{"git@git.example:org/repo.git", "git@203.0.113.7:org/repo.git", ""},
		{"git@v6.example:org/repo.git", "git@[2001:db8::1]:org/repo.git", ""},
	}
	for _, c := range allowed {
		u, args, err := g.check(context.Background(), c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if u != c.url || strings.Join(args, " ") != strings.TrimSpace(map[bool]string{true: "-c " + c.pin, false: ""}[c.pin != ""]) {
			t.Errorf("%s: clone %q %q, want %q pinned by %q", c.in, u, args, c.url, c.pin)
		}
	}
	if _, _, err := g.check(context.Background(), "https://nowhere.example/x.git"); err == nil || !strings.Contains(err.Error(), "no such host") {
		t.Errorf("unresolvable host: %v", err)
	}
	if _, _, err := g.check(context.Background(), "ftp://git.example/x.git"); err == nil {
		t.Error("an ftp address was accepted")
	}
}
