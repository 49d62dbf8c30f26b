package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// reach curls every url from inside the sandbox in one exec and returns
// curl's exit code per url (0: answered, 7: refused or reset at once).
func reach(t *testing.T, sb *sdk.Sandbox, urls ...string) map[string]int {
	t.Helper()
	out, _ := netSh(t, sb, `for u in `+strings.Join(urls, " ")+`; do curl -s -m 10 -o /dev/null "$u"; echo "$u $?"; done`)
	codes := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		u, c, ok := strings.Cut(l, " ")
		if n, err := strconv.Atoi(c); ok && err == nil {
			codes[u] = n
		}
	}
	if len(codes) != len(urls) {
		t.Fatalf("curl from the sandbox: %s", out)
	}
	return codes
}

func outsideURL(a fmt.Stringer) string { return fmt.Sprintf("http://%s:%d/", a, outsidePort) }

// TestEgressDefaults: with no policy a sandbox reaches the internet, its
// DNS (the server's forwarder) and nothing of link-local, private or shared
// ranges, the host's networks or the host's own addresses; a policy that
// names such a range reaches it.
func TestEgressDefaults(t *testing.T) {
	ctx := context.Background()
	c := main.client(main.admin)
	// A service on every address of the host (its own addresses).
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\nhost service\n")
			c.Close()
		}
	}()
	hostPort := ln.Addr().(*net.TCPAddr).Port
	var hostAddrs []string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			hostAddrs = append(hostAddrs, fmt.Sprintf("http://%s:%d/", ipn.IP, hostPort))
		}
	}

	sb := newSandbox(t, c, sdk.CreateSandboxParams{})
	internet := []string{outsideURL(outside.ip), outsideURL(outside.altIP), fmt.Sprintf("http://%s:%d/", outsideName, outsidePort)}
	guarded := []string{outsideURL(outside.lanIP), fmt.Sprintf("http://metadata.pandastack.test:%d/", outsidePort)}
	for _, a := range outside.guardedAddrs() {
		guarded = append(guarded, outsideURL(a))
	}
	codes := reach(t, sb, append(append(append([]string{}, internet...), guarded...), hostAddrs...)...)
	for _, u := range internet {
		if codes[u] != 0 {
			t.Errorf("default policy: %s (the internet) gave curl exit %d, want an answer", u, codes[u])
		}
	}
	for _, u := range append(guarded, hostAddrs...) {
		if codes[u] != 7 {
			t.Errorf("default policy: %s gave curl exit %d, want 7 (refused at once)", u, codes[u])
		}
	}
	if st, err := sb.GetNetwork(ctx); err != nil || st.DeniedConnections < int64(len(guarded)) {
		t.Errorf("denied_connections = %d (%v) after %d denied connections", st.DeniedConnections, err, len(guarded))
	}

	// Named ranges open; what the policy does not name stays shut, and a
	// catch-all allow_cidrs names no range.
	ll, priv, shared := outside.guarded["link-local"], outside.guarded["private"], outside.guarded["shared"]
	if _, err := sb.SetNetwork(ctx, sdk.NetworkPolicy{AllowCIDRs: []string{"169.254.0.0/16", priv.String() + "/32", "0.0.0.0/0"}}); err != nil {
		t.Fatal(err)
	}
	codes = reach(t, sb, outsideURL(ll), outsideURL(priv), outsideURL(shared), outsideURL(outside.lanIP), outsideURL(outside.ip))
	for u, want := range map[string]int{outsideURL(ll): 0, outsideURL(priv): 0, outsideURL(shared): 7, outsideURL(outside.lanIP): 7, outsideURL(outside.ip): 0} {
		if codes[u] != want {
			t.Errorf("allow_cidrs 169.254.0.0/16, %s/32, 0.0.0.0/0: %s gave curl exit %d, want %d", priv, u, codes[u], want)
		}
	}
	// A policy given at create, in deny mode, names the host's LAN.
	named := newSandbox(t, c, sdk.CreateSandboxParams{Network: &sdk.NetworkPolicy{Egress: "deny", AllowCIDRs: []string{outside.lanIP.String()}}})
	codes = reach(t, named, outsideURL(outside.lanIP), outsideURL(outside.ip))
	if codes[outsideURL(outside.lanIP)] != 0 || codes[outsideURL(outside.ip)] != 7 {
		t.Errorf("egress deny with allow_cidrs %s: curl exits %v, want the LAN address only", outside.lanIP, codes)
	}
}

// TestEgressDefaultSetting: --egress-default-deny narrows the default (here
// to link-local only, so the private ranges and host networks open).
func TestEgressDefaultSetting(t *testing.T) {
	s, _ := newTestServer(t, "ps-e2e-egress-", "--dns-upstream", outside.dns, "--egress-default-deny", "link-local")
	// After the sandbox's own cleanup (cleanups run last-in first-out): a
	// server stopped first leaves the sandbox's network behind.
	t.Cleanup(s.stop)
	sb := newSandbox(t, s.client(s.admin), sdk.CreateSandboxParams{})
	ll, priv := outside.guarded["link-local"], outside.guarded["private"]
	codes := reach(t, sb, outsideURL(ll), outsideURL(priv), outsideURL(outside.lanIP), outsideURL(outside.ip))
	for u, want := range map[string]int{outsideURL(ll): 7, outsideURL(priv): 0, outsideURL(outside.lanIP): 0, outsideURL(outside.ip): 0} {
		if codes[u] != want {
			t.Errorf("--egress-default-deny link-local: %s gave curl exit %d, want %d", u, codes[u], want)
		}
	}
}
