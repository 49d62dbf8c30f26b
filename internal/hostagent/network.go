package hostagent

import (
	"context"
	"fmt"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/network"
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

// startingWith returns ctx carrying the policy a VM about to start must
// have before it resumes (a fork, a restore of a running sandbox).
func (a *Agent) startingWith(ctx context.Context, p *pandastack.NetworkPolicy) context.Context {
	if a.cfg.Network == nil || p == nil {
		return ctx
	}
	return network.WithPolicy(ctx, *p)
}

// parentPolicy is a sandbox's policy, for its forks.
func (a *Agent) parentPolicy(id string) *pandastack.NetworkPolicy {
	if a.cfg.Network == nil {
		return nil
	}
	p := a.cfg.Network.Policy(id)
	return &p
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
