// Package hostagent owns the sandboxes on one host: it restores them from
// templates through the VMM driver, holds the session with each guest agent,
// expires them on their deadline (a service machine has none), and after a
// restart re-attaches to the VMs that are still running and removes what is
// left of the others, deciding from its own host-local records (hoststate).
// In single-node mode it runs inside the server; it implements
// pandastack.Engine.
package hostagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/hostagent/hoststate"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Snapshots finds what a template is restored from.
type Snapshots interface {
	Snapshot(ctx context.Context, name string) (vmm.Snapshot, pandastack.Template, error)
}

// Config configures an Agent.
type Config struct {
	Host      string
	Store     pandastack.Store
	Driver    vmm.Driver
	Templates Snapshots
	Logger    *slog.Logger
	// PoolSize is how many QEMU processes per template wait, started, for a
	// create. 0 disables the pool.
	PoolSize int
	// ReadyTimeout bounds how long a restored guest may take to answer.
	ReadyTimeout time.Duration
	// HibernateDir keeps hibernated sandboxes' state and disks.
	HibernateDir string
	// SnapshotDir keeps snapshots' state and disks.
	SnapshotDir string
	// VolumeDir keeps durable volumes (on the reflink filesystem); ""
	// disables volumes.
	VolumeDir string
	// SpaceDirs are further directories whose filesystems must have room
	// for a new volume: the filesystem under a loop-mounted VM image,
	// which may have less free than the image says it has.
	SpaceDirs []string
	// Network, if set, holds sandboxes' network policies.
	Network Network
	// Archive, if set, keeps snapshots in object storage too (archive.go).
	Archive SnapshotArchive
	// StateDir keeps the host's own records of its machines (hoststate),
	// from which a restart re-attaches them; "" keeps none (reconcile then
	// reads the store's records).
	StateDir string
}

// Agent is the host agent.
type Agent struct {
	cfg  Config
	log  *slog.Logger
	mu   sync.Mutex
	sbx  map[string]*sandbox
	stop context.CancelFunc
	done chan struct{}
	wg   sync.WaitGroup // auto-hibernations under way
	bg   sync.WaitGroup // background removals (discard.go)
	// state is the host's records (nil without Config.StateDir);
	// freshState: it had none when this agent started.
	state      *hoststate.Dir
	freshState bool
}

var _ pandastack.Engine = (*Agent)(nil)

// sandbox is a live sandbox on this host.
type sandbox struct {
	op       sync.Mutex // serialises hibernate and wake
	mu       sync.Mutex
	rec      pandastack.Sandbox
	vm       vmm.VM // nil while hibernated
	client   *guestconn.Client
	sleeping bool // the VM is being hibernated: its exit is expected
	volumes  bool // durable volumes are attached: sync the guest before a kill
	// lastUsed and busy are its activity (see idle.go); autoHib is set
	// while an auto-hibernation of it is under way.
	lastUsed time.Time
	busy     int
	autoHib  bool
}

// newSandbox is a live sandbox whose idle time starts now.
func newSandbox(rec pandastack.Sandbox, v vmm.VM, client *guestconn.Client) *sandbox {
	return &sandbox{rec: rec, vm: v, client: client, lastUsed: time.Now()}
}

// New makes an Agent. Call Start to reconcile and begin expiring sandboxes.
func New(cfg Config) *Agent {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.Host == "" {
		cfg.Host = "local"
	}
	return &Agent{cfg: cfg, log: cfg.Logger, sbx: map[string]*sandbox{}}
}

// Accel is the accelerator this host's VMs run under.
func (a *Agent) Accel() pandastack.Accel { return a.cfg.Driver.Accel() }

