package hostagent

import (
	"context"
	"fmt"

	"github.com/pandastack/pandastack"
)

// Network holds sandboxes' network policies (internal/network implements
// it; the VMM driver attaches each VM's namespace itself).
type Network interface {
	// SetPolicy validates, stores and applies a sandbox's policy.
	SetPolicy(ctx context.Context, id string, p pandastack.NetworkPolicy) (pandastack.NetworkPolicy, error)
	Policy(id string) pandastack.NetworkPolicy
	// Forget drops an ended sandbox's policy.
	Forget(id string)
	// Reconcile keeps the namespaces of running VMs and the policies of
	// known (live) sandboxes, and removes the rest.
	Reconcile(ctx context.Context, running, known []string) error
}

// applyNetwork gives a new sandbox's VM its policy; nil keeps the default
// (allow all) the VM was prepared with, at no cost.
func (a *Agent) applyNetwork(ctx context.Context, id string, p *pandastack.NetworkPolicy) error {
	if a.cfg.Network == nil || p == nil {
		return nil
	}
	if _, err := a.cfg.Network.SetPolicy(ctx, id, *p); err != nil {
		return fmt.Errorf("network policy of %s: %w", id, err)
	}
	return nil
}

// startPolicy is the policy a VM starts with: the one asked for, else the
// default (allow all).
func startPolicy(p *pandastack.NetworkPolicy) pandastack.NetworkPolicy {
	if p == nil {
		return pandastack.NetworkPolicy{}
	}
	return *p
}

// policy is sandbox id's stored policy (allow all without a network).
func (a *Agent) policy(id string) pandastack.NetworkPolicy {
	if a.cfg.Network == nil {
		return pandastack.NetworkPolicy{}
	}
	return a.cfg.Network.Policy(id)
}

// inheritNetwork gives a fork its parent's policy.
func (a *Agent) inheritNetwork(ctx context.Context, parent, child string) error {
	if a.cfg.Network == nil {
		return nil
	}
	p := a.cfg.Network.Policy(parent)
	return a.applyNetwork(ctx, child, &p)
}

func (a *Agent) forgetNetwork(id string) {
	if a.cfg.Network != nil {
		a.cfg.Network.Forget(id)
	}
}

// reconcileNetwork runs after the VMs are reconciled.
func (a *Agent) reconcileNetwork(ctx context.Context) error {
	if a.cfg.Network == nil {
		return nil
	}
	var running, known []string
	a.mu.Lock()
	for id, s := range a.sbx {
		known = append(known, id)
		if s.vm != nil {
			running = append(running, s.vm.ID())
		}
	}
	a.mu.Unlock()
	return a.cfg.Network.Reconcile(ctx, running, known)
}
