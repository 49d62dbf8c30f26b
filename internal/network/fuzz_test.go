package network

import (
	"encoding/json"
	"log/slog"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/pandastack/pandastack"
)

// nftSafe is every character egress rules may hold: keywords, IPv4 CIDRs,
// set braces. Anything else in a rule built from a tenant's policy would be
// nft syntax the tenant wrote.
var nftSafe = regexp.MustCompile(`^[a-z0-9_ .,/{}@\n-]*$`)

// FuzzEgressRules turns arbitrary PUT /v1/sandboxes/{id}/network bodies
// into nftables rules: a policy that normalizes yields rules made only of
// keywords and the normalized CIDRs, whatever the tenant wrote.
func FuzzEgressRules(f *testing.F) {
	for _, s := range []string{
		`{"egress":"deny","allow_cidrs":["1.1.1.1/32"],"allow_domains":["example.com","*.example.org"],"public_ports":[8080]}`,
		`{"egress":"allow","deny_cidrs":["10.0.0.0/8","169.254.169.254"]}`,
		`{"allow_cidrs":["0.0.0.0/0","10.5.0.0/16"]}`,
		`{"allow_cidrs":["1.2.3.4/32 } accept; add rule"]}`,
		`{"allow_cidrs":["::1"]}`,
	} {
		f.Add([]byte(s))
	}
	g, err := parseEgressDeny("link-local,private,shared,203.0.113.0/24", func() ([]netip.Prefix, error) { return nil, nil })
	if err != nil {
		f.Fatal(err)
	}
	gd := guard{deny: g}
	f.Fuzz(func(t *testing.T, body []byte) {
		var p pandastack.NetworkPolicy
		if json.Unmarshal(body, &p) != nil {
			return
		}
		n, err := p.Normalize()
		if err != nil {
			return
		}
		if r := egressRules(gd, n); !nftSafe.MatchString(r) {
			t.Fatalf("rules from policy %s hold characters outside keywords and CIDRs:\n%s", body, r)
		}
	})
}

// fuzzForwarder is a DNS forwarder for one sandbox (transit address
// 10.223.0.2, policy p) with no upstream resolver: allowed names get
// SERVFAIL, others REFUSED, and nothing leaves the machine.
func fuzzForwarder(p pandastack.NetworkPolicy) (*forwarder, netip.Addr) {
	src := netip.MustParseAddr("10.223.0.2")
	m := &Manager{log: slog.New(slog.DiscardHandler), bySrc: map[netip.Addr]*sandboxNet{
		src: {ID: "sbx_fuzz", NS: "none", rules: p},
	}}
	return &forwarder{m: m}, src
}

// FuzzDNSQuery answers arbitrary queries from a sandbox whose policy allows
// example.com only: an answer is a well-formed response to the query (same
// id, response bit, the question echoed), REFUSED for a name the policy
// does not allow; a message without a header gets no answer at all.
func FuzzDNSQuery(f *testing.F) {
	for _, name := range []string{"example.com.", "evil.example.", "a.example.com.", "metadata.google.internal."} {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 0x1234, RecursionDesired: true})
		_ = b.StartQuestions()
		_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		q, _ := b.Finish()
		f.Add(q, false)
		f.Add(q, true)
	}
	f.Add([]byte{0x12}, false)
	pol, err := pandastack.NetworkPolicy{AllowDomains: []string{"example.com"}}.Normalize()
	if err != nil {
		f.Fatal(err)
	}
	fw, src := fuzzForwarder(pol)
	f.Fuzz(func(t *testing.T, q []byte, known bool) {
		from := src
		if !known {
			from = netip.MustParseAddr("10.223.0.6") // no sandbox there
		}
		resp := fw.answer(from, q, "udp")
		var qp dnsmessage.Parser
		qh, err := qp.Start(q)
		if err != nil {
			if resp != nil {
				t.Fatalf("answered a message without a header: %x", resp)
			}
			return
		}
		question, qerr := qp.Question()
		if resp == nil {
			if qerr == nil {
				t.Fatalf("no answer to a well-formed question %v", question)
			}
			return // the reply could not be built (a malformed name)
		}
		var rp dnsmessage.Parser
		rh, err := rp.Start(resp)
		if err != nil {
			t.Fatalf("answer does not parse: %v", err)
		}
		if rh.ID != qh.ID || !rh.Response {
			t.Fatalf("answer header %+v to query %+v", rh, qh)
		}
		if qerr != nil || !known {
			if rh.RCode != dnsmessage.RCodeRefused {
				t.Fatalf("rcode %v for an unparsable question or unknown sandbox", rh.RCode)
			}
			return
		}
		rq, err := rp.Question()
		if err != nil || rq != question {
			t.Fatalf("answer's question %v (%v), asked %v", rq, err, question)
		}
		allowed := pol.AllowsDomain(question.Name.String())
		if !allowed && rh.RCode != dnsmessage.RCodeRefused {
			t.Fatalf("%s is not allowed but got rcode %v", question.Name, rh.RCode)
		}
		if allowed && rh.RCode != dnsmessage.RCodeServerFailure {
			t.Fatalf("%s is allowed (no upstream) but got rcode %v", question.Name, rh.RCode)
		}
	})
}

// FuzzDNSAnswers reads arbitrary upstream answers into the nft script that
// allows their addresses: only IPv4 addresses with a timeout of at least a
// minute reach nft, nothing else from the answer.
func FuzzDNSAnswers(f *testing.F) {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 1, Response: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("example.com."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	_ = b.StartAnswers()
	_ = b.AResource(dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName("example.com."), Class: dnsmessage.ClassINET, TTL: 5}, dnsmessage.AResource{A: [4]byte{93, 184, 216, 34}})
	_ = b.CNAMEResource(dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName("example.com."), Class: dnsmessage.ClassINET, TTL: 300}, dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName("x.example.net.")})
	resp, _ := b.Finish()
	f.Add(resp)
	f.Add([]byte{})
	elem := regexp.MustCompile(`^[0-9]{1,3}(\.[0-9]{1,3}){3} timeout ([0-9]+)s$`)
	f.Fuzz(func(t *testing.T, resp []byte) {
		cmd, err := allowAnswersCmd(resp)
		if err != nil || cmd == "" {
			return
		}
		if !nftSafe.MatchString(cmd) {
			t.Fatalf("nft script holds unexpected characters:\n%s", cmd)
		}
		lines := strings.Split(strings.TrimSuffix(cmd, "\n"), "\n")
		last := lines[len(lines)-1]
		set, ok := strings.CutPrefix(last, "add element ip "+nsTable+" dns_allowed { ")
		if !ok {
			t.Fatalf("last line %q", last)
		}
		for _, e := range strings.Split(strings.TrimSuffix(set, " }"), ", ") {
			m := elem.FindStringSubmatch(e)
			if m == nil {
				t.Fatalf("element %q", e)
			}
			if len(m[2]) < 2 || (len(m[2]) == 2 && m[2] < "60") {
				t.Fatalf("element %q allowed for less than a minute", e)
			}
		}
	})
}
