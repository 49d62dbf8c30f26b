package sandboxes

import (
	"context"
	"fmt"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
)

// Reasons a reconcile records for sandboxes the host lost.
const (
	reasonGone    = "the VM was gone after a host restart"
	reasonExpired = "ttl expired while the host was down"
)

// reconcile makes the store match what the host found at its start
// (hostapi.Inventory): the machines it lost are recorded ended with the
// host's reason; the ones it re-attached or keeps asleep are recorded
// with their state; a fresh host (no records of its own yet) is asked to
// adopt the live sandboxes the store places on it; every other live
// sandbox of this host is recorded failed (never silently gone). Then
// volumes attached to sandboxes that are not live are freed, and the host
// settles (leftover VMs and volume files without a record are removed).
func (e *Engine) reconcile(ctx context.Context) error {
	inv, err := e.cfg.Host.Inventory(ctx)
	if err != nil {
		return err
	}
	held := map[string]bool{}
	for _, m := range inv.Ended {
		e.applyLost(ctx, m)
	}
	for _, m := range inv.Machines {
		held[m.ID] = true
		if _, err := e.apply(ctx, m); err != nil {
			e.log.Error("record re-attached sandbox", "sandbox", m.ID, "err", err)
		}
	}
	live, err := e.cfg.Store.ListSandboxes(ctx, pandastack.SandboxFilter{LiveOnly: true, Host: e.cfg.Host.Name()})
	if err != nil {
		return fmt.Errorf("list live sandboxes: %w", err)
	}
	for _, rec := range live {
		if held[rec.ID] || ended(inv, rec.ID) {
			continue
		}
		if inv.Fresh {
			if e.adopt(ctx, rec) {
				continue
			}
		}
		e.markEnded(ctx, rec, pandastack.StateFailed, reasonGone)
	}
	vols, err := e.freeVolumes(ctx)
	if err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	return e.cfg.Host.Settle(ctx, hostapi.SettleRequest{Volumes: vols})
}

// applyLost records a machine the host lost. A machine the store does
// not know (a create the crash cut short) leaves nothing pending.
func (e *Engine) applyLost(ctx context.Context, m hostapi.Machine) {
	if _, err := e.cfg.Store.GetSandbox(ctx, m.ID); err != nil {
		return
	}
	if _, err := e.apply(ctx, m); err != nil {
		e.log.Error("record sandbox end", "sandbox", m.ID, "err", err)
	}
	e.log.Info("sandbox ended while the host was down", "sandbox", m.ID, "state", m.State, "reason", m.EndReason)
}

// adopt asks a fresh host to take back rec's machine; false when it has
// nothing of it.
func (e *Engine) adopt(ctx context.Context, rec pandastack.Sandbox) bool {
	vols, _ := e.attached(ctx, rec.ID)
	m, err := e.cfg.Host.Adopt(ctx, toMachine(rec, vols))
	if err != nil {
		if !isUnknown(err) {
			e.log.Warn("adopt sandbox", "sandbox", rec.ID, "err", err)
		}
		if m.ID != "" && !m.State.Live() {
			e.applyLost(ctx, m)
			return true
		}
		return false
	}
	if _, err := e.apply(ctx, m); err != nil {
		e.log.Error("record adopted sandbox", "sandbox", rec.ID, "err", err)
	}
	return true
}

// markEnded records rec ended in state, for why.
func (e *Engine) markEnded(ctx context.Context, rec pandastack.Sandbox, state pandastack.SandboxState, why string) {
	now := time.Now().UTC()
	m := toMachine(rec, nil)
	m.State, m.EndedAt, m.EndReason = state, &now, why
	if _, err := e.apply(ctx, m); err != nil {
		e.log.Error("record sandbox end", "sandbox", rec.ID, "err", err)
	}
	e.log.Info("sandbox ended during reconcile", "sandbox", rec.ID, "state", state, "reason", why)
}

// freeVolumes frees volumes attached to sandboxes that are not live
// (ended while the host was down, or a create that never finished), and
// returns the ids of this host's volumes.
func (e *Engine) freeVolumes(ctx context.Context) ([]string, error) {
	vols, err := e.cfg.Store.ListVolumes(ctx, "")
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, v := range vols {
		if v.Host != e.cfg.Host.Name() {
			continue
		}
		ids = append(ids, v.ID)
		if v.SandboxID == "" {
			continue
		}
		if rec, err := e.cfg.Store.GetSandbox(ctx, v.SandboxID); err == nil && rec.State.Live() {
			continue
		}
		e.log.Info("freeing volume of an ended sandbox", "volume", v.ID, "sandbox", v.SandboxID)
		e.detach(ctx, v.SandboxID)
	}
	return ids, nil
}

// attached are the volumes attached to sandbox id, as its machine opens
// them.
func (e *Engine) attached(ctx context.Context, id string) ([]hostapi.VolumeAttachment, error) {
	vols, err := e.cfg.Store.ListVolumes(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []hostapi.VolumeAttachment
	for _, v := range vols {
		if v.SandboxID == id {
			out = append(out, hostapi.VolumeAttachment{ID: v.ID, Name: v.Name, SizeMiB: v.SizeMiB, MountPath: v.MountPath, Slot: v.Slot})
		}
	}
	return out, nil
}

// toMachine is rec as its host runs it.
func toMachine(rec pandastack.Sandbox, vols []hostapi.VolumeAttachment) hostapi.Machine {
	return hostapi.Machine{ID: rec.ID, Host: rec.Host, Accel: rec.Accel, State: rec.State, Lifetime: rec.Lifetime,
		Template: rec.Template, TemplateID: rec.TemplateID, TemplateVersion: rec.TemplateVersion,
		CPUs: rec.CPUs, MemoryMiB: rec.MemoryMiB, DiskMiB: rec.DiskMiB, Env: rec.Env, Defaults: rec.Defaults,
		CreatedAt: rec.CreatedAt, ExpiresAt: rec.ExpiresAt, AutoHibernateSeconds: rec.AutoHibernateSeconds, OnExpiry: rec.OnExpiry,
		EndedAt: rec.EndedAt, EndReason: rec.EndReason, Volumes: vols}
}

func ended(inv hostapi.Inventory, id string) bool {
	for _, m := range inv.Ended {
		if m.ID == id {
			return true
		}
	}
	return false
}