// Start reconciles with what survived an earlier run, then runs the TTL
// reaper until Close.
func (a *Agent) Start(ctx context.Context) error {
	for _, d := range []string{a.cfg.HibernateDir, a.cfg.SnapshotDir, a.cfg.VolumeDir} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	if a.cfg.StateDir != "" {
		d, fresh, err := hoststate.Open(a.cfg.StateDir)
		if err != nil {
			return err
		}
		a.state, a.freshState = d, fresh
	}
	a.sweep()
	if err := a.reconcile(ctx); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	a.stop = cancel
	a.done = make(chan struct{})
	go a.reap(rctx)
	return nil
}

// Prewarm fills the pool of template name.
func (a *Agent) Prewarm(ctx context.Context, name string) error {
	if a.cfg.PoolSize <= 0 {
		return nil
	}
	snap, _, err := a.cfg.Templates.Snapshot(ctx, name)
	if err != nil {
		return err
	}
	a.cfg.Driver.Prewarm(snap, a.cfg.PoolSize)
	return nil
}

// Create restores a sandbox from its template and waits for its agent.
func (a *Agent) Create(ctx context.Context, req pandastack.CreateRequest) (pandastack.Sandbox, error) {
	if req.Snapshot != "" {
		if len(req.Volumes) > 0 {
			return pandastack.Sandbox{}, pandastack.Errorf(pandastack.EInvalid,
				"volumes cannot be attached to a sandbox created from a snapshot: it gets copies of the snapshot's volumes")
		}
		return a.createFromSnapshot(ctx, req)
	}
	t0 := time.Now()
	snap, tpl, err := a.templateSnapshot(ctx, req)
	if err != nil {
		return pandastack.Sandbox{}, err
	}
	// Pools are kept for templates at their own size only: a pool per size
	// variant any team asks for would keep idle QEMUs forever.
	if a.cfg.PoolSize > 0 && req.CPUs == 0 && req.MemoryMiB == 0 && req.DiskGiB == 0 {
		a.cfg.Driver.Prewarm(snap, a.cfg.PoolSize)
	}
	// Volumes are attached, atomically, under a reserved id before the VM
	// starts, and handed to the sandbox's id once it is recorded; whatever
	// fails on the way frees them.
	var vols []pandastack.Volume
	held := ""
	if len(req.Volumes) > pandastack.MaxVolumeMounts || len(req.Volumes) > snap.Machine.VolumeSlots {
		if snap.Machine.VolumeSlots == 0 {
			return pandastack.Sandbox{}, pandastack.Errorf(pandastack.EInvalid,
				"template %s was baked before volumes existed: rebuild it to mount volumes", tpl.Name)
		}
		return pandastack.Sandbox{}, pandastack.Errorf(pandastack.EInvalid, "at most %d volumes per sandbox", snap.Machine.VolumeSlots)
	}
	id := newSandboxID()
	if len(req.Volumes) > 0 {
		held = id
		if snap.Volumes, vols, err = a.attachVolumes(ctx, req, held); err != nil {
			return pandastack.Sandbox{}, err
		}
		defer func() {
			if held != "" {
				a.releaseVolumes(ctx, held)
			}
		}()
	}
	v, err := a.cfg.Driver.Restore(ctx, snap, vmm.RestoreOptions{ID: id, Network: startPolicy(req.Network)})
	if err != nil {
		return pandastack.Sandbox{}, &pandastack.Error{Code: pandastack.EUnavailable, Message: "could not start the sandbox VM", Err: err}
	}
	tRestored := time.Since(t0)
	client, err := a.connect(ctx, v)
	if err != nil {
		v.Kill(context.Background())
		return pandastack.Sandbox{}, &pandastack.Error{Code: pandastack.EUnavailable, Message: "the sandbox did not become ready", Err: err}
	}
	tReady := time.Since(t0)
	if len(vols) > 0 {
		if err := a.mountVolumes(ctx, client, tpl, vols); err != nil {
			client.Close()
			v.Kill(context.Background())
			return pandastack.Sandbox{}, err
		}
	}
	rec, err := a.record(ctx, v, client, req, tpl, snap.Machine.CPUs, snap.Machine.MemoryMiB)
	if err != nil {
		return rec, err
	}
	held = ""
	a.log.Info("sandbox created", "sandbox", rec.ID, "template", req.Template, "team", req.TeamID,
		"restore_ms", ms(tRestored), "ready_ms", ms(tReady), "ms", ms(time.Since(t0)), "accel", a.Accel())
	return rec, nil
}

