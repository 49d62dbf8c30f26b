package sandboxes

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
)

// MaxForks bounds one fork request.
const MaxForks = 10

// Archive is told of each new snapshot once it is durable and recorded;
// it may export it in the background (internal/snaparchive).
type Archive interface {
	Snapshotted(sn pandastack.Snapshot)
}

// EngineConfig configures an Engine.
type EngineConfig struct {
	Store   pandastack.Store
	Host    hostapi.Host
	Logger  *slog.Logger // nil: discard
	Archive Archive      // nil: snapshots stay on the host only
}

// Engine is the sandbox product over a host: it implements
// pandastack.Engine by minting ids, resolving snapshots and volumes within
// the team, asking the host (hostapi.Host) for machines, and keeping the
// control plane's records from the host's results and events. Create it
// with NewEngine, then Start it (reconcile and drain the host's events).
type Engine struct {
	cfg EngineConfig
	log *slog.Logger
	// recMu serialises record writes; seq is the newest machine change
	// written per live sandbox, pending the changes that came (as
	// events) before the sandbox's first record.
	recMu   sync.Mutex
	seq     map[string]uint64
	pending map[string]hostapi.Machine
	drained chan struct{}
}

var _ pandastack.Engine = (*Engine)(nil)

// NewEngine returns an Engine for cfg.
func NewEngine(cfg EngineConfig) *Engine {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Engine{cfg: cfg, log: cfg.Logger, seq: map[string]uint64{}, pending: map[string]hostapi.Machine{}}
}

// Start reconciles the store with what the host found at its start, then
// turns the host's events into records until the host closes its event
// channel (Wait waits for that).
func (e *Engine) Start(ctx context.Context) error {
	if err := e.reconcile(ctx); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	e.drained = make(chan struct{})
	events := e.cfg.Host.Events(ctx)
	go func() {
		defer close(e.drained)
		for ev := range events {
			e.onEvent(context.Background(), ev)
		}
	}()
	return nil
}

// Wait returns once the host's events are all recorded (the host closed
// its event channel).
func (e *Engine) Wait() {
	if e.drained != nil {
		<-e.drained
	}
}

// Accel is the accelerator the host's VMs run under.
func (e *Engine) Accel() pandastack.Accel { return e.cfg.Host.Accel() }

// Create starts a sandbox for req (validated by Service.Request): its
// volumes are attached to its id first, atomically each; whatever fails on
// the way frees them and leaves no record.
func (e *Engine) Create(ctx context.Context, req pandastack.CreateRequest) (pandastack.Sandbox, error) {
	id := pandastack.NewID("sbx_")
	spec := hostapi.MachineSpec{ID: id, Template: req.Template, TemplateVersion: req.TemplateVersion,
		CPUs: req.CPUs, MemoryMiB: req.MemoryMiB, DiskGiB: req.DiskGiB, Env: req.Env, Network: req.Network,
		Lifetime: req.Lifetime, TTL: req.TTL, AutoHibernateSeconds: int(req.AutoHibernate / time.Second),
		OnExpiry: req.OnExpiry, DeferSession: req.DeferSession}
	if req.Snapshot != "" {
		if len(req.Volumes) > 0 {
			return pandastack.Sandbox{}, pandastack.Errorf(pandastack.EInvalid,
				"volumes cannot be attached to a sandbox created from a snapshot: it gets copies of the snapshot's volumes")
		}
		sn, err := e.cfg.Store.GetSnapshot(ctx, req.Snapshot)
		// A team starts from its own snapshots; a platform service's
		// machine (ManagedBy, never set from a request) also from the
		// platform's (no team's, such as a functions runtime base).
		if err != nil || (sn.TeamID != req.TeamID && !(sn.TeamID == "" && req.ManagedBy != "")) {
			return pandastack.Sandbox{}, pandastack.Errorf(pandastack.ENotFound, "snapshot %s not found", req.Snapshot)
		}
		spec.Snapshot = &hostapi.SnapshotRef{ID: sn.ID, Template: sn.Template, TemplateID: sn.TemplateID, ObjectKey: sn.ObjectKey}
	}
	if len(req.Volumes) > 0 {
		vols, err := e.attachVolumes(ctx, req.TeamID, id, req.ManagedBy, req.Volumes)
		if err != nil {
			return pandastack.Sandbox{}, err
		}
		spec.Volumes = vols
	}
	m, err := e.cfg.Host.Create(ctx, spec)
	if err != nil {
		if len(spec.Volumes) > 0 {
			e.detach(ctx, id)
		}
		return pandastack.Sandbox{}, err
	}
	rec := fromMachine(pandastack.Sandbox{TeamID: req.TeamID, Metadata: nonNil(req.Metadata), ManagedBy: req.ManagedBy}, m)
	if err := e.first(ctx, rec, m.Seq); err != nil {
		return pandastack.Sandbox{}, err
	}
	return rec, nil
}

