// Package hostagent runs the machines on one host: it restores them from
// template builds and snapshots through the VMM driver, holds the session
// with each guest agent, forks, hibernates, wakes and snapshots them, keeps
// volume files, ends them on their deadline (a service machine has none),
// hibernates idle ones, and after a restart re-attaches to the VMs that
// are still running and removes what is left of the others, deciding from
// its own host-local records (hoststate). It implements hostapi.Host: it
// imports no store, mints no ids and knows no teams; the caller
// (internal/sandboxes) passes what a machine needs and turns results and
// events into records. In single-node mode it runs inside the server.
package hostagent

import (
	"context"
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
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Snapshots finds what a template is restored from.
type Snapshots interface {
	Snapshot(ctx context.Context, name string) (vmm.Snapshot, pandastack.Template, error)
}

// Config configures an Agent.
type Config struct {
	Host      string
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
	// Archive, if set, fetches exported snapshots back from object storage
	// when their files are gone from the host (archive.go).
	Archive SnapshotArchive
	// StateDir keeps the host's own records of its machines (hoststate),
	// from which a restart re-attaches them; "" keeps none (every restart
	// is then fresh: the caller adopts what it knows).
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
	// starts admits the operations that start VMs until Close (starts.go).
	starts starts
	// state is the host's records (nil without Config.StateDir);
	// freshState: it had none when this agent started.
	state      *hoststate.Dir
	freshState bool
	// events carries what happens to machines to the caller (Events);
	// closed by Close. inv is what Start found; unclaimed are running
	// VMs no record claims, held until Settle.
	events      chan hostapi.Event
	inv         hostapi.Inventory
	unclaimed   map[string]vmm.VM
	closeEvents sync.Once
}

var _ hostapi.Host = (*Agent)(nil)

// sandbox is a live machine on this host.
type sandbox struct {
	op       sync.Mutex // serialises hibernate and wake
	mu       sync.Mutex
	rec      hostapi.Machine
	vm       vmm.VM // nil while hibernated
	client   *guestconn.Client
	sleeping bool // the VM is being hibernated: its exit is expected
	volumes  bool // durable volumes are attached: sync the guest before a kill
	// lastUsed and busy are its activity (see idle.go); autoHib is set
	// while an auto-hibernation of it is under way.
	lastUsed time.Time
	busy     int
	autoHib  bool
	// expiring is set while its hibernation at its deadline is under way.
	expiring bool
	// unwatch ends the watch of its current VM (closed at hibernate: a
	// parked process outlives it, and a wake watches it anew).
	unwatch chan struct{}
}

// newSandbox is a live sandbox whose idle time starts now.
func newSandbox(rec hostapi.Machine, v vmm.VM, client *guestconn.Client) *sandbox {
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
	return &Agent{cfg: cfg, log: cfg.Logger, sbx: map[string]*sandbox{},
		events: make(chan hostapi.Event, 1024), unclaimed: map[string]vmm.VM{}}
}

// Name is the host's name.
func (a *Agent) Name() string { return a.cfg.Host }

// Accel is the accelerator this host's VMs run under.
func (a *Agent) Accel() pandastack.Accel { return a.cfg.Driver.Accel() }

// Events delivers what happens to machines without a request; it is
// closed by Close. Exactly one caller drains it.
func (a *Agent) Events(ctx context.Context) <-chan hostapi.Event { return a.events }

// emit reports a change to machine m.
func (a *Agent) emit(kind hostapi.EventKind, m hostapi.Machine, idle bool) {
	a.events <- hostapi.Event{Kind: kind, Machine: m, Idle: idle}
}

// Start reconciles with what survived an earlier run (Inventory reports
// it; Settle finishes it), then runs the deadline reaper until Close.
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

// Create starts machine spec.ID from its template build (or snapshot)
// and waits for its agent.
func (a *Agent) Create(ctx context.Context, spec hostapi.MachineSpec) (hostapi.Machine, error) {
	end, err := a.starts.begin()
	if err != nil {
		return hostapi.Machine{}, err
	}
	defer end()
	if spec.ID == "" {
		return hostapi.Machine{}, pandastack.Errorf(pandastack.EInvalid, "a machine needs an id")
	}
	if spec.Snapshot != nil {
		if len(spec.Volumes) > 0 {
			return a.createKeepingVolumes(ctx, spec) // snapvolumes.go
		}
		return a.createFromSnapshot(ctx, spec)
	}
	t0 := time.Now()
	snap, tpl, err := a.templateSnapshot(ctx, spec)
	if err != nil {
		return hostapi.Machine{}, err
	}
	// Pools are kept for templates at their own size only: a pool per size
	// variant any team asks for would keep idle QEMUs forever.
	if a.cfg.PoolSize > 0 && spec.CPUs == 0 && spec.MemoryMiB == 0 && spec.DiskGiB == 0 {
		a.cfg.Driver.Prewarm(snap, a.cfg.PoolSize)
	}
	if len(spec.Volumes) > pandastack.MaxVolumeMounts || len(spec.Volumes) > snap.Machine.VolumeSlots {
		if snap.Machine.VolumeSlots == 0 {
			return hostapi.Machine{}, pandastack.Errorf(pandastack.EInvalid,
				"template %s was baked before volumes existed: rebuild it to mount volumes", tpl.Name)
		}
		return hostapi.Machine{}, pandastack.Errorf(pandastack.EInvalid, "at most %d volumes per sandbox", snap.Machine.VolumeSlots)
	}
	if len(spec.Volumes) > 0 {
		if snap.Volumes, err = a.volumeSlots(spec.Volumes); err != nil {
			return hostapi.Machine{}, err
		}
	}
	v, err := a.cfg.Driver.Restore(ctx, snap, vmm.RestoreOptions{ID: spec.ID, Network: startPolicy(spec.Network)})
	if err != nil {
		return hostapi.Machine{}, &pandastack.Error{Code: pandastack.EUnavailable, Message: "could not start the sandbox VM", Err: err}
	}
	tRestored := time.Since(t0)
	client, err := a.connect(ctx, v)
	if err != nil {
		v.Kill(context.Background())
		return hostapi.Machine{}, &pandastack.Error{Code: pandastack.EUnavailable, Message: "the sandbox did not become ready", Err: err}
	}
	tReady := time.Since(t0)
	if len(spec.Volumes) > 0 {
		if err := a.mountVolumes(ctx, client, tpl, spec.Volumes); err != nil {
			client.Close()
			v.Kill(context.Background())
			return hostapi.Machine{}, err
		}
	}
	m, err := a.record(ctx, v, client, spec, tpl, snap.Machine.CPUs, snap.Machine.MemoryMiB)
	if err != nil {
		return m, err
	}
	a.log.Info("sandbox created", "sandbox", m.ID, "template", spec.Template,
		"restore_ms", ms(tRestored), "ready_ms", ms(tReady), "ms", ms(time.Since(t0)), "accel", a.Accel())
	return m, nil
}

// register connects to a restored VM's agent and records the machine;
// with spec.DeferSession its session begins at the guest's first use.
func (a *Agent) register(ctx context.Context, v vmm.VM, spec hostapi.MachineSpec, tpl pandastack.Template, cpus, mem int) (hostapi.Machine, error) {
	connect := a.connect
	if spec.DeferSession && len(spec.Volumes) == 0 {
		connect = a.deferSession
	}
	client, err := connect(ctx, v)
	if err != nil {
		v.Kill(context.Background())
		return hostapi.Machine{}, &pandastack.Error{Code: pandastack.EUnavailable, Message: "the sandbox did not become ready", Err: err}
	}
	return a.record(ctx, v, client, spec, tpl, cpus, mem)
}

// record keeps a new live machine (on the host's records) and starts
// watching its VM.
func (a *Agent) record(ctx context.Context, v vmm.VM, client *guestconn.Client, spec hostapi.MachineSpec, tpl pandastack.Template, cpus, mem int) (hostapi.Machine, error) {
	now := time.Now().UTC()
	m := hostapi.Machine{
		ID: v.ID(), Template: tpl.Name, TemplateID: tpl.ID, State: pandastack.StateRunning,
		Host: a.cfg.Host, Accel: a.Accel(), Env: spec.Env,
		CPUs: cpus, MemoryMiB: mem, DiskMiB: tpl.DiskMiB, TemplateVersion: tpl.Version, CreatedAt: now, ExpiresAt: spec.Lifetime.Expiry(now, spec.TTL),
		AutoHibernateSeconds: spec.AutoHibernateSeconds, Lifetime: spec.Lifetime, Volumes: spec.Volumes,
		OnExpiry: spec.OnExpiry, TTL: spec.TTL,
		Defaults: &tpl.Defaults, // captured once: execs do not read the template again
		Seq:      1,
	}
	if spec.TemplateVersion > 0 {
		m.TemplateVersion = spec.TemplateVersion
	}
	s := newSandbox(m, v, client)
	s.volumes = len(spec.Volumes) > 0
	if err := a.applyNetwork(ctx, m.ID, spec.Network); err != nil {
		client.Close()
		v.Kill(context.Background())
		a.forgetNetwork(m.ID)
		return hostapi.Machine{}, err
	}
	if err := a.saveState(s); err != nil {
		client.Close()
		v.Kill(context.Background())
		a.forgetNetwork(m.ID)
		return hostapi.Machine{}, err
	}
	a.mu.Lock()
	a.sbx[m.ID] = s
	a.mu.Unlock()
	go a.watch(s)
	return m, nil
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
	c, err := dialAgent(ctx, v)
	if err != nil {
		return nil, err
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
	settle(a.log, v)
	return client, nil
}

// deferSession connects the VM's agent transport and returns a session
// that begins at its first use (guestconn.Conn.Deferred): until then the
// guest runs none of the agent's code. The caps that hold from the
// guest's first answer are put on at the session's begin or the direct
// port's first answer (direct.go), whichever comes first.
func (a *Agent) deferSession(ctx context.Context, v vmm.VM) (*guestconn.Client, error) {
	c, err := dialAgent(ctx, v)
	if err != nil {
		return nil, err
	}
	return c.Deferred(a.cfg.ReadyTimeout, func() { settle(a.log, v) }), nil
}

// dialAgent connects the transport to v's agent.
func dialAgent(ctx context.Context, v vmm.VM) (*guestconn.Conn, error) {
	if ac, ok := v.(agentConner); ok {
		nc, err := ac.AgentConn(ctx)
		if err != nil {
			return nil, fmt.Errorf("connect agent: %w", err)
		}
		return guestconn.NewConn(nc), nil
	}
	return guestconn.Dial(ctx, v.AgentSocket())
}

// settle puts on v's caps that hold from its guest's first answer,
// logging to log when they could not be.
func settle(log *slog.Logger, v vmm.VM) {
	if st, ok := v.(settler); ok {
		if err := st.Settle(); err != nil {
			log.Warn("vm caps after its guest answered", "vm", v.ID(), "err", err)
		}
	}
}

// settler is implemented by VMs with caps that hold from their guest's
// first answer, not from the restore (the qemu driver's read cap).
type settler interface {
	Settle() error
}

// watch notices a VM that died on its own.
func (a *Agent) watch(s *sandbox) {
	s.mu.Lock()
	v := s.vm
	stop := make(chan struct{})
	if v != nil {
		s.unwatch = stop
	}
	s.mu.Unlock()
	if v == nil {
		return
	}
	select {
	case <-v.Exited():
	case <-stop:
		return
	}
	a.mu.Lock()
	cur := a.sbx[s.rec.ID]
	a.mu.Unlock()
	s.mu.Lock()
	expected := s.sleeping || s.vm != v
	s.mu.Unlock()
	if cur == s && !expected {
		a.log.Warn("sandbox vm exited unexpectedly", "sandbox", s.rec.ID)
		_, _ = a.end(context.Background(), s, pandastack.StateFailed, "the VM process exited", hostapi.EventExited)
	}
}

// get returns a live machine, or hostapi.Unknown.
func (a *Agent) get(ctx context.Context, id string) (*sandbox, error) {
	a.mu.Lock()
	s := a.sbx[id]
	a.mu.Unlock()
	if s != nil {
		return s, nil
	}
	return nil, hostapi.Unknown(id)
}

// List is the machines the host holds now.
func (a *Agent) List(ctx context.Context) ([]hostapi.Machine, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]hostapi.Machine, 0, len(a.sbx))
	for _, s := range a.sbx {
		s.mu.Lock()
		out = append(out, s.rec)
		s.mu.Unlock()
	}
	return out, nil
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
	g := &guest{Client: s.client, env: s.rec.Env, s: s, log: a.log}
	a.templateDefaults(ctx, g, s)
	return g, nil
}

