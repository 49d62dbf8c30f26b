package hostagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostagent/hoststate"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// reconcile makes the host match its own records (hoststate) after a
// restart or a crash: machines whose VM still runs are re-attached (a new
// agent session), VMs no record owns (pool leftovers, ended machines) are
// killed and their files removed, hibernated machines stay asleep, and
// machines whose VM is gone are reported ended (failed, with the reason).
// What it found is the Inventory; the caller (the sandboxes service)
// turns it into records, adopts what a fresh host has no record of, and
// calls Settle. A fresh host (no records yet) kills nothing: its running
// VMs are unclaimed until Settle.
func (a *Agent) reconcile(ctx context.Context) error {
	ids, err := a.cfg.Driver.List()
	if err != nil {
		return err
	}
	recs := map[string]hoststate.Record{}
	if a.state != nil && !a.freshState {
		if recs, err = a.state.List(); err != nil {
			a.log.Error("host state", "err", err) // the readable records are used
		}
	}
	inv := hostapi.Inventory{Fresh: a.state == nil || a.freshState}
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
		r, known := recs[id]
		rec := r.Machine
		owned := known && rec.State.Live() && rec.State != pandastack.StateHibernated && rec.Host == a.cfg.Host
		v, rerr := a.cfg.Driver.Recover(ctx, id)
		if errors.Is(rerr, vmm.ErrGone) {
			if owned {
				inv.Ended = append(inv.Ended, a.gone(rec))
			}
			continue
		}
		if rerr != nil {
			return fmt.Errorf("recover %s: %w", id, rerr)
		}
		if !owned && inv.Fresh {
			a.unclaimed[id] = v // the caller may adopt it (Adopt) until Settle
			inv.Unclaimed = append(inv.Unclaimed, id)
			continue
		}
		// One that hibernates on expiry is re-attached: the reaper
		// hibernates it.
		if !owned || (expired(rec, time.Now()) && !rec.OnExpiry.Hibernates()) {
			a.log.Info("removing leftover vm", "vm", id)
			if err := v.Kill(ctx); err != nil {
				return err
			}
			if owned {
				inv.Ended = append(inv.Ended, a.lost(rec, pandastack.StateExpired, "ttl expired while the host was down"))
			}
			continue
		}
		m, err := a.reattach(ctx, v, rec, r.Volumes || len(rec.Volumes) > 0)
		if err != nil {
			inv.Ended = append(inv.Ended, m)
			continue
		}
		inv.Machines = append(inv.Machines, m)
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
		if m, ok := a.keepAsleep(rec, r.Volumes || len(rec.Volumes) > 0); ok {
			inv.Machines = append(inv.Machines, m)
			continue
		}
		inv.Ended = append(inv.Ended, a.gone(rec))
	}
	a.inv = inv
	return nil
}

// gone ends machine rec whose VM was not there after a restart: expired if
// its deadline had passed (the host was down, or went down while ending
// it), failed otherwise.
func (a *Agent) gone(rec hostapi.Machine) hostapi.Machine {
	if expired(rec, time.Now()) {
		return a.lost(rec, pandastack.StateExpired, "ttl expired while the host was down")
	}
	return a.lost(rec, pandastack.StateFailed, "the VM was gone after a host restart")
}

// reattach opens a new agent session with a running VM and holds it as
// machine rec again; when its agent does not answer the VM is killed and
// the machine is returned ended (failed) with the error.
func (a *Agent) reattach(ctx context.Context, v vmm.VM, rec hostapi.Machine, volumes bool) (hostapi.Machine, error) {
	client, err := a.connect(ctx, v)
	if err != nil {
		a.log.Warn("re-attach failed; removing vm", "sandbox", rec.ID, "err", err)
		_ = v.Kill(ctx)
		return a.lost(rec, pandastack.StateFailed, "the guest agent did not answer after a host restart"), err
	}
	rec.State = pandastack.StateRunning
	s := newSandbox(rec, v, client) // its idle time restarts with the server
	s.volumes = volumes
	a.keepState(s)
	a.mu.Lock()
	a.sbx[rec.ID] = s
	a.mu.Unlock()
	go a.watch(s)
	a.log.Info("re-attached sandbox", "sandbox", rec.ID, "lifetime", rec.Lifetime)
	return rec, nil
}

// keepAsleep holds machine rec, whose VM is not running, as hibernated
// when its saved state is on the host.
func (a *Agent) keepAsleep(rec hostapi.Machine, volumes bool) (hostapi.Machine, bool) {
	if _, err := os.Stat(a.hibDir(rec.ID)); err != nil {
		return rec, false
	}
	if rec.State != pandastack.StateHibernated {
		rec.State = pandastack.StateHibernated // its VM was saved whole
		rec.Seq++
	}
	s := &sandbox{rec: rec, volumes: volumes}
	a.keepState(s)
	a.mu.Lock()
	a.sbx[rec.ID] = s // the reaper expires it if its TTL ran out
	a.mu.Unlock()
	return rec, true
}

// lost is machine rec ended in state, for why, while the host was down:
// its host record is dropped.
func (a *Agent) lost(rec hostapi.Machine, state pandastack.SandboxState, why string) hostapi.Machine {
	now := time.Now().UTC()
	rec.State, rec.EndedAt, rec.EndReason = state, &now, why
	rec.Seq++
	a.dropState(rec.ID)
	a.log.Info("sandbox ended during reconcile", "sandbox", rec.ID, "state", state, "reason", why)
	return rec
}

// Inventory is what Start found on the host.
func (a *Agent) Inventory(ctx context.Context) (hostapi.Inventory, error) {
	return a.inv, nil
}

// Adopt holds machine m, which the host had no record of: its unclaimed
// VM is re-attached, or its hibernated files are kept asleep. An expired
// machine's VM is killed and m returned ended.
func (a *Agent) Adopt(ctx context.Context, m hostapi.Machine) (hostapi.Machine, error) {
	end, err := a.starts.begin()
	if err != nil {
		return hostapi.Machine{}, err
	}
	defer end()
	a.mu.Lock()
	v := a.unclaimed[m.ID]
	delete(a.unclaimed, m.ID)
	_, held := a.sbx[m.ID]
	a.mu.Unlock()
	if held {
		return m, pandastack.Errorf(pandastack.EConflict, "machine %s is already held", m.ID)
	}
	m.Host = a.cfg.Host
	if v != nil {
		if expired(m, time.Now()) && !m.OnExpiry.Hibernates() {
			_ = v.Kill(ctx)
			return a.lost(m, pandastack.StateExpired, "ttl expired while the host was down"), nil
		}
		return a.reattach(ctx, v, m, len(m.Volumes) > 0)
	}
	if rec, ok := a.keepAsleep(m, len(m.Volumes) > 0); ok {
		return rec, nil
	}
	return m, hostapi.Unknown(m.ID)
}

// Settle ends reconciliation: unclaimed VMs are killed, volume files of
// volumes not in req.Volumes are removed, and network state of machines
// the host does not hold is dropped.
func (a *Agent) Settle(ctx context.Context, req hostapi.SettleRequest) error {
	a.mu.Lock()
	left := a.unclaimed
	a.unclaimed = map[string]vmm.VM{}
	a.mu.Unlock()
	for id, v := range left {
		a.log.Info("removing leftover vm", "vm", id)
		if err := v.Kill(ctx); err != nil {
			return fmt.Errorf("remove leftover vm %s: %w", id, err)
		}
	}
	if err := a.pruneVolumes(req.Volumes); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	return a.reconcileNetwork(ctx)
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
