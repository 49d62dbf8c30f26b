// Package network gives every sandbox a network of its own on the host.
//
// Each VM gets a network namespace of its own (made ahead: the QEMU pool's
// VMs get theirs when they are prepared, and a few spares wait for the
// others; DATA/net/ns/ID.json records which is whose). Inside it, a tap
// device (tap0, fixed MAC, 172.16.0.1/30) is the guest's gateway; the guest is always 172.16.0.2 with a fixed MAC, so clones
// restored from one snapshot keep their address and ARP cache and still never
// meet: each has its own namespace (and its own, fresh, conntrack table). A
// veth pair links the namespace to the host with a unique transit /30 from a
// pool (10.223.0.0/16 by default); the guest's traffic is masqueraded to the
// namespace's transit address, then again on the host as it leaves.
//
// The server (root) opens the tap inside the namespace and hands the
// descriptor to the unprivileged, seccomp-confined QEMU, which never enters
// the namespace. DNS to the gateway is redirected to a forwarder this package
// runs on the host, which knows the sandbox by its transit address, applies
// the domain allowlist and teaches the namespace's nftables set the answers.
// Egress policy is an nftables chain in the namespace, replaced atomically.
// Sandboxes cannot reach the host's own services (only the forwarder) nor
// each other.
//
// Every host object is named with a prefix derived from the data directory
// (namespaces "<prefix>-n<slot>-<nonce>", host links "<prefix>h<slot>", nftables
// table "pandastack_<prefix>"), so several servers on one machine never touch
// each other's; Reconcile removes what a crashed run left.
package network

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
)

// DefaultPool is where transit /30s come from.
var DefaultPool = netip.MustParsePrefix("10.223.0.0/16")

// Config configures a Manager.
type Config struct {
	// DataDir is the server's data directory: state goes to DataDir/net and
	// the naming prefix is derived from its path.
	DataDir string
	Pool    netip.Prefix
	// Upstreams are the DNS servers (host:port) the forwarder asks; the
	// host's /etc/resolv.conf by default.
	Upstreams []string
	// Spares is how many namespaces are kept made ahead (default 4), so
	// VMs started outside the driver's pool (bursts, forks, wakes) do not
	// wait for one.
	Spares int
	// EgressDefaultDeny is what every sandbox's egress is denied unless its
	// policy's allow_cidrs names it (an entry inside the range): comma-
	// separated IPv4 CIDRs and the words link-local (169.254.0.0/16),
	// private (RFC 1918), shared (100.64.0.0/10) and host (every network
	// the host has an address on, read at start); "none" denies nothing.
	// Empty means DefaultEgressDeny.
	EgressDefaultDeny string
	// Services are the server's own services, besides the DNS forwarder,
	// that every sandbox reaches whatever its policy (see Service).
	Services []Service
	Logger   *slog.Logger
}

// Manager owns the sandbox namespaces of one server.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	prefix string
	dir    string
	dns    *forwarder
	guard  guard // set once in New

	mu       sync.Mutex
	nets     map[string]*sandboxNet              // by VM id
	bySrc    map[netip.Addr]*sandboxNet          // by transit address (DNS)
	policies map[string]pandastack.NetworkPolicy // by sandbox id, persisted

	spares  []*sandboxNet // made ahead, for VMs started off the pool
	filling bool
	closed  bool
	fills   sync.WaitGroup
	stop    context.CancelFunc // ends the denial logger
}

// sandboxNet is one VM's namespace.
type sandboxNet struct {
	ID     string     `json:"id"`
	NS     string     `json:"netns"`
	Slot   int        `json:"slot"`
	hostIP netip.Addr // transit address on the host side
	nsIP   netip.Addr // transit address in the namespace
	mu     sync.Mutex // serialises rule changes
	rules  pandastack.NetworkPolicy

	connMu sync.Mutex            // guards conns and ended (dial.go)
	conns  map[*nicConn]struct{} // open connections DialGuest made
	ended  bool                  // torn down: no new connection
}

var _ vmm.Network = (*Manager)(nil)

