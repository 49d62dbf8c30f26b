package e2e

import (
	"bufio"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// hostResolver is the first nameserver of the host's /etc/resolv.conf
// (host:53), or "" when there is none.
func hostResolver() string {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 2 && fs[0] == "nameserver" {
			return net.JoinHostPort(fs[1], "53")
		}
	}
	return ""
}

// askHost sends a DNS query to the host's resolver and returns its answer:
// the outside world's DNS knows only its own names and asks the host for
// the rest, so catalog builds on the suite's server reach the npm registry
// (their steps run in build VMs, whose DNS is the server's forwarder).
func askHost(query []byte) ([]byte, bool) {
	addr := hostResolver()
	if addr == "" {
		return nil, false
	}
	c, err := net.DialTimeout("udp", addr, 2*time.Second)
	if err != nil {
		return nil, false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write(query); err != nil {
		return nil, false
	}
	buf := make([]byte, 1500)
	n, err := c.Read(buf)
	if err != nil {
		return nil, false
	}
	return buf[:n], true
}

// nameError is an NXDOMAIN answer to question q of the query with header h.
func nameError(h dnsmessage.Header, q dnsmessage.Question) ([]byte, error) {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true,
		RecursionDesired: h.RecursionDesired, RCode: dnsmessage.RCodeNameError})
	_ = b.StartQuestions()
	_ = b.Question(q)
	return b.Finish()
}
