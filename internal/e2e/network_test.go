package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack/internal/network"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// The "outside world" of the network tests: a namespace the test makes,
// linked to the host over a LAN of its own (10.98.N.0/24, a network the host
// is on), with an HTTP server on two "internet" addresses (documentation
// ranges, routed from the host to the namespace), on its LAN address, and
// on its loopback, which carries one address in each range sandboxes may not
// reach by default (link-local, private, shared); and a DNS server on host
// loopback that the servers use as their upstream. These machines have no
// internet; this stands in for it. No test packet leaves the machine.
const (
	outsideName    = "outside.pandastack.test"
	outsideAltName = "other.pandastack.test"
	outsidePort    = 8080
)

type outsideWorld struct {
	ns        string
	hostLink  string
	hostIP    netip.Addr // the host's address on the outside link
	lanIP     netip.Addr // the outside namespace's address on that link
	ip, altIP netip.Addr // the HTTP server's two "internet" addresses
	// guarded are addresses on the outside's loopback, each in a
	// range the default policy denies, by range name.
	guarded map[string]netip.Addr
	dns     string // upstream DNS (host:port on loopback)
	stop    []func()
}

var outside *outsideWorld

// startOutside makes the outside namespace and the DNS server.
func startOutside() (*outsideWorld, error) {
	o := &outsideWorld{}
	sub := -1
	addrs, _ := net.InterfaceAddrs()
	used := map[int]bool{}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP[len(ipn.IP)-4] == 10 && ipn.IP.To4()[1] == 98 {
			used[int(ipn.IP.To4()[2])] = true
		}
	}
	for i := 1 + os.Getpid()%200; i < 250; i++ {
		if !used[i] {
			sub = i
			break
		}
	}
	if sub < 0 {
		return nil, fmt.Errorf("no free 10.98.x.0/24 for the outside namespace")
	}
	b := byte(sub)
	o.ns = fmt.Sprintf("pse2eout%d", os.Getpid())
	o.hostLink = fmt.Sprintf("pse2eo%d", os.Getpid()%100000)
	o.hostIP = netip.AddrFrom4([4]byte{10, 98, b, 1})
	o.lanIP = netip.AddrFrom4([4]byte{10, 98, b, 2})
	o.ip = netip.AddrFrom4([4]byte{198, 51, 100, b})
	o.altIP = netip.AddrFrom4([4]byte{203, 0, 113, b})
	o.guarded = map[string]netip.Addr{
		"link-local": netip.AddrFrom4([4]byte{169, 254, 77, b}),
		"private":    netip.AddrFrom4([4]byte{192, 168, 77, b}),
		"shared":     netip.AddrFrom4([4]byte{100, 64, 77, b}),
	}
	host := fmt.Sprintf("netns add %[1]s\nlink add %[2]s type veth peer name eth0 netns %[1]s\naddr add %[3]s/24 dev %[2]s\nlink set %[2]s up\n",
		o.ns, o.hostLink, o.hostIP)
	inside := fmt.Sprintf("link set lo up\naddr add %s/24 dev eth0\nlink set eth0 up\nroute add default via %s\n",
		o.lanIP, o.hostIP)
	routes := ""
	for _, a := range append([]netip.Addr{o.ip, o.altIP}, o.guardedAddrs()...) {
		// Host routes, /32 only: nothing else of these ranges changes its way.
		routes += fmt.Sprintf("route add %s/32 via %s dev %s\n", a, o.lanIP, o.hostLink)
		inside += fmt.Sprintf("addr add %s/32 dev lo\n", a) // no dummy module here: lo carries them
	}
	o.stop = append(o.stop, func() {
		_ = exec.Command("ip", "netns", "del", o.ns).Run()
		_ = exec.Command("ip", "link", "del", o.hostLink).Run() // its routes go with it
	})
	// The link, the namespace's side, then the host's routes through it.
	steps := []struct {
		args []string
		in   string
	}{{[]string{"-batch", "-"}, host}, {[]string{"-n", o.ns, "-batch", "-"}, inside}, {[]string{"-batch", "-"}, routes}}
	for _, st := range steps {
		cmd := exec.Command("ip", st.args...)
		cmd.Stdin = strings.NewReader(st.in)
		if out, err := cmd.CombinedOutput(); err != nil {
			o.close()
			return nil, fmt.Errorf("make outside namespace: %v: %s", err, out)
		}
	}
	ln, err := listenIn(o.ns, fmt.Sprintf("0.0.0.0:%d", outsidePort))
	if err != nil {
		o.close()
		return nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "outside %s from %s", r.Host, r.RemoteAddr)
	})}
	go srv.Serve(ln)
	o.stop = append(o.stop, func() { srv.Close() })
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		o.close()
		return nil, err
	}
	o.dns = pc.LocalAddr().String()
	go serveTestDNS(pc, map[string]netip.Addr{outsideName + ".": o.ip, outsideAltName + ".": o.altIP,
		"metadata.pandastack.test.": o.guarded["link-local"]})
	o.stop = append(o.stop, func() { pc.Close() })
	return o, nil
}