// Prefix is the naming prefix of the server with this data directory.
func Prefix(dataDir string) string {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	h := sha256.Sum256([]byte(abs))
	return "ps" + hex.EncodeToString(h[:])[:5]
}

// New sets up the host side (forwarding, this server's nftables table, the
// DNS forwarder). Call Reconcile once the live VMs are known.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if !cfg.Pool.IsValid() {
		cfg.Pool = DefaultPool
	}
	if !cfg.Pool.Addr().Is4() || cfg.Pool.Bits() > 28 {
		return nil, fmt.Errorf("network pool %s: need an IPv4 prefix of /28 or larger", cfg.Pool)
	}
	cfg.Pool = cfg.Pool.Masked()
	if len(cfg.Upstreams) == 0 {
		cfg.Upstreams = hostResolvers()
	}
	if cfg.Spares == 0 {
		cfg.Spares = 4
	}
	m := &Manager{cfg: cfg, log: cfg.Logger.With("component", "network"), prefix: Prefix(cfg.DataDir),
		dir: filepath.Join(cfg.DataDir, "net"), nets: map[string]*sandboxNet{}, bySrc: map[netip.Addr]*sandboxNet{},
		policies: map[string]pandastack.NetworkPolicy{}}
	for _, d := range []string{filepath.Join(m.dir, "ns"), filepath.Join(m.dir, "policy"), netnsDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("network: %w", err)
		}
	}
	if err := m.loadPolicies(); err != nil {
		return nil, err
	}
	if err := writeSysctl("net/ipv4/ip_forward", "1"); err != nil {
		return nil, fmt.Errorf("network: enable forwarding: %w", err)
	}
	if cfg.EgressDefaultDeny == "" {
		cfg.EgressDefaultDeny = DefaultEgressDeny
	}
	deny, err := parseEgressDeny(cfg.EgressDefaultDeny, hostNetworks)
	if err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	if m.dns, err = startForwarder(m, filepath.Join(m.dir, "dns-port")); err != nil {
		return nil, err
	}
	m.guard = guard{deny: deny, services: append([]Service{{Name: "dns", Port: 53, HostPort: m.dns.port, UDP: true}}, cfg.Services...)}
	if err := run(ctx, hostRules(m.hostTable(), m.prefix+"h*", cfg.Pool, m.guard.services), "nft", "-f", "-"); err != nil {
		m.dns.close()
		return nil, fmt.Errorf("network: host rules: %w", err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	go m.logDenials(lctx)
	m.log.Info("sandbox networking ready", "prefix", m.prefix, "pool", cfg.Pool, "dns_port", m.dns.port, "upstreams", cfg.Upstreams,
		"egress_default_deny", m.guard.denySet())
	return m, nil
}

func (m *Manager) hostTable() string       { return "pandastack_" + m.prefix }
func (m *Manager) nsName(id string) string { return m.prefix + "-" + id }
func (m *Manager) hostLink(slot int) string {
	return m.prefix + "h" + strconv.Itoa(slot)
}

// slotAddrs returns the transit addresses of a slot: host side, namespace side.
func (m *Manager) slotAddrs(slot int) (netip.Addr, netip.Addr) {
	b := m.cfg.Pool.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(slot) * 4
	at := func(x uint32) netip.Addr {
		return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
	}
	return at(v + 1), at(v + 2)
}

func (m *Manager) slots() int { return 1 << (32 - m.cfg.Pool.Bits()) / 4 }

// Attach gives VM id a namespace — a spare one when ready, else a new one —
// with the default rules (allow all) and returns the tap's descriptor (the
// caller passes it to the VMM and closes its own copy). A VM's own policy
// is applied with Apply before the VM first runs.
func (m *Manager) Attach(ctx context.Context, id string) (*os.File, error) {
	t0 := time.Now()
	_ = m.Release(ctx, id) // a namespace left by an earlier process under this id
	n, spare := m.takeSpare(), true
	if n == nil {
		spare = false
		var err error
		if n, err = m.makeNS(ctx); err != nil {
			return nil, fmt.Errorf("network for %s: %w", id, err)
		}
	}
	n.ID = id
	fail := func(err error) (*os.File, error) {
		_ = m.teardown(context.WithoutCancel(ctx), n)
		return nil, fmt.Errorf("network for %s: %w", id, err)
	}
	if err := m.saveNS(n); err != nil {
		return fail(err)
	}
	var tap *os.File
	err := inNetns(n.NS, func() error {
		var err error
		tap, err = openTap(tapName)
		return err
	})
	if err != nil {
		return fail(err)
	}
	n.rules = pandastack.NetworkPolicy{Egress: pandastack.EgressAllow}
	m.mu.Lock()
	m.nets[id] = n
	m.bySrc[n.nsIP] = n
	m.mu.Unlock()
	m.log.Debug("vm network attached", "vm", id, "netns", n.NS, "spare", spare, "ms", float64(time.Since(t0).Microseconds())/1000)
	return tap, nil
}

// makeNS creates a namespace with its veth, tap and the default rules
// (allow all), not yet given to a VM.
func (m *Manager) makeNS(ctx context.Context) (*sandboxNet, error) {
	unlock, err := lockSlots()
	if err != nil {
		return nil, err
	}
	slot, err := m.freeSlot()
	if err != nil {
		unlock()
		return nil, err
	}
	// Unique over time too: a slot is reused as soon as it is free.
	var nonce [3]byte
	_, _ = rand.Read(nonce[:])
	n := &sandboxNet{Slot: slot, NS: fmt.Sprintf("%s-n%d-%x", m.prefix, slot, nonce)}
	n.hostIP, n.nsIP = m.slotAddrs(slot)
	link := m.hostLink(slot)
	// The host side first, under the lock: its address claims the slot.
	host := fmt.Sprintf("netns add %s\nlink add %s type veth peer name %s netns %s\naddr add %s/30 dev %s\nlink set %s up\n",
		n.NS, link, vethNS, n.NS, n.hostIP, link, link)
	err = run(ctx, host, "ip", "-batch", "-")
	unlock()
	if err == nil {
		err = inNetns(n.NS, func() error {
			inside := fmt.Sprintf("link set lo up\naddr add %s/30 dev %s\nlink set %s up\nroute add default via %s\n"+
				"tuntap add dev %s mode tap\nlink set %s address %s\naddr add %s dev %s\nlink set %s up\n",
				n.nsIP, vethNS, vethNS, n.hostIP, tapName, tapName, gatewayMAC, gatewayNet, tapName, tapName)
			if err := run(ctx, inside, "ip", "-batch", "-"); err != nil {
				return err
			}
			if err := writeSysctl("net/ipv4/ip_forward", "1"); err != nil {
				return err
			}
			if err := run(ctx, nsRules(n, m.guard, pandastack.NetworkPolicy{Egress: pandastack.EgressAllow}), "nft", "-f", "-"); err != nil {
				return fmt.Errorf("nftables: %w", err)
			}
			return nil
		})
	}
	if err != nil {
		_ = m.teardown(context.WithoutCancel(ctx), n)
		return nil, err
	}
	n.rules = pandastack.NetworkPolicy{Egress: pandastack.EgressAllow}
	return n, nil
}

// freeSlot finds a transit /30 no host interface uses (any server's).
func (m *Manager) freeSlot() (int, error) {
	used := map[netip.Addr]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return 0, fmt.Errorf("list host addresses: %w", err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP.To4()); ok {
				used[ip] = true
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	taken := map[int]bool{}
	for _, n := range m.nets {
		taken[n.Slot] = true
	}
	for s := 0; s < m.slots(); s++ {
		if h, _ := m.slotAddrs(s); !used[h] && !taken[s] {
			return s, nil
		}
	}
	return 0, fmt.Errorf("no free transit address in %s", m.cfg.Pool)
}

// lockSlots serialises slot choice with every server on this machine.
func lockSlots() (func(), error) {
	f, err := os.OpenFile("/run/pandastack-net.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open slot lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock slots: %w", err)
	}
	return func() { f.Close() }, nil
}

// Release removes VM id's namespace, its links and its state. Releasing a
// VM without one does nothing.
func (m *Manager) Release(ctx context.Context, id string) error {
	m.mu.Lock()
	n := m.nets[id]
	delete(m.nets, id)
	if n != nil && m.bySrc[n.nsIP] == n {
		delete(m.bySrc, n.nsIP)
	}
	m.mu.Unlock()
	if n == nil {
		var err error
		if n, err = m.loadNS(id); err != nil {
			return nil // nothing recorded: nothing to remove
		}
	}
	return m.teardown(ctx, n)
}

// Rename moves VM from's network to id to (a pooled VM takes the id its
// restore names): the namespace keeps its name and its rules, the record
// follows the id. The restore then applies the VM's policy (Apply).
func (m *Manager) Rename(ctx context.Context, from, to string) error {
	m.mu.Lock()
	n := m.nets[from]
	if n == nil {
		m.mu.Unlock()
		return fmt.Errorf("rename network of %s: none attached", from)
	}
	delete(m.nets, from)
	n.ID = to
	m.nets[to] = n
	m.mu.Unlock()
	if err := m.saveNS(n); err != nil {
		return fmt.Errorf("rename network of %s: %w", from, err)
	}
	_ = os.Remove(m.nsFile(from))
	return nil
}

// Apply gives attached VM id the policy p before it resumes (see
// vmm.RestoreOptions.Network). Its rules are replaced only when they
// differ from p, so applying the policy a namespace already has costs
// nothing. It does not store p as a sandbox's policy (SetPolicy does).
func (m *Manager) Apply(ctx context.Context, id string, p pandastack.NetworkPolicy) error {
	p, err := p.Normalize()
	if err != nil {
		return err
	}
	m.mu.Lock()
	n := m.nets[id]
	m.mu.Unlock()
	if n == nil {
		return fmt.Errorf("apply network policy to %s: no network attached", id)
	}
	return m.apply(ctx, n, p)
}

func (m *Manager) teardown(ctx context.Context, n *sandboxNet) error {
	n.endConns()
	var errs []error
	errs = append(errs, deleteNetns(n.NS))
	// The namespace's end destroys the veth pair, but asynchronously: delete
	// the host side now so its address (the slot) is free at once.
	if l, err := net.InterfaceByName(m.hostLink(n.Slot)); err == nil && l != nil {
		if err := run(ctx, "", "ip", "link", "del", m.hostLink(n.Slot)); err != nil && !linkGone(err) {
			errs = append(errs, err)
		}
	}
	if n.ID != "" {
		if err := os.Remove(m.nsFile(n.ID)); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) nsFile(id string) string { return filepath.Join(m.dir, "ns", id+".json") }

func (m *Manager) saveNS(n *sandboxNet) error {
	b, _ := json.Marshal(n)
	return os.WriteFile(m.nsFile(n.ID), b, 0o600)
}

func (m *Manager) loadNS(id string) (*sandboxNet, error) {
	b, err := os.ReadFile(m.nsFile(id))
	if err != nil {
		return nil, err
	}
	var n sandboxNet
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	n.hostIP, n.nsIP = m.slotAddrs(n.Slot)
	return &n, nil
}

// Policy is sandbox id's policy (allow-all when none was set).
func (m *Manager) Policy(id string) pandastack.NetworkPolicy {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.policies[id]; ok {
		return p
	}
	return pandastack.NetworkPolicy{Egress: pandastack.EgressAllow}
}

// SetPolicy stores sandbox id's policy (normalized) and applies it to its
// running VM, if any; a hibernated sandbox gets it when it wakes.
func (m *Manager) SetPolicy(ctx context.Context, id string, p pandastack.NetworkPolicy) (pandastack.NetworkPolicy, error) {
	p, err := p.Normalize()
	if err != nil {
		return p, err
	}
	b, _ := json.Marshal(p)
	if err := os.WriteFile(filepath.Join(m.dir, "policy", id+".json"), b, 0o600); err != nil {
		return p, fmt.Errorf("save network policy: %w", err)
	}
	m.mu.Lock()
	m.policies[id] = p
	n := m.nets[id]
	m.mu.Unlock()
	if n == nil {
		return p, nil
	}
	return p, m.apply(ctx, n, p)
}

// apply replaces the egress chain of a live namespace.
func (m *Manager) apply(ctx context.Context, n *sandboxNet, p pandastack.NetworkPolicy) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if reflect.DeepEqual(n.rules.AllowCIDRs, p.AllowCIDRs) && reflect.DeepEqual(n.rules.DenyCIDRs, p.DenyCIDRs) &&
		reflect.DeepEqual(n.rules.AllowDomains, p.AllowDomains) && n.rules.Egress == p.Egress {
		n.rules = p
		return nil // ports only, or nothing, changed: no rule to touch
	}
	rules := egressRules(m.guard, p)
	if !reflect.DeepEqual(n.rules.AllowDomains, p.AllowDomains) {
		rules += fmt.Sprintf("flush set ip %s dns_allowed\n", nsTable)
	}
	err := inNetns(n.NS, func() error { return run(ctx, rules, "nft", "-f", "-") })
	if err != nil {
		return fmt.Errorf("apply network policy to %s: %w", n.ID, err)
	}
	n.rules = p
	m.log.Info("network policy applied", "sandbox", n.ID, "egress", p.Egress, "allow_cidrs", len(p.AllowCIDRs),
		"deny_cidrs", len(p.DenyCIDRs), "allow_domains", len(p.AllowDomains))
	return nil
}

// Forget drops an ended sandbox's policy.
func (m *Manager) Forget(id string) {
	m.mu.Lock()
	delete(m.policies, id)
	m.mu.Unlock()
	_ = os.Remove(filepath.Join(m.dir, "policy", id+".json"))
}

func (m *Manager) loadPolicies() error {
	ents, err := os.ReadDir(filepath.Join(m.dir, "policy"))
	if err != nil {
		return fmt.Errorf("network: read policies: %w", err)
	}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(m.dir, "policy", e.Name()))
		var p pandastack.NetworkPolicy
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err != nil {
			m.log.Warn("unreadable network policy; dropped", "sandbox", id, "err", err)
			continue
		}
		m.policies[id] = p
	}
	return nil
}

