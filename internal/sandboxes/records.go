package sandboxes

import (
	"context"
	"errors"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
)

// The records rules, in one place: a sandbox's record is the team's part
// (team, metadata), written once at create, plus the host's facts about
// its machine (state, deadline, size, end), written from every result and
// event the host reports. The host numbers each change to a machine (Seq):
// an older change never overwrites a newer one, whichever arrives first,
// and an ended record is final. A change that arrives before the
// sandbox's first record waits for it (pending). An ended machine's
// volumes are freed.

// fromMachine is rec (its team's part) with machine m's facts.
func fromMachine(rec pandastack.Sandbox, m hostapi.Machine) pandastack.Sandbox {
	rec.ID, rec.Template, rec.TemplateID, rec.TemplateVersion = m.ID, m.Template, m.TemplateID, m.TemplateVersion
	rec.State, rec.Host, rec.Accel, rec.Env = m.State, m.Host, m.Accel, m.Env
	rec.CPUs, rec.MemoryMiB, rec.DiskMiB = m.CPUs, m.MemoryMiB, m.DiskMiB
	rec.CreatedAt, rec.ExpiresAt, rec.EndedAt, rec.EndReason = m.CreatedAt, m.ExpiresAt, m.EndedAt, m.EndReason
	rec.AutoHibernateSeconds, rec.Lifetime, rec.Defaults = m.AutoHibernateSeconds, m.Lifetime, m.Defaults
	rec.OnExpiry = m.OnExpiry
	return rec
}

// apply records machine m's change to its sandbox and returns the record
// as it stands.
func (e *Engine) apply(ctx context.Context, m hostapi.Machine) (pandastack.Sandbox, error) {
	ctx = context.WithoutCancel(ctx)
	e.recMu.Lock()
	defer e.recMu.Unlock()
	rec, err := e.cfg.Store.GetSandbox(ctx, m.ID)
	if pandastack.ErrorCode(err) == pandastack.ENotFound {
		// Its first record is being written (Create, Fork): keep the
		// newest change for it.
		if p, ok := e.pending[m.ID]; !ok || p.Seq < m.Seq {
			e.pending[m.ID] = m
		}
		return fromMachine(pandastack.Sandbox{Metadata: map[string]string{}}, m), nil
	}
	if err != nil {
		return rec, err
	}
	if !rec.State.Live() || (m.Seq != 0 && m.Seq <= e.seq[m.ID]) {
		return rec, nil // ended is final; an older change is stale
	}
	// The machine's own facts; an end keeps the record's when the host
	// lost them (a reconcile of a machine known only to the store).
	next := fromMachine(rec, m)
	if m.Template == "" {
		next.Template, next.TemplateID, next.TemplateVersion = rec.Template, rec.TemplateID, rec.TemplateVersion
		next.CPUs, next.MemoryMiB, next.DiskMiB, next.Env = rec.CPUs, rec.MemoryMiB, rec.DiskMiB, rec.Env
		next.CreatedAt, next.Accel, next.Defaults, next.Lifetime = rec.CreatedAt, rec.Accel, rec.Defaults, rec.Lifetime
		next.AutoHibernateSeconds, next.OnExpiry = rec.AutoHibernateSeconds, rec.OnExpiry
		if m.ExpiresAt.IsZero() {
			next.ExpiresAt = rec.ExpiresAt
		}
	}
	if !next.State.Live() {
		// Free its volumes first: once its end is recorded, a user may
		// attach them elsewhere at once.
		if err := e.cfg.Store.DetachVolumes(ctx, m.ID); err != nil {
			e.log.Error("detach volumes", "sandbox", m.ID, "err", err)
		}
	}
	if err := e.cfg.Store.PutSandbox(ctx, next); err != nil {
		return rec, err
	}
	if next.State.Live() {
		e.seq[m.ID] = m.Seq
	} else {
		delete(e.seq, m.ID)
	}
	return next, nil
}

// onEvent records what the host reported.
func (e *Engine) onEvent(ctx context.Context, ev hostapi.Event) {
	if _, err := e.apply(ctx, ev.Machine); err != nil {
		e.log.Error("record host event", "sandbox", ev.Machine.ID, "event", ev.Kind, "err", err)
		return
	}
	if ev.Kind == hostapi.EventExited {
		e.log.Warn("sandbox failed", "sandbox", ev.Machine.ID, "reason", ev.Machine.EndReason)
	}
}

// detach frees the volumes attached to sandbox id (a create that failed).
func (e *Engine) detach(ctx context.Context, id string) {
	if err := e.cfg.Store.DetachVolumes(context.WithoutCancel(ctx), id); err != nil {
		e.log.Error("detach volumes", "sandbox", id, "err", err)
	}
}

// isUnknown reports whether err is the host's "no such machine here".
func isUnknown(err error) bool { return errors.Is(err, hostapi.ErrUnknownMachine) }

func joinErr(a, b error) error { return errors.Join(a, b) }