// newSandboxID mints a sandbox's id: the host agent names the machines it
// starts (the VMM driver does not know the product's id scheme).
func newSandboxID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return "sbx_" + hex.EncodeToString(b)
}

// register connects to a restored VM's agent and records the sandbox.
func (a *Agent) register(ctx context.Context, v vmm.VM, req pandastack.CreateRequest, tpl pandastack.Template, cpus, mem int) (pandastack.Sandbox, error) {
	client, err := a.connect(ctx, v)
	if err != nil {
		v.Kill(context.Background())
		return pandastack.Sandbox{}, &pandastack.Error{Code: pandastack.EUnavailable, Message: "the sandbox did not become ready", Err: err}
	}
	return a.record(ctx, v, client, req, tpl, cpus, mem)
}

// record stores a new live sandbox and starts watching its VM.
func (a *Agent) record(ctx context.Context, v vmm.VM, client *guestconn.Client, req pandastack.CreateRequest, tpl pandastack.Template, cpus, mem int) (pandastack.Sandbox, error) {
	now := time.Now().UTC()
	rec := pandastack.Sandbox{
		ID: v.ID(), TeamID: req.TeamID, Template: tpl.Name, TemplateID: tpl.ID, State: pandastack.StateRunning,
		Host: a.cfg.Host, Accel: a.Accel(), Metadata: nonNil(req.Metadata), Env: req.Env,
		CPUs: cpus, MemoryMiB: mem, DiskMiB: tpl.DiskMiB, TemplateVersion: tpl.Version, CreatedAt: now, ExpiresAt: req.Lifetime.Expiry(now, req.TTL),
		AutoHibernateSeconds: int(req.AutoHibernate / time.Second), Lifetime: req.Lifetime,
		Defaults: &tpl.Defaults, // captured once: execs do not read the template again
	}
	if req.TemplateVersion > 0 {
		rec.TemplateVersion = req.TemplateVersion
	}
	s := newSandbox(rec, v, client)
	s.volumes = len(req.Volumes) > 0
	if err := a.applyNetwork(ctx, rec.ID, req.Network); err != nil {
		client.Close()
		v.Kill(context.Background())
		a.forgetNetwork(rec.ID)
		return pandastack.Sandbox{}, err
	}
	if err := a.saveState(s); err != nil {
		client.Close()
		v.Kill(context.Background())
		a.forgetNetwork(rec.ID)
		return pandastack.Sandbox{}, err
	}
	if err := a.cfg.Store.PutSandbox(ctx, rec); err != nil {
		client.Close()
		v.Kill(context.Background())
		a.dropState(rec.ID)
		return pandastack.Sandbox{}, fmt.Errorf("record sandbox: %w", err)
	}
	a.mu.Lock()
	a.sbx[rec.ID] = s
	a.mu.Unlock()
	go a.watch(s)
	return rec, nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// agentConner is implemented by drivers that connect the agent socket ahead
// of the restore.
type agentConner interface {
	AgentConn(ctx context.Context) (net.Conn, error)
}

// connect starts a session with the VM's guest agent.
func (a *Agent) connect(ctx context.Context, v vmm.VM) (*guestconn.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ReadyTimeout)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-v.Exited():
			cancel()
		case <-stop:
		}
	}()
	var c *guestconn.Conn
	if ac, ok := v.(agentConner); ok {
		nc, err := ac.AgentConn(ctx)
		if err != nil {
			return nil, fmt.Errorf("connect agent: %w", err)
		}
		c = guestconn.NewConn(nc)
	} else {
		var err error
		if c, err = guestconn.Dial(ctx, v.AgentSocket()); err != nil {
			return nil, err
		}
	}
	client, _, err := c.Handshake(ctx)
	if err != nil {
		c.Close()
		select {
		case <-v.Exited():
			return nil, fmt.Errorf("vm exited before its agent answered: %w", err)
		default:
		}
		return nil, err
	}
	return client, nil
}