// guardedAddrs are the outside's addresses in default-denied ranges.
func (o *outsideWorld) guardedAddrs() []netip.Addr {
	return []netip.Addr{o.guarded["link-local"], o.guarded["private"], o.guarded["shared"]}
}

func (o *outsideWorld) close() {
	for i := len(o.stop) - 1; i >= 0; i-- {
		o.stop[i]()
	}
}

// listenIn opens a TCP listener inside a network namespace.
func listenIn(ns, addr string) (net.Listener, error) {
	type res struct {
		ln  net.Listener
		err error
	}
	c := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			c <- res{nil, err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			c <- res{nil, err}
			return
		}
		ln, err := net.Listen("tcp4", addr)
		c <- res{ln, err}
	}()
	r := <-c
	return r.ln, r.err
}

// serveTestDNS answers A queries for names (TTL 300) and asks the host's
// resolver for the rest.
func serveTestDNS(pc net.PacketConn, names map[string]netip.Addr) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		addr, ok := names[strings.ToLower(q.Name.String())]
		if !ok { // not one of ours: the host's resolver answers (dns_host_test.go)
			query := append([]byte(nil), buf[:n]...)
			go func() {
				if ans, ok := askHost(query); ok {
					_, _ = pc.WriteTo(ans, from)
				} else if ans, err := nameError(h, q); err == nil {
					_, _ = pc.WriteTo(ans, from)
				}
			}()
			continue
		}
		rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
		b := dnsmessage.NewBuilder(nil, rh)
		b.EnableCompression()
		_ = b.StartQuestions()
		_ = b.Question(q)
		if q.Type == dnsmessage.TypeA {
			_ = b.StartAnswers()
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 300}, dnsmessage.AResource{A: addr.As4()})
		}
		out, err := b.Finish()
		if err == nil {
			_, _ = pc.WriteTo(out, from)
		}
	}
}

// netSh runs a shell command in a sandbox and returns its output and exit code.
func netSh(t *testing.T, sb *sdk.Sandbox, cmd string) (string, int) {
	t.Helper()
	r, err := sb.Exec(context.Background(), cmd, sdk.ExecOptions{TimeoutSeconds: 60})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return string(r.Stdout) + string(r.Stderr), r.ExitCode
}

// curlOut fetches url from inside the sandbox: body or curl's error, and
// curl's exit code (7: connection refused or reset at once, 28: timeout).
func curlOut(t *testing.T, sb *sdk.Sandbox, url string) (string, int) {
	return netSh(t, sb, "curl -sS -m 10 "+url)
}

