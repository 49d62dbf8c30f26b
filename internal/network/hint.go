package network

import (
	"context"

	"github.com/pandastack/pandastack"
)

type policyKey struct{}

// WithPolicy asks that a VM started with ctx get p from its first packet,
// before anyone could set it by the VM's id: for forks and restores of
// running sandboxes, whose processes run as soon as the VM resumes.
func WithPolicy(ctx context.Context, p pandastack.NetworkPolicy) context.Context {
	return context.WithValue(ctx, policyKey{}, p)
}

// startPolicy is the policy a VM starting with ctx gets: the sandbox's
// stored one, else the one asked for with WithPolicy, else allow all.
func (m *Manager) startPolicy(ctx context.Context, id string) pandastack.NetworkPolicy {
	m.mu.Lock()
	p, ok := m.policies[id]
	m.mu.Unlock()
	if ok {
		return p
	}
	if hp, ok := ctx.Value(policyKey{}).(pandastack.NetworkPolicy); ok {
		if n, err := hp.Normalize(); err == nil {
			return n
		}
	}
	return pandastack.NetworkPolicy{Egress: pandastack.EgressAllow}
}

// Apply gives an attached VM that is about to resume (a pooled one, whose
// network was made before anyone knew its sandbox) the policy it must start
// with: its stored one, else the one asked for with WithPolicy. With
// neither, it keeps the allow-all it was made with, at no cost.
func (m *Manager) Apply(ctx context.Context, id string) error {
	m.mu.Lock()
	n := m.nets[id]
	_, stored := m.policies[id]
	m.mu.Unlock()
	_, hinted := ctx.Value(policyKey{}).(pandastack.NetworkPolicy)
	if n == nil || (!stored && !hinted) {
		return nil
	}
	return m.apply(ctx, n, m.startPolicy(ctx, id))
}