type guest struct {
	*guestconn.Client
	env           map[string]string
	workdir, user string   // the template's defaults
	s             *sandbox // held busy while a call runs (idle.go)
	log           *slog.Logger
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

// Kill ends a machine and returns it as it ended. An unclaimed VM (see
// Inventory) is killed too.
func (a *Agent) Kill(ctx context.Context, req hostapi.KillRequest) (hostapi.Machine, error) {
	s, err := a.get(ctx, req.ID)
	if err != nil {
		a.mu.Lock()
		v := a.unclaimed[req.ID]
		delete(a.unclaimed, req.ID)
		a.mu.Unlock()
		if v != nil {
			return hostapi.Machine{ID: req.ID, Host: a.cfg.Host, State: req.State}, v.Kill(ctx)
		}
		return hostapi.Machine{}, err
	}
	state := req.State
	if state == "" || state.Live() {
		state = pandastack.StateKilled
	}
	return a.end(ctx, s, state, req.Reason, hostapi.EventEnded)
}

// end stops the VM, removes its files and the host's record of it, and
// reports the end (an event of kind; the machine as it ended).
func (a *Agent) end(ctx context.Context, s *sandbox, state pandastack.SandboxState, why string, kind hostapi.EventKind) (hostapi.Machine, error) {
	a.mu.Lock()
	if a.sbx[s.rec.ID] != s {
		a.mu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.rec, nil
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
	a.forgetNetwork(s.rec.ID)
	a.dropState(s.rec.ID)
	s.mu.Lock()
	now := time.Now().UTC()
	s.rec.State, s.rec.EndedAt, s.rec.EndReason = state, &now, why
	if why == "" {
		s.rec.EndReason = string(state)
	}
	s.rec.Seq++
	m := s.rec
	s.mu.Unlock()
	a.log.Info("sandbox ended", "sandbox", m.ID, "state", state, "reason", m.EndReason)
	a.emit(kind, m, false)
	return m, kerr
}

// SetDeadline moves a machine's deadline. A service machine has none.
func (a *Agent) SetDeadline(ctx context.Context, req hostapi.DeadlineRequest) (hostapi.Machine, error) {
	s, err := a.get(ctx, req.ID)
	if err != nil {
		return hostapi.Machine{}, err
	}
	s.mu.Lock()
	if s.rec.Lifetime.IsService() && !req.ExpiresAt.IsZero() {
		s.mu.Unlock()
		return s.rec, pandastack.NoTTLError(req.ID)
	}
	s.rec.ExpiresAt = req.ExpiresAt.UTC()
	s.rec.Seq++
	m := s.rec
	s.mu.Unlock()
	a.keepState(s)
	return m, nil
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
		var due, sleep []*sandbox
		a.mu.Lock()
		for _, s := range a.sbx {
			s.mu.Lock()
			switch {
			case !expired(s.rec, now):
			case s.rec.OnExpiry.Hibernates():
				if !s.expiring {
					s.expiring = true
					sleep = append(sleep, s)
				}
			default:
				due = append(due, s)
			}
			s.mu.Unlock()
		}
		a.mu.Unlock()
		a.hibernateExpired(ctx, sleep)
		for _, s := range due {
			if _, err := a.end(ctx, s, pandastack.StateExpired, "ttl expired", hostapi.EventExpired); err != nil {
				a.log.Error("expire sandbox", "sandbox", s.rec.ID, "err", err)
			}
		}
		a.autoHibernate(ctx, time.Now())
	}
}

// expired reports whether rec's TTL ran out by now. A record without an
// expiry (a service machine) never expires.
func expired(rec hostapi.Machine, now time.Time) bool {
	return !rec.ExpiresAt.IsZero() && now.After(rec.ExpiresAt)
}

// Close stops the reaper. With killAll, every machine on the host is ended
// too (each reported as an event); otherwise they keep running and the
// next Start re-attaches to them. It closes the event channel last.
func (a *Agent) Close(ctx context.Context, killAll bool) error {
	// What is being started is in the table before it is looked at.
	a.starts.close()
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
			_, err := a.end(ctx, s, pandastack.StateKilled, "host shut down", hostapi.EventEnded)
			errs = append(errs, err)
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
	a.mu.Lock()
	for id, v := range a.unclaimed { // Settle never came
		v.Release()
		delete(a.unclaimed, id)
	}
	a.mu.Unlock()
	errs = append(errs, a.cfg.Driver.Close())
	a.bg.Wait()
	a.closeEvents.Do(func() { close(a.events) })
	return errors.Join(errs...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