func TestSandboxNetwork(t *testing.T) {
	c := main.client(main.admin)
	sb := newSandbox(t, c, sdk.CreateSandboxParams{})
	ctx := context.Background()
	if out, code := netSh(t, sb, "cat /proc/net/fib_trie | grep -c '172.16.0.2'"); code != 0 {
		t.Fatalf("the guest has no 172.16.0.2 address: %s", out)
	}
	// Outbound through the host, by address and by name (the DNS forwarder).
	byIP := fmt.Sprintf("http://%s:%d/", outside.ip, outsidePort)
	if out, code := curlOut(t, sb, byIP); code != 0 || !strings.HasPrefix(out, "outside ") {
		t.Fatalf("curl %s from the sandbox: exit %d: %s", byIP, code, out)
	}
	byName := fmt.Sprintf("http://%s:%d/", outsideName, outsidePort)
	out, code := curlOut(t, sb, byName)
	if code != 0 || !strings.HasPrefix(out, "outside "+outsideName) {
		t.Fatalf("curl %s from the sandbox: exit %d: %s", byName, code, out)
	}
	// The outside sees the host's address, not the sandbox's.
	if !strings.Contains(out, "from "+outside.hostIP.String()+":") {
		t.Errorf("the outside server saw %q, want the host's address %s", out, outside.hostIP)
	}
	// The host's own services are out of reach (a listener on every host
	// address), and fail fast.
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
	for _, target := range []string{outside.hostIP.String(), "172.16.0.1"} {
		u := fmt.Sprintf("http://%s:%d/", target, hostPort)
		if out, code := curlOut(t, sb, u); code != 7 {
			t.Errorf("curl %s (a host service) from the sandbox: exit %d (%s), want 7 (refused)", u, code, out)
		}
	}
	// Two forks keep the parent's address, live in namespaces of their
	// own, and both reach out at the same time.
	kids, err := sb.ForkN(ctx, 2)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	var wg sync.WaitGroup
	outs := make([]string, len(kids))
	codes := make([]int, len(kids))
	for i, k := range kids {
		t.Cleanup(func() { k.Kill(context.Background()) })
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := k.Exec(ctx, "grep -c 172.16.0.2 /proc/net/fib_trie >/dev/null && curl -sS -m 10 "+byName, sdk.ExecOptions{TimeoutSeconds: 60})
			if err != nil {
				outs[i], codes[i] = err.Error(), -1
				return
			}
			outs[i], codes[i] = string(r.Stdout)+string(r.Stderr), r.ExitCode
		}()
	}
	wg.Wait()
	for i := range kids {
		if codes[i] != 0 || !strings.HasPrefix(outs[i], "outside ") {
			t.Errorf("fork %d: exit %d: %s", i, codes[i], outs[i])
		}
	}
	// Each has its own namespace with the same guest-side addresses.
	seen := map[string]bool{}
	for _, id := range []string{sb.ID, kids[0].ID, kids[1].ID} {
		ns := sandboxNetns(t, main.dataDir, id)
		out, err := exec.Command("ip", "-n", ns, "-4", "-br", "addr", "show", "tap0").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "172.16.0.1/30") {
			t.Errorf("namespace of %s: tap0 %s (%v)", id, out, err)
		}
		if seen[ns] {
			t.Errorf("two sandboxes share namespace %s", ns)
		}
		seen[ns] = true
	}
}