// watch notices a VM that died on its own.
func (a *Agent) watch(s *sandbox) {
	s.mu.Lock()
	v := s.vm
	s.mu.Unlock()
	if v == nil {
		return
	}
	<-v.Exited()
	a.mu.Lock()
	cur := a.sbx[s.rec.ID]
	a.mu.Unlock()
	s.mu.Lock()
	expected := s.sleeping || s.vm != v
	s.mu.Unlock()
	if cur == s && !expected {
		a.log.Warn("sandbox vm exited unexpectedly", "sandbox", s.rec.ID)
		_ = a.end(context.Background(), s, pandastack.StateFailed, "the VM process exited")
	}
}

// get returns a live sandbox, or the reason it is not live.
func (a *Agent) get(ctx context.Context, id string) (*sandbox, error) {
	a.mu.Lock()
	s := a.sbx[id]
	a.mu.Unlock()
	if s != nil {
		return s, nil
	}
	rec, err := a.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if !rec.State.Live() {
		when := ""
		if rec.EndedAt != nil {
			when = " at " + rec.EndedAt.Format(time.RFC3339)
		}
		return nil, pandastack.Errorf(pandastack.EGone, "sandbox %s is %s%s", id, rec.State, when)
	}
	return nil, pandastack.Errorf(pandastack.EUnavailable, "sandbox %s is not running on this host", id)
}

// Guest returns the sandbox's guest agent session; exec merges the env the
// sandbox was created with.
func (a *Agent) Guest(ctx context.Context, id string) (pandastack.Guest, error) {
	s, err := a.get(ctx, id)
	if err != nil {
		return nil, err
	}
	s.used()
	if err := a.wake(ctx, s); err != nil { // any use wakes a hibernated sandbox
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastUsed = time.Now()
	g := &guest{Client: s.client, env: s.rec.Env, s: s}
	a.templateDefaults(ctx, g, s)
	return g, nil
}

type guest struct {
	*guestconn.Client
	env           map[string]string
	workdir, user string   // the template's defaults
	s             *sandbox // held busy while a call runs (idle.go)
}

// Exec runs a command; the sandbox is busy until it ends (a background
// command: until it has started).
func (g *guest) Exec(ctx context.Context, req pandastack.ExecRequest, stdin io.Reader, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
	defer g.s.hold()()
	if req.Cwd == "" {
		req.Cwd = g.workdir
	}
	if req.User == "" {
		req.User = g.user
	}
	if len(g.env) > 0 {
		env := maps.Clone(g.env)
		maps.Copy(env, req.Env)
		req.Env = env
	}
	return g.Client.Exec(ctx, req, stdin, fn)
}

// Kill ends a sandbox. Killing one that already ended is not an error.
func (a *Agent) Kill(ctx context.Context, id string, reason pandastack.SandboxState) error {
	s, err := a.get(ctx, id)
	if err != nil {
		if pandastack.ErrorCode(err) == pandastack.EGone {
			return nil
		}
		return err
	}
	return a.end(ctx, s, reason, "")
}

// end stops the VM, removes its files and records the end.
func (a *Agent) end(ctx context.Context, s *sandbox, state pandastack.SandboxState, why string) error {
	a.mu.Lock()
	if a.sbx[s.rec.ID] != s {
		a.mu.Unlock()
		return nil
	}
	delete(a.sbx, s.rec.ID)
	a.mu.Unlock()
	var kerr error
	s.mu.Lock()
	v, client := s.vm, s.client
	s.mu.Unlock()
	if client != nil && v != nil && s.volumes {
		// What the guest has not written yet would be lost with the VM:
		// flush its filesystems (the volume's) first.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := client.Sync(sctx); err != nil {
			a.log.Warn("sync guest before kill", "sandbox", s.rec.ID, "err", err)
		}
		cancel()
	}
	if client != nil {
		client.Close()
	}
	if v != nil {
		kerr = v.Kill(ctx)
	}
	if err := os.RemoveAll(a.hibDir(s.rec.ID)); err != nil {
		kerr = errors.Join(kerr, err)
	}
	a.releaseVolumes(ctx, s.rec.ID)
	a.forgetNetwork(s.rec.ID)
	a.dropState(s.rec.ID)
	s.mu.Lock()
	now := time.Now().UTC()
	s.rec.State, s.rec.EndedAt, s.rec.EndReason = state, &now, why
	if why == "" {
		s.rec.EndReason = string(state)
	}
	rec := s.rec
	s.mu.Unlock()
	err := a.cfg.Store.PutSandbox(context.WithoutCancel(ctx), rec)
	a.log.Info("sandbox ended", "sandbox", rec.ID, "state", state, "reason", rec.EndReason)
	return errors.Join(kerr, err)
}

