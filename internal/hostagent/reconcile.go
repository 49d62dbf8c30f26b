package hostagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostagent/hoststate"
	"github.com/pandastack/pandastack/internal/vmm"
)

// reconcile makes the host match its own records (hoststate) after a
// restart or a crash: machines whose VM still runs are re-attached (a new
// agent session), VMs no record owns (pool leftovers, ended machines) are
// killed and their files removed, hibernated machines stay asleep, and
// machines whose VM is gone are recorded failed, with the reason. Only
// the outcome is written to the control plane's store.
func (a *Agent) reconcile(ctx context.Context) error {
	ids, err := a.cfg.Driver.List()
	if err != nil {
		return err
	}
	recs, err := a.hostRecords(ctx, ids)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
		r, known := recs[id]
		rec := r.Machine
		owned := known && rec.State.Live() && rec.State != pandastack.StateHibernated && rec.Host == a.cfg.Host
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
		s.volumes = r.Volumes
		a.keepState(s)
		a.mu.Lock()
		a.sbx[id] = s
		a.mu.Unlock()
		go a.watch(s)
		a.log.Info("re-attached sandbox", "sandbox", id, "lifetime", rec.Lifetime)
	}
	for id, r := range recs {
		rec := r.Machine
		if seen[id] || rec.Host != a.cfg.Host {
			continue
		}
		if !rec.State.Live() {
			a.dropState(id)
			continue
		}
		if _, err := os.Stat(a.hibDir(rec.ID)); err == nil {
			rec.State = pandastack.StateHibernated // its VM was saved whole
			s := &sandbox{rec: rec, volumes: r.Volumes}
			a.keepState(s)
			a.mu.Lock()
			a.sbx[rec.ID] = s // the reaper expires it if its TTL ran out
			a.mu.Unlock()
			continue
		}
		a.markFailed(ctx, rec, "the VM was gone after a host restart")
	}
	if err := a.reconcileVolumes(ctx); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	return a.reconcileNetwork(ctx)
}

// hostRecords are the host's records of its machines. A host without them
// yet (its first start with records, or an agent configured without a
// state directory) reads the control plane's records once instead; the
// machines it keeps are recorded on the host from then on.
func (a *Agent) hostRecords(ctx context.Context, vmIDs []string) (map[string]hoststate.Record, error) {
	if a.state != nil && !a.freshState {
		recs, err := a.state.List()
		if err != nil {
			a.log.Error("host state", "err", err) // the readable records are used
		}
		return recs, nil
	}
	withVolumes := map[string]bool{} // sandboxes with durable volumes attached
	if a.cfg.VolumeDir != "" {
		vols, err := a.cfg.Store.ListVolumes(ctx, "")
		if err != nil {
			return nil, err
		}
		for _, v := range vols {
			if v.SandboxID != "" {
				withVolumes[v.SandboxID] = true
			}
		}
	}
	recs := map[string]hoststate.Record{}
	for _, id := range vmIDs {
		if rec, err := a.cfg.Store.GetSandbox(ctx, id); err == nil {
			recs[id] = hoststate.Record{Machine: rec, Volumes: withVolumes[id]}
		}
	}
	live, err := a.cfg.Store.ListSandboxes(ctx, pandastack.SandboxFilter{LiveOnly: true, Host: a.cfg.Host})
	if err != nil {
		return nil, err
	}
	for _, rec := range live {
		recs[rec.ID] = hoststate.Record{Machine: rec, Volumes: withVolumes[rec.ID]}
	}
	return recs, nil
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
	a.dropState(rec.ID)
	a.releaseVolumes(ctx, rec.ID)
	a.log.Info("sandbox ended during reconcile", "sandbox", rec.ID, "state", state, "reason", why)
}

// saveState records s on the host, for the next reconcile.
func (a *Agent) saveState(s *sandbox) error {
	if a.state == nil {
		return nil
	}
	s.mu.Lock()
	r := hoststate.Record{Machine: s.rec, Volumes: s.volumes}
	s.mu.Unlock()
	return a.state.Put(r)
}

// keepState is saveState where a failure cannot undo what happened: it is
// logged (the next reconcile may then misjudge the machine).
func (a *Agent) keepState(s *sandbox) {
	if err := a.saveState(s); err != nil {
		a.log.Error("record machine on the host", "sandbox", s.rec.ID, "err", err)
	}
}

// dropState removes an ended machine's host record.
func (a *Agent) dropState(id string) {
	if a.state == nil {
		return
	}
	if err := a.state.Delete(id); err != nil {
		a.log.Error("remove host record", "sandbox", id, "err", err)
	}
}