func TestEgressPolicy(t *testing.T) {
	c := main.client(main.admin)
	ctx := context.Background()
	sb := newSandbox(t, c, sdk.CreateSandboxParams{Network: &sdk.NetworkPolicy{AllowDomains: []string{outsideName}}})
	if sb.Network == nil || sb.Network.Egress != "deny" {
		t.Fatalf("created with allow_domains: network %+v, want egress deny", sb.Network)
	}
	allowed := fmt.Sprintf("http://%s:%d/", outsideName, outsidePort)
	if out, code := curlOut(t, sb, allowed); code != 0 || !strings.HasPrefix(out, "outside ") {
		t.Fatalf("allowed domain: curl %s: exit %d: %s", allowed, code, out)
	}
	// Another name does not resolve; its address is refused at once.
	if out, code := netSh(t, sb, "getent hosts "+outsideAltName); code == 0 {
		t.Errorf("a domain outside the allowlist resolved: %s", out)
	}
	other := fmt.Sprintf("http://%s:%d/", outside.altIP, outsidePort)
	if out, code := curlOut(t, sb, other); code != 7 {
		t.Errorf("denied address: curl %s: exit %d (%s), want 7 (reset at once)", other, code, out)
	}
	st, err := sb.GetNetwork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.DeniedConnections < 1 {
		t.Errorf("denied_connections = %d after a denied connection", st.DeniedConnections)
	}
	if !logHas(main, "dns query refused by network policy", sb.ID) {
		t.Errorf("the refused DNS query was not logged")
	}
	eventually(t, 40*time.Second, "the denied connection to be logged", func() bool {
		return logHas(main, "egress connections denied by network policy", sb.ID)
	})
	// Changed while it runs: CIDRs.
	if _, err := sb.SetNetwork(ctx, sdk.NetworkPolicy{Egress: "deny", AllowCIDRs: []string{outside.altIP.String()}}); err != nil {
		t.Fatal(err)
	}
	if out, code := curlOut(t, sb, other); code != 0 {
		t.Errorf("after allowing %s: exit %d: %s", outside.altIP, code, out)
	}
	if out, code := curlOut(t, sb, fmt.Sprintf("http://%s:%d/", outside.ip, outsidePort)); code != 7 {
		t.Errorf("after the domain left the policy, %s: exit %d (%s), want 7", outside.ip, code, out)
	}
	if _, err := sb.SetNetwork(ctx, sdk.NetworkPolicy{DenyCIDRs: []string{outside.altIP.String() + "/32"}}); err != nil {
		t.Fatal(err)
	}
	if out, code := curlOut(t, sb, other); code != 7 {
		t.Errorf("deny_cidrs: exit %d (%s), want 7", code, out)
	}
	if out, code := curlOut(t, sb, allowed); code != 0 {
		t.Errorf("allow-all but one CIDR: %s: exit %d: %s", allowed, code, out)
	}
	// Bad policies: 400 naming the problem, nothing changed.
	for _, c := range []struct{ body, want string }{
		{`{"allow_domains":["*example.com"]}`, "ambiguous wildcard"},
		{`{"allow_domains":["a.*.com"]}`, "ambiguous wildcard"},
		{`{"allow_domains":["*"]}`, "ambiguous wildcard"},
		{`{"egress":"sometimes"}`, "egress must be"},
		{`{"allow_cidrs":["10.0.0.0/40"]}`, "allow_cidrs entry"},
		{`{"public_ports":[70000]}`, "outside 1-65535"},
		{`{"egres":"deny"}`, "unknown field"},
		{`{"egress":`, "invalid JSON"},
	} {
		status, code, body := call(t, "PUT", "/v1/sandboxes/"+sb.ID+"/network", main.admin, c.body)
		if status != 400 || code != "invalid_argument" || !strings.Contains(body, c.want) {
			t.Errorf("PUT network %s: %d %s, want 400 with %q", c.body, status, body, c.want)
		}
	}
	status, _, body := call(t, "POST", "/v1/sandboxes", main.admin, `{"template":"`+template+`","network":{"allow_domains":["*.com"]}}`)
	if status != 400 || !strings.Contains(body, "top-level domain") {
		t.Errorf("create with a TLD wildcard: %d %s, want 400", status, body)
	}
	st, _ = sb.GetNetwork(ctx)
	if len(st.DenyCIDRs) != 1 {
		t.Errorf("a rejected policy changed the one in force: %+v", st.NetworkPolicy)
	}
	// The policy outlives hibernation: the woken VM's new namespace has it.
	if err := sb.Hibernate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	if out, code := curlOut(t, sb, other); code != 7 {
		t.Errorf("deny_cidrs after a wake: exit %d (%s), want 7", code, out)
	}
	if out, code := curlOut(t, sb, allowed); code != 0 {
		t.Errorf("after a wake: %s: exit %d: %s", allowed, code, out)
	}
	// A fork has its parent's policy (set before the child resumes).
	kid, err := sb.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kid.Kill(context.Background()) })
	if out, code := curlOut(t, kid, other); code != 7 {
		t.Errorf("deny_cidrs in a fork: exit %d (%s), want 7", code, out)
	}
	if st, err := kid.GetNetwork(ctx); err != nil || len(st.DenyCIDRs) != 1 {
		t.Errorf("a fork's policy: %+v (%v), want its parent's", st.NetworkPolicy, err)
	}
}

// logHas reports whether one line of the server's log has every part.
func logHas(s *serverProc, parts ...string) bool {
	b, _ := os.ReadFile(s.log)
	for _, l := range strings.Split(string(b), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// sandboxNetns is the name of a sandbox's namespace, from the server's
// state (DATA/net/ns/ID.json).
func sandboxNetns(t *testing.T, dataDir, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "net", "ns", id+".json"))
	if err != nil {
		t.Fatalf("network state of %s: %v", id, err)
	}
	var st struct {
		NS string `json:"netns"`
	}
	if err := json.Unmarshal(b, &st); err != nil || !strings.HasPrefix(st.NS, network.Prefix(dataDir)+"-") {
		t.Fatalf("network state of %s: %s (%v)", id, b, err)
	}
	return st.NS
}