// Denied is how many connections sandbox id's policy has refused since its
// VM started.
func (m *Manager) Denied(ctx context.Context, id string) (int64, error) {
	m.mu.Lock()
	n := m.nets[id]
	m.mu.Unlock()
	if n == nil {
		return 0, nil
	}
	var out string
	err := inNetns(n.NS, func() error {
		var err error
		out, err = output(ctx, "nft", "-j", "list", "counter", "ip", nsTable, "denied")
		return err
	})
	if err != nil {
		return 0, err
	}
	var doc struct {
		Nftables []struct {
			Counter *struct {
				Packets int64 `json:"packets"`
			} `json:"counter"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return 0, fmt.Errorf("parse nft counter: %w", err)
	}
	for _, o := range doc.Nftables {
		if o.Counter != nil {
			return o.Counter.Packets, nil
		}
	}
	return 0, nil
}

// Close stops the DNS forwarder. Namespaces stay for running VMs (the next
// server's Reconcile takes them over or removes them); with none left, the
// host table goes too.
func (m *Manager) Close() error {
	m.stop()
	m.dropSpares()
	m.dns.close()
	m.mu.Lock()
	idle := len(m.nets) == 0
	m.mu.Unlock()
	if idle {
		return run(context.Background(), "", "nft", "delete", "table", "ip", m.hostTable())
	}
	return nil
}

// hostResolvers reads the nameservers of the host's /etc/resolv.conf.
func hostResolvers() []string {
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "nameserver" {
			out = append(out, net.JoinHostPort(f[1], "53"))
		}
	}
	return out
}