// first writes a new sandbox's first record, then any change the host
// reported before it. When the write fails the machine is killed.
func (e *Engine) first(ctx context.Context, rec pandastack.Sandbox, seq uint64) error {
	e.recMu.Lock()
	err := e.cfg.Store.PutSandbox(context.WithoutCancel(ctx), rec)
	if err == nil {
		e.seq[rec.ID] = seq
	}
	later, ok := e.pending[rec.ID]
	delete(e.pending, rec.ID)
	e.recMu.Unlock()
	if err != nil {
		e.log.Error("record sandbox; killing it", "sandbox", rec.ID, "err", err)
		if _, kerr := e.cfg.Host.Kill(context.WithoutCancel(ctx), hostapi.KillRequest{ID: rec.ID, State: pandastack.StateFailed, Reason: "its record could not be written"}); kerr != nil {
			e.log.Error("kill unrecorded sandbox", "sandbox", rec.ID, "err", kerr)
		}
		e.detach(ctx, rec.ID)
		return fmt.Errorf("record sandbox: %w", err)
	}
	if ok {
		e.apply(ctx, later)
	}
	return nil
}

// live is sandbox id's record when the host can act on it: a record that
// ended answers EGone.
func (e *Engine) live(ctx context.Context, id string) (pandastack.Sandbox, error) {
	rec, err := e.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return rec, err
	}
	if !rec.State.Live() {
		return rec, goneError(rec)
	}
	return rec, nil
}

func goneError(rec pandastack.Sandbox) error {
	when := ""
	if rec.EndedAt != nil {
		when = " at " + rec.EndedAt.Format(time.RFC3339)
	}
	return pandastack.Errorf(pandastack.EGone, "sandbox %s is %s%s", rec.ID, rec.State, when)
}

// hostErr turns the host's "unknown machine" for sandbox id into EGone
// when its record ended; other errors pass.
func (e *Engine) hostErr(ctx context.Context, id string, err error) error {
	if err == nil || !isUnknown(err) {
		return err
	}
	if rec, gerr := e.cfg.Store.GetSandbox(ctx, id); gerr != nil {
		return gerr
	} else if !rec.State.Live() {
		return goneError(rec)
	}
	return err
}

// Guest is the sandbox's guest session (any use wakes a hibernated one).
func (e *Engine) Guest(ctx context.Context, id string) (pandastack.Guest, error) {
	g, err := e.cfg.Host.Guest(ctx, id)
	if err != nil {
		return nil, e.hostErr(ctx, id, err)
	}
	return g, nil
}

// Kill ends a sandbox. Killing one that already ended is not an error.
func (e *Engine) Kill(ctx context.Context, id string, reason pandastack.SandboxState) error {
	m, err := e.cfg.Host.Kill(ctx, hostapi.KillRequest{ID: id, State: reason})
	if err != nil && isUnknown(err) {
		err = e.hostErr(ctx, id, err)
		if pandastack.ErrorCode(err) == pandastack.EGone {
			return nil
		}
		return err
	}
	if m.ID != "" {
		_, aerr := e.apply(ctx, m)
		return joinErr(err, aerr)
	}
	return err
}

// SetTTL moves a sandbox's expiry to now+ttl.
func (e *Engine) SetTTL(ctx context.Context, id string, ttl time.Duration) (pandastack.Sandbox, error) {
	rec, err := e.live(ctx, id)
	if err != nil {
		return rec, err
	}
	if rec.Lifetime.IsService() {
		return rec, pandastack.NoTTLError(id)
	}
	m, err := e.cfg.Host.SetDeadline(ctx, hostapi.DeadlineRequest{ID: id, ExpiresAt: time.Now().UTC().Add(ttl)})
	if err != nil {
		return rec, e.hostErr(ctx, id, err)
	}
	return e.apply(ctx, m)
}

// Hibernate saves a sandbox whole and frees its VM.
func (e *Engine) Hibernate(ctx context.Context, id string) (pandastack.Sandbox, error) {
	m, err := e.cfg.Host.Hibernate(ctx, id)
	if err != nil {
		return pandastack.Sandbox{}, e.hostErr(ctx, id, err)
	}
	return e.apply(ctx, m)
}

// Wake brings a hibernated sandbox back.
func (e *Engine) Wake(ctx context.Context, id string) (pandastack.Sandbox, error) {
	m, err := e.cfg.Host.Wake(ctx, id)
	if err != nil {
		return pandastack.Sandbox{}, e.hostErr(ctx, id, err)
	}
	return e.apply(ctx, m)
}

// Fork makes count children of a running sandbox, each recorded as the
// parent's copy (metadata forked_from; a service machine's children are
// service machines). On error the children made so far are returned.
func (e *Engine) Fork(ctx context.Context, id string, count int) ([]pandastack.Sandbox, error) {
	if count < 1 || count > MaxForks {
		return nil, pandastack.Errorf(pandastack.EInvalid, "count must be between 1 and %d", MaxForks)
	}
	parent, err := e.live(ctx, id)
	if err != nil {
		return nil, err
	}
	ids := make([]string, count)
	for i := range ids {
		ids[i] = pandastack.NewID("sbx_")
	}
	ms, ferr := e.cfg.Host.Fork(ctx, hostapi.ForkRequest{ParentID: id, ChildIDs: ids})
	var kids []pandastack.Sandbox
	for _, m := range ms {
		meta := maps.Clone(parent.Metadata)
		if meta == nil {
			meta = map[string]string{}
		}
		meta["forked_from"] = parent.ID
		rec := fromMachine(pandastack.Sandbox{TeamID: parent.TeamID, Metadata: meta, ManagedBy: parent.ManagedBy}, m)
		if err := e.first(ctx, rec, m.Seq); err != nil {
			return kids, fmt.Errorf("record fork: %w", err)
		}
		kids = append(kids, rec)
	}
	if ferr != nil {
		return kids, e.hostErr(ctx, id, ferr)
	}
	return kids, nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