func netnsExists(ns string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", ns))
	return err == nil
}

// ownNetObjects counts the namespaces, host links and nftables tables of
// the server with dataDir.
func ownNetObjects(t *testing.T, dataDir string) (nss, links, tables int) {
	t.Helper()
	nss, links, tables, err := countNetObjects(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	return nss, links, tables
}

// countNetObjects counts the namespaces, host links and nftables tables of
// the server with dataDir.
func countNetObjects(dataDir string) (nss, links, tables int, err error) {
	prefix := network.Prefix(dataDir)
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			nss++
		}
	}
	out, err := exec.Command("ip", "-br", "link").Output()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("ip link: %w", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, prefix+"h") {
			links++
		}
	}
	out, err = exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("nft list tables: %w", err)
	}
	tables = strings.Count(string(out), "pandastack_"+prefix)
	return nss, links, tables, nil
}

// removeNetObjects deletes what countNetObjects counts: the namespaces,
// host links and nftables table of the server on dataDir, once it has
// stopped. A run that failed (a server killed, a VM left) must not leave
// them on the host.
func removeNetObjects(dataDir string) {
	prefix := network.Prefix(dataDir)
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			_ = exec.Command("ip", "netns", "delete", e.Name()).Run()
		}
	}
	if out, err := exec.Command("ip", "-br", "link").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if name, _, _ := strings.Cut(l, " "); strings.HasPrefix(name, prefix+"h") {
				name, _, _ = strings.Cut(name, "@")
				_ = exec.Command("ip", "link", "delete", name).Run()
			}
		}
	}
	_ = exec.Command("nft", "delete", "table", "ip", "pandastack_"+prefix).Run()
}

// settledNamespaces counts the server's namespaces once the count has held
// still for two seconds, every namespace with its link (a pool refill or
// a spare being made is not half counted).
func settledNamespaces(t *testing.T, dir string) int {
	t.Helper()
	last, n := -1, 0
	eventually(t, time.Minute, "the server's namespaces to settle", func() bool {
		nss, links, _ := ownNetObjects(t, dir)
		if nss != links || nss != last {
			last, n = nss, 0
			time.Sleep(500 * time.Millisecond)
			return false
		}
		n++
		time.Sleep(500 * time.Millisecond)
		return n >= 4
	})
	return last
}

func TestNetworkCleanup(t *testing.T) {
	srv, dir := newTestServer(t, "ps-e2e-net-", "--pool", "1", "--dns-upstream", outside.dns)
	defer func() { srv.stop() }() // the last one started on dir
	c := srv.client(srv.admin)
	ctx := context.Background()
	// Kill: every sandbox's namespace and link go with it.
	var nss []string
	for i := 0; i < 2; i++ {
		sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 600})
		if err != nil {
			t.Fatal(err)
		}
		nss = append(nss, sandboxNetns(t, dir, sb.ID))
		if err := sb.Kill(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range nss {
		if netnsExists(ns) {
			t.Errorf("namespace %s of a killed sandbox is still there", ns)
		}
	}
	// Every namespace left (pooled VMs', spares) has its link, and the
	// server its one table.
	if nss, links, tables := ownNetObjects(t, dir); nss != links || tables != 1 {
		t.Errorf("after kills: %d namespaces, %d host links, %d tables", nss, links, tables)
	}
	// A failed create leaves nothing either. The pool refills in the
	// background after the kills: count once it has settled, and give
	// the server time to settle again after the failed create (a leaked
	// namespace never goes away, so this still catches one).
	before := settledNamespaces(t, dir)
	if _, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, Network: &sdk.NetworkPolicy{AllowDomains: []string{"a.*.com"}}}); err == nil {
		t.Fatal("create with an ambiguous wildcard succeeded")
	}
	if after := settledNamespaces(t, dir); after > before {
		t.Errorf("a failed create left namespaces: %d before, %d after", before, after)
	}
	// A crash: the sandbox's VM dies while no server runs; the next start
	// removes its namespace.
	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	ns := sandboxNetns(t, dir, sb.ID)
	srv.crash()
	if pid := vmPID(dir, sb.ID); qemuRunning(pid) {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	if !netnsExists(ns) {
		t.Fatal("the namespace was gone right after the crash: nothing for the restart to clean up")
	}
	if srv, err = startServer(dir, "--pool", "0", "--kill-on-exit", "--dns-upstream", outside.dns); err != nil {
		t.Fatal(err)
	}
	if netnsExists(ns) {
		t.Errorf("the namespace of %s (its VM died with the server down) survived the restart", sb.ID)
	}
	// A server ending its sandboxes leaves nothing at all.
	srv.stop()
	eventually(t, 30*time.Second, "every namespace, link and table of the server to go", func() bool {
		nss, links, tables := ownNetObjects(t, dir)
		return nss+links+tables == 0
	})
}