// SetTTL moves a sandbox's expiry to now+ttl.
func (a *Agent) SetTTL(ctx context.Context, id string, ttl time.Duration) (pandastack.Sandbox, error) {
	s, err := a.get(ctx, id)
	if err != nil {
		return pandastack.Sandbox{}, err
	}
	s.mu.Lock()
	if s.rec.Lifetime.IsService() {
		s.mu.Unlock()
		return s.rec, pandastack.NoTTLError(id)
	}
	s.rec.ExpiresAt = time.Now().UTC().Add(ttl)
	rec := s.rec
	s.mu.Unlock()
	a.keepState(s)
	if err := a.cfg.Store.PutSandbox(ctx, rec); err != nil {
		return rec, fmt.Errorf("record ttl: %w", err)
	}
	return rec, nil
}

// reap expires sandboxes whose TTL ran out and hibernates the idle ones
// that asked for it.
func (a *Agent) reap(ctx context.Context) {
	defer close(a.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var due []*sandbox
		a.mu.Lock()
		for _, s := range a.sbx {
			s.mu.Lock()
			if expired(s.rec, now) {
				due = append(due, s)
			}
			s.mu.Unlock()
		}
		a.mu.Unlock()
		for _, s := range due {
			if err := a.end(ctx, s, pandastack.StateExpired, "ttl expired"); err != nil {
				a.log.Error("expire sandbox", "sandbox", s.rec.ID, "err", err)
			}
		}
		a.autoHibernate(ctx, time.Now())
	}
}

// expired reports whether rec's TTL ran out by now. A record without an
// expiry (a service machine) never expires.
func expired(rec pandastack.Sandbox, now time.Time) bool {
	return !rec.ExpiresAt.IsZero() && now.After(rec.ExpiresAt)
}

// Close stops the reaper. With killAll, every sandbox on the host is ended
// too; otherwise they keep running and the next Start re-attaches to them.
func (a *Agent) Close(ctx context.Context, killAll bool) error {
	if a.stop != nil {
		a.stop()
		<-a.done
		a.wg.Wait()
	}
	var errs []error
	a.mu.Lock()
	all := make([]*sandbox, 0, len(a.sbx))
	for _, s := range a.sbx {
		all = append(all, s)
	}
	a.mu.Unlock()
	for _, s := range all {
		if killAll {
			errs = append(errs, a.end(ctx, s, pandastack.StateKilled, "host shut down"))
		} else {
			// Let go of it: the next Start re-attaches, and this agent
			// no longer watches it (its VM's end is not ours to record).
			a.mu.Lock()
			delete(a.sbx, s.rec.ID)
			a.mu.Unlock()
			if s.vm != nil {
				s.client.Close()
				s.vm.Release()
			}
		}
	}
	errs = append(errs, a.cfg.Driver.Close())
	a.bg.Wait()
	return errors.Join(errs...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
