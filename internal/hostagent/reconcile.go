package hostagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
)

// reconcile makes the host match the store after a restart or a crash:
// sandboxes whose VM still runs are re-attached (a new agent session), VMs
// nobody owns (pool leftovers, ended sandboxes) are killed and their files
// removed, and sandboxes whose VM is gone are marked failed.
func (a *Agent) reconcile(ctx context.Context) error {
	ids, err := a.cfg.Driver.List()
	if err != nil {
		return err
	}
	withVolumes := map[string]bool{} // sandboxes with durable volumes attached
	if a.cfg.VolumeDir != "" {
		vols, err := a.cfg.Store.ListVolumes(ctx, "")
		if err != nil {
			return err
		}
		for _, v := range vols {
			if v.SandboxID != "" {
				withVolumes[v.SandboxID] = true
			}
		}
	}
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
		rec, err := a.cfg.Store.GetSandbox(ctx, id)
		owned := err == nil && rec.State.Live() && rec.State != pandastack.StateHibernated && rec.Host == a.cfg.Host
		v, rerr := a.cfg.Driver.Recover(ctx, id)
		if errors.Is(rerr, vmm.ErrGone) {
			if owned {
				a.markFailed(ctx, rec, "the VM was gone after a host restart")
			}
			continue
		}
		if rerr != nil {
			return fmt.Errorf("recover %s: %w", id, rerr)
		}
		if !owned || expired(rec, time.Now()) {
			a.log.Info("removing leftover vm", "vm", id)
			if err := v.Kill(ctx); err != nil {
				return err
			}
			if owned {
				a.markEnded(ctx, rec, pandastack.StateExpired, "ttl expired while the host was down")
			}
			continue
		}
		client, err := a.connect(ctx, v)
		if err != nil {
			a.log.Warn("re-attach failed; removing vm", "sandbox", id, "err", err)
			_ = v.Kill(ctx)
			a.markFailed(ctx, rec, "the guest agent did not answer after a host restart")
			continue
		}
		s := newSandbox(rec, v, client) // its idle time restarts with the server
		s.volumes = withVolumes[id]
		a.mu.Lock()
		a.sbx[id] = s
		a.mu.Unlock()
		go a.watch(s)
		a.log.Info("re-attached sandbox", "sandbox", id)
	}
	live, err := a.cfg.Store.ListSandboxes(ctx, pandastack.SandboxFilter{LiveOnly: true, Host: a.cfg.Host})
	if err != nil {
		return err
	}
	for _, rec := range live {
		if seen[rec.ID] {
			continue
		}
		if rec.State == pandastack.StateHibernated {
			if _, err := os.Stat(a.hibDir(rec.ID)); err == nil {
				a.mu.Lock()
				a.sbx[rec.ID] = &sandbox{rec: rec} // the reaper expires it if its TTL ran out
				a.mu.Unlock()
				continue
			}
		}
		a.markFailed(ctx, rec, "the VM was gone after a host restart")
	}
	if err := a.reconcileVolumes(ctx); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	return a.reconcileNetwork(ctx)
}

func (a *Agent) markFailed(ctx context.Context, rec pandastack.Sandbox, why string) {
	a.markEnded(ctx, rec, pandastack.StateFailed, why)
}

func (a *Agent) markEnded(ctx context.Context, rec pandastack.Sandbox, state pandastack.SandboxState, why string) {
	now := time.Now().UTC()
	rec.State, rec.EndedAt, rec.EndReason = state, &now, why
	if err := a.cfg.Store.PutSandbox(ctx, rec); err != nil {
		a.log.Error("record sandbox end", "sandbox", rec.ID, "err", err)
	}
	a.releaseVolumes(ctx, rec.ID)
	a.log.Info("sandbox ended during reconcile", "sandbox", rec.ID, "state", state, "reason", why)
}