func TestPortAccess(t *testing.T) {
	ctx := context.Background()
	c := main.client(main.admin)
	sb := newSandbox(t, c, sdk.CreateSandboxParams{Network: &sdk.NetworkPolicy{PublicPorts: []int{8000}}})
	if _, err := sb.Files().Write(ctx, "/root/srv.py", []byte(echoServer)); err != nil {
		t.Fatal(err)
	}
	for _, port := range []string{"8000", "8001"} {
		if _, err := sb.StartBackground(ctx, "python3 /root/srv.py "+port, sdk.ExecOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := sb.PortHost(8000); got != "8000-"+sb.ID+".localhost" {
		t.Errorf("PortHost(8000) = %q", got)
	}
	get := func(host, pathQuery string, hdr ...string) (int, string) {
		req, _ := http.NewRequest("GET", main.url+pathQuery, nil)
		req.Host = host
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	eventually(t, 30*time.Second, "the public port to answer without a key", func() bool {
		code, _ := get(sb.PortHost(8000), "/x")
		return code == 200
	})
	private := sb.PortHost(8001)
	eventually(t, 30*time.Second, "the private port to answer with a key", func() bool {
		code, _ := get(private, "/", "Authorization", "Bearer "+main.admin)
		return code == 200
	})
	if code, body := get(private, "/"); code != 401 {
		t.Errorf("private port without a key: %d %s", code, body)
	}
	u, err := sb.SignPortURL(ctx, 8001, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if u.Host != private || !strings.Contains(u.URL, "ps_token=") {
		t.Fatalf("signed URL %+v", u)
	}
	code, body := get(private, "/page?a=1&ps_token="+u.Token)
	if code != 200 || body != "GET /page?a=1 cookie=" {
		t.Errorf("signed URL: %d %q, want 200 with the token stripped", code, body)
	}
	if code, body := get(private, "/next", "Cookie", "ps_token="+u.Token+"; theme=dark"); code != 200 || body != "GET /next cookie=theme=dark" {
		t.Errorf("token cookie: %d %q, want 200 with only the app's cookie forwarded", code, body)
	}
	for name, tok := range map[string]string{"tampered": u.Token + "x", "other port": mustSign(t, sb, 8000)} {
		if code, body := get(private, "/?ps_token="+tok); code != 401 {
			t.Errorf("%s token: %d %s, want 401", name, code, body)
		}
	}
	// Ports: bad numbers are 400, nobody listening is a fast 502.
	if code, body := get("70000-"+sb.ID+".localhost", "/", "Authorization", "Bearer "+main.admin); code != 400 {
		t.Errorf("port 70000: %d %s", code, body)
	}
	if code, body := get(sb.PortHost(9), "/", "Authorization", "Bearer "+main.admin); code != 502 || !strings.Contains(body, "connection_refused") {
		t.Errorf("closed port: %d %s", code, body)
	}
	// Public ports can be turned off while the sandbox runs.
	if _, err := sb.SetNetwork(ctx, sdk.NetworkPolicy{}); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(sb.PortHost(8000), "/"); code != 401 {
		t.Errorf("port 8000 after public_ports was emptied: %d, want 401", code)
	}
}

func mustSign(t *testing.T, sb *sdk.Sandbox, port int) string {
	u, err := sb.SignPortURL(context.Background(), port, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return u.Token
}

// echoServer answers with the request line and the cookies it received.
const echoServer = `import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("GET %s cookie=%s" % (self.path, self.headers.get("Cookie", ""))).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`
