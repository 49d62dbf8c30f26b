package network

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/pandastack/pandastack"
)

// forwarder answers the DNS queries of every sandbox of this server (UDP
// and TCP, one port). It tells sandboxes apart by their transit address.
type forwarder struct {
	m    *Manager
	port int
	udp  *net.UDPConn
	tcp  *net.TCPListener
}

// startForwarder listens on the port recorded in portFile (so namespaces
// that outlived a restart keep working), or a new one.
func startForwarder(m *Manager, portFile string) (*forwarder, error) {
	f := &forwarder{m: m}
	var want int
	if b, err := os.ReadFile(portFile); err == nil {
		want, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	listen := func(port int) error {
		u, err := net.ListenUDP("udp4", &net.UDPAddr{Port: port})
		if err != nil {
			return err
		}
		t, err := net.ListenTCP("tcp4", &net.TCPAddr{Port: u.LocalAddr().(*net.UDPAddr).Port})
		if err != nil {
			u.Close()
			return err
		}
		f.udp, f.tcp, f.port = u, t, u.LocalAddr().(*net.UDPAddr).Port
		return nil
	}
	err := errors.New("no port")
	if want > 0 {
		err = listen(want)
	}
	for i := 0; err != nil && i < 5; i++ {
		err = listen(0)
	}
	if err != nil {
		return nil, fmt.Errorf("network: dns forwarder: %w", err)
	}
	_ = os.WriteFile(portFile, []byte(strconv.Itoa(f.port)), 0o600)
	go f.serveUDP()
	go f.serveTCP()
	return f, nil
}

func (f *forwarder) close() {
	f.udp.Close()
	f.tcp.Close()
}

func (f *forwarder) serveUDP() {
	buf := make([]byte, 1500)
	for {
		n, from, err := f.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		q := append([]byte(nil), buf[:n]...)
		go func() {
			if resp := f.answer(from.Addr(), q, "udp"); resp != nil {
				_, _ = f.udp.WriteToUDPAddrPort(resp, from)
			}
		}()
	}
}

func (f *forwarder) serveTCP() {
	for {
		c, err := f.tcp.AcceptTCP()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			from, _ := netip.ParseAddrPort(c.RemoteAddr().String())
			for {
				var l [2]byte
				if _, err := io.ReadFull(c, l[:]); err != nil {
					return
				}
				q := make([]byte, binary.BigEndian.Uint16(l[:]))
				if _, err := io.ReadFull(c, q); err != nil {
					return
				}
				resp := f.answer(from.Addr().Unmap(), q, "tcp")
				if resp == nil {
					return
				}
				out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
				if _, err := c.Write(append(out, resp...)); err != nil {
					return
				}
			}
		}()
	}
}

// answer decides one query from the sandbox at src: refused when the
// policy does not allow the name, else forwarded, and with a domain
// allowlist the answer's addresses are allowed in the sandbox's namespace
// (for their TTL) before the guest sees them.
func (f *forwarder) answer(src netip.Addr, q []byte, proto string) []byte {
	f.m.mu.Lock()
	n := f.m.bySrc[src]
	f.m.mu.Unlock()
	var p dnsmessage.Parser
	hdr, err := p.Start(q)
	if err != nil {
		return nil
	}
	question, err := p.Question()
	if err != nil || n == nil {
		return reply(hdr, question, dnsmessage.RCodeRefused)
	}
	n.mu.Lock()
	pol := n.rules
	n.mu.Unlock()
	name := question.Name.String()
	if pol.Egress == pandastack.EgressDeny && !pol.AllowsDomain(name) {
		f.m.log.Info("dns query refused by network policy", "sandbox", n.ID, "name", strings.TrimSuffix(name, "."))
		return reply(hdr, question, dnsmessage.RCodeRefused)
	}
	resp, err := f.upstream(q, proto)
	if err != nil {
		f.m.log.Warn("dns upstream failed", "sandbox", n.ID, "name", name, "err", err)
		return reply(hdr, question, dnsmessage.RCodeServerFailure)
	}
	if len(pol.AllowDomains) > 0 {
		if err := f.allowAnswers(n, resp); err != nil {
			f.m.log.Warn("dns: could not allow answers", "sandbox", n.ID, "name", name, "err", err)
			return reply(hdr, question, dnsmessage.RCodeServerFailure)
		}
	}
	return resp
}

// upstream asks the configured resolvers in turn.
func (f *forwarder) upstream(q []byte, proto string) ([]byte, error) {
	var errs []error
	for _, u := range f.m.cfg.Upstreams {
		resp, err := exchange(u, q, proto)
		if err == nil {
			return resp, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, errors.New("no upstream DNS server configured")
	}
	return nil, errors.Join(errs...)
}

func exchange(server string, q []byte, proto string) ([]byte, error) {
	c, err := net.DialTimeout(proto, server, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if proto == "udp" {
		if _, err := c.Write(q); err != nil {
			return nil, err
		}
		buf := make([]byte, 65535)
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
	if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
		return nil, err
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, err
	}
	resp := make([]byte, binary.BigEndian.Uint16(l[:]))
	_, err = io.ReadFull(c, resp)
	return resp, err
}

// allowAnswers adds the A records of resp to the namespace's allowed set,
// each for its TTL (at least a minute: clients cache longer than asked).
func (f *forwarder) allowAnswers(n *sandboxNet, resp []byte) error {
	cmd, err := allowAnswersCmd(resp)
	if err != nil || cmd == "" {
		return err
	}
	return inNetns(n.NS, func() error { return run(context.Background(), cmd, "nft", "-f", "-") })
}

// allowAnswersCmd is the nft script that allows resp's A records: ""
// when it has none.
func allowAnswersCmd(resp []byte) (string, error) {
	var p dnsmessage.Parser
	if _, err := p.Start(resp); err != nil {
		return "", err
	}
	if err := p.SkipAllQuestions(); err != nil {
		return "", err
	}
	var elems []string
	for {
		h, err := p.AnswerHeader()
		if err != nil {
			break
		}
		if h.Type != dnsmessage.TypeA {
			if err := p.SkipAnswer(); err != nil {
				break // a malformed record: the parser cannot move past it
			}
			continue
		}
		a, err := p.AResource()
		if err != nil {
			break
		}
		ttl := max(h.TTL, 60)
		elems = append(elems, fmt.Sprintf("%s timeout %ds", netip.AddrFrom4(a.A), ttl))
	}
	if len(elems) == 0 {
		return "", nil
	}
	// Re-adding an element refreshes nothing in nft; delete it first.
	var cmd strings.Builder
	for _, e := range elems {
		addr := strings.Fields(e)[0]
		fmt.Fprintf(&cmd, "add element ip %s dns_allowed { %s }\ndelete element ip %s dns_allowed { %s }\n", nsTable, addr, nsTable, addr)
	}
	fmt.Fprintf(&cmd, "add element ip %s dns_allowed { %s }\n", nsTable, strings.Join(elems, ", "))
	return cmd.String(), nil
}

// reply is an empty answer to q with rcode.
func reply(h dnsmessage.Header, q dnsmessage.Question, rcode dnsmessage.RCode) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode,
		RecursionDesired: h.RecursionDesired, RecursionAvailable: true, RCode: rcode})
	if q.Name.Length > 0 {
		_ = b.StartQuestions()
		_ = b.Question(q)
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
