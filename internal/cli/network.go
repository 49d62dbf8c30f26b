package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// listFlag is a repeatable flag that also splits on commas.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// networkFlags are `sandbox create`'s policy flags.
type networkFlags struct {
	egress                           *string
	allowDomains, allowCIDRs, denies listFlag
	public                           listFlag
}

func (p *parser) networkFlags() *networkFlags {
	n := &networkFlags{egress: p.fs.String("egress", "", `"allow" or "deny" outbound connections by default (default allow; deny with --allow-domain)`)}
	p.fs.Var(&n.allowDomains, "allow-domain", "allow `DOMAIN` (example.com, or *.example.com for names below it; repeatable)")
	p.fs.Var(&n.allowCIDRs, "allow-cidr", "allow `CIDR` (repeatable)")
	p.fs.Var(&n.denies, "deny-cidr", "deny `CIDR` (repeatable)")
	p.fs.Var(&n.public, "public-port", "serve `PORT` through the proxy without a key (repeatable)")
	return n
}

// policy is nil when no flag was given (the server's default).
func (n *networkFlags) policy() (*sdk.NetworkPolicy, error) {
	if *n.egress == "" && len(n.allowDomains)+len(n.allowCIDRs)+len(n.denies)+len(n.public) == 0 {
		return nil, nil
	}
	p := &sdk.NetworkPolicy{Egress: *n.egress, AllowDomains: n.allowDomains, AllowCIDRs: n.allowCIDRs, DenyCIDRs: n.denies}
	for _, s := range n.public {
		port, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("--public-port must be a number, got %q", s)
		}
		p.PublicPorts = append(p.PublicPorts, port)
	}
	return p, nil
}

func runSandboxNetwork(ctx context.Context, s *streams, args []string) int {
	p := newParser("sandbox network", "ID", "Show a sandbox's network policy, or replace it with --set.").withClient(ctx)
	set := p.fs.String("set", "", `new policy as JSON, e.g. '{"egress":"deny","allow_domains":["*.example.com"]}'`)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	sb := p.client.client().Sandbox(pos[0])
	var st sdk.NetworkStatus
	var err error
	if *set != "" {
		var pol sdk.NetworkPolicy
		dec := json.NewDecoder(strings.NewReader(*set))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&pol); err != nil {
			return p.usageError(s, fmt.Sprintf("--set is not a policy: %v", err))
		}
		st, err = sb.SetNetwork(ctx, pol)
	} else {
		st, err = sb.GetNetwork(ctx)
	}
	if err != nil {
		return fail(s, err)
	}
	printJSON(s.out, st)
	return 0
}

func runSandboxURL(ctx context.Context, s *streams, args []string) int {
	p := newParser("sandbox url", "ID PORT", "Print a signed URL that reaches PORT of the sandbox without an API key.").withClient(ctx)
	expires := p.fs.Int("expires", 3600, "seconds the URL stays valid")
	pos, code, ok := p.parse(s, args, 2)
	if !ok {
		return code
	}
	port, err := strconv.Atoi(pos[1])
	if err != nil {
		return p.usageError(s, fmt.Sprintf("PORT must be a number, got %q", pos[1]))
	}
	u, err := p.client.client().Sandbox(pos[0]).SignPortURL(ctx, port, time.Duration(*expires)*time.Second)
	if err != nil {
		return fail(s, err)
	}
	fmt.Fprintln(s.out, u.URL)
	return 0
}
