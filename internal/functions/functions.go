package functions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/router"
	"github.com/pandastack/pandastack/internal/sandboxes"
	"github.com/pandastack/pandastack/internal/secrets"
)

// Defaults and bounds of a function's settings.
const (
	DefaultTemplate       = "base"
	DefaultTimeout        = 30 * time.Second
	MaxTimeout            = time.Hour
	DefaultMaxConcurrency = 10
	MaxConcurrencyLimit   = 100
	DefaultMaxQueue       = 32
	DefaultDeployTimeout  = 3 * time.Minute
	MaxEventBytes         = 6 << 20
)

// Sandboxes creates the microVMs functions run in, counted against the
// team's quotas (sandboxes.Service).
type Sandboxes interface {
	Create(ctx context.Context, teamID string, p sandboxes.CreateParams) (pandastack.Sandbox, error)
}

// Config configures a Service.
type Config struct {
	Store     Store
	Sandboxes Sandboxes
	Engine    pandastack.Engine // guests, kills and snapshots of those microVMs
	Secrets   *secrets.Box      // seals each version's env
	// Records lists sandboxes: at start, the function VMs a previous run
	// left (nil: none are looked for).
	Records interface {
		ListSandboxes(ctx context.Context, f pandastack.SandboxFilter) ([]pandastack.Sandbox, error)
	}
	Logger *slog.Logger // nil: discard
	// Routes, when set, serves each function's HTTP trigger at
	// fn-NAME.Domain; StatusFor maps error codes to HTTP statuses there
	// (api.StatusForCode).
	Routes    *router.Table
	Domain    string
	StatusFor func(code string) int
	// MaxBundleBytes bounds an upload (default DefaultMaxBundleBytes).
	MaxBundleBytes int64
	// MaxQueue bounds the invocations of one function waiting for a slot
	// (default DefaultMaxQueue); past it an invoke answers 429.
	MaxQueue int
	// DeployTimeout bounds a deploy's bake (default DefaultDeployTimeout).
	DeployTimeout time.Duration
	// Prewarm, when set, keeps n processes ready to restore snapshot id
	// with its memory already in place (0: drops them); see prewarm.go.
	// PrewarmSize is that n (0: none), PrewarmVersions how many versions
	// (the most recently deployed or invoked) keep theirs (default
	// DefaultPrewarmVersions).
	Prewarm         func(ctx context.Context, snapshotID string, n int) error
	PrewarmSize     int
	PrewarmVersions int
	// MaxStarting bounds the invocation VMs starting at once on this host
	// (default DefaultMaxStarting per core); see starts.go.
	MaxStarting int
	// Resolve finds the build a team's template reference names (with its
	// owner, "" for a public one), and Snapshots lists snapshots ("" for
	// every team's): with both, deploys restore a runtime base instead of
	// starting their runtime (base.go). Either nil: no bases.
	Resolve   func(ctx context.Context, teamID, ref string) (pandastack.Template, error)
	Snapshots interface {
		ListSnapshots(ctx context.Context, teamID string) ([]pandastack.Snapshot, error)
	}
	// NodeHelloAddon is the Node shim's hello addon, compiled
	// (shim/hello.c; scripts/setup builds it): with it a fresh Node VM's
	// shim does the restore's hello itself, as Python's does (hello.go).
	// Empty: Node VMs wait for the guest agent's hello.
	NodeHelloAddon []byte
}

// Service deploys and invokes functions. Create it with New.
type Service struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	gates map[string]*gate // by function id
	pools map[string]*pool // warm microVMs, by function id
	async sync.WaitGroup
	// stopping ends when Close is called: the invocations in flight end
	// with it (asynchronous ones, cron's, and synchronous ones whose
	// callers the HTTP server's shutdown left running).
	stopping context.Context
	stop     context.CancelFunc

	teardowns sync.WaitGroup // invocation VMs being killed (teardown.go)
	// prewarmed are the snapshots with prepared processes, the most
	// recently invoked last (prewarm.go); guarded by mu.
	prewarmed []prewarmedVersion
	// bases are the runtime bases (base.go); guarded by mu.
	bases map[baseKey]*baseEntry
	// starting holds a token per invocation VM starting (starts.go).
	starting chan struct{}
	// shims go into every function's VM (shim.go).
	shims shimSet
	// helloless are the snapshots whose shim could not do the hello's
	// part (hello.go): their calls go to the agent's hello at once.
	helloless sync.Map
}

// New returns a Service for cfg, filling in defaults.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBundleBytes <= 0 {
		cfg.MaxBundleBytes = DefaultMaxBundleBytes
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = DefaultMaxQueue
	}
	if cfg.DeployTimeout <= 0 {
		cfg.DeployTimeout = DefaultDeployTimeout
	}
	if cfg.PrewarmVersions <= 0 {
		cfg.PrewarmVersions = DefaultPrewarmVersions
	}
	if cfg.MaxStarting <= 0 {
		cfg.MaxStarting = defaultMaxStarting()
	}
	stopping, stop := context.WithCancel(context.Background())
	return &Service{cfg: cfg, log: cfg.Logger, gates: map[string]*gate{}, pools: map[string]*pool{}, bases: map[baseKey]*baseEntry{},
		starting: make(chan struct{}, cfg.MaxStarting), stopping: stopping, stop: stop, shims: newShimSet(cfg.NodeHelloAddon)}
}

// MaxBundleBytes is the largest bundle a deploy takes.
func (s *Service) MaxBundleBytes() int64 { return s.cfg.MaxBundleBytes }

var (
	nameRE    = regexp.MustCompile(`^[a-z][a-z0-9-]{0,61}[a-z0-9]$|^[a-z]$`)
	handlerRE = regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9_./-]*)\.([A-Za-z_$][A-Za-z0-9_$]*)$`)
)

// CheckName checks a function name: a DNS label (it is served at
// fn-NAME.DOMAIN), lower case.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return pandastack.Errorf(pandastack.EInvalid, "name must be 1-63 lower-case letters, digits and '-', starting with a letter, got %q", name)
	}
	return nil
}

// splitHandler splits FILE.FUNCTION.
func splitHandler(h string) (file, function string, err error) {
	m := handlerRE.FindStringSubmatch(h)
	if m == nil || strings.Contains(m[1], "..") || strings.HasPrefix(m[1], "/") {
		return "", "", pandastack.Errorf(pandastack.EInvalid, "handler must be FILE.FUNCTION (e.g. main.handler), got %q", h)
	}
	return strings.TrimSuffix(strings.TrimSuffix(m[1], ".py"), ".js"), m[2], nil
}

// DeployParams is a deploy as a user asks for it.
type DeployParams struct {
	Name           string
	Runtime        string
	Handler        string
	Env            map[string]string
	TimeoutSeconds int
	MemoryMiB      int
	MaxConcurrency int
	Template       string // default "base"
	HTTPPublic     bool   // the HTTP trigger needs no API key
	Isolation      string // "fresh" (default) or "warm"
	Bundle         []byte
}

// Deploy checks p, bakes its bundle into a snapshot and records it as the
// function's newest version. A handler that does not load is EInvalid with
// the runtime's error (the traceback). Nothing is left behind on error:
// the bake's VM is killed and a snapshot not recorded is deleted.
func (s *Service) Deploy(ctx context.Context, teamID string, p DeployParams) (Function, error) {
	bad := func(format string, args ...any) (Function, error) {
		return Function{}, pandastack.Errorf(pandastack.EInvalid, format, args...)
	}
	if err := CheckName(p.Name); err != nil {
		return Function{}, err
	}
	if p.Runtime != RuntimePython && p.Runtime != RuntimeNode {
		return bad("runtime must be python or node, got %q", p.Runtime)
	}
	file, function, err := splitHandler(p.Handler)
	if err != nil {
		return Function{}, err
	}
	timeout := DefaultTimeout
	if p.TimeoutSeconds != 0 {
		if p.TimeoutSeconds < 1 || time.Duration(p.TimeoutSeconds)*time.Second > MaxTimeout {
			return bad("timeout_seconds must be between 1 and %d, got %d", int(MaxTimeout/time.Second), p.TimeoutSeconds)
		}
		timeout = time.Duration(p.TimeoutSeconds) * time.Second
	}
	conc := DefaultMaxConcurrency
	if p.MaxConcurrency != 0 {
		if p.MaxConcurrency < 1 || p.MaxConcurrency > MaxConcurrencyLimit {
			return bad("max_concurrency must be between 1 and %d, got %d", MaxConcurrencyLimit, p.MaxConcurrency)
		}
		conc = p.MaxConcurrency
	}
	if err := pandastack.CheckEnv(p.Env); err != nil {
		return Function{}, err
	}
	switch p.Isolation {
	case "":
		p.Isolation = IsolationFresh
	case IsolationFresh, IsolationWarm:
	default:
		return bad("isolation must be fresh or warm, got %q", p.Isolation)
	}
	if err := pandastack.CheckSize(0, p.MemoryMiB, 0); err != nil {
		return Function{}, err
	}
	if int64(len(p.Bundle)) > s.cfg.MaxBundleBytes {
		return Function{}, pandastack.Errorf(pandastack.ETooLarge, "bundle is %d bytes; at most %d are allowed", len(p.Bundle), s.cfg.MaxBundleBytes)
	}
	b, err := readBundle(p.Bundle, s.shims)
	if err != nil {
		return Function{}, err
	}
	if !hasHandlerFile(b, p.Runtime, file) {
		ext := ".py"
		if p.Runtime == RuntimeNode {
			ext = ".js (or .mjs, .cjs)"
		}
		return bad("handler file %s%s not found in the bundle", file, ext)
	}
	tmpl := p.Template
	if tmpl == "" {
		tmpl = DefaultTemplate
	}
	var snap pandastack.Snapshot
	if base := s.runtimeBase(ctx, teamID, tmpl, p.Runtime, p.MemoryMiB); base != "" {
		snap, err = s.bakeOnBase(ctx, teamID, p.Name, p.Runtime, base, b, file, function, p.Env)
		if errors.Is(err, errBaseGone) {
			// Its files are gone or its shim is dead: drop it (record
			// too), so the next deploy bakes another.
			s.log.Warn("dropping a runtime base that does not serve", "snapshot", base, "err", err)
			s.forgetBase(base)
			if s.cfg.Prewarm != nil {
				s.dropPrewarmed(ctx, []string{base})
			}
			s.dropSnapshot(ctx, base)
			snap, err = s.bake(ctx, teamID, p.Name, p.Runtime, tmpl, p.MemoryMiB, b, shimCommand(p.Runtime, file, function), p.Env)
		}
	} else {
		snap, err = s.bake(ctx, teamID, p.Name, p.Runtime, tmpl, p.MemoryMiB, b, shimCommand(p.Runtime, file, function), p.Env)
	}
	if err != nil {
		return Function{}, err
	}
	v := Version{Runtime: p.Runtime, Handler: p.Handler, Timeout: timeout, MemoryMiB: p.MemoryMiB, MaxConcurrency: conc, HTTPPublic: p.HTTPPublic, Isolation: p.Isolation,
		SnapshotID: snap.ID, BundleSHA256: b.sha256, BundleBytes: b.size, CreatedAt: time.Now().UTC()}
	if len(p.Env) > 0 {
		plain, _ := json.Marshal(p.Env)
		if v.EnvSealed, err = s.cfg.Secrets.Seal(string(plain), envAAD(snap.ID)); err != nil {
			s.dropSnapshot(ctx, snap.ID)
			return Function{}, fmt.Errorf("seal env of function %s: %w", p.Name, err)
		}
	}
	f, err := s.cfg.Store.AddFunctionVersion(ctx, teamID, p.Name, pandastack.NewID("fn_"), v)
	if err != nil {
		s.dropSnapshot(ctx, snap.ID)
		return Function{}, fmt.Errorf("record function %s: %w", p.Name, err)
	}
	s.route(f)
	s.drainWarm(ctx, f.ID, snap.ID)
	if v.Isolation == IsolationFresh {
		s.prewarm(context.WithoutCancel(ctx), f.ID, snap.ID)
	} else {
		s.unprewarm(context.WithoutCancel(ctx), f.ID)
	}
	s.log.Info("function deployed", "function", f.ID, "name", f.Name, "version", f.LatestVersion, "snapshot", snap.ID)
	return s.present(f), nil
}

// envAAD binds a version's sealed env to its snapshot (unique per version).
func envAAD(snapshotID string) string { return "fn:" + snapshotID + ":env" }

func hasHandlerFile(b *bundle, runtime, file string) bool {
	exts := []string{".py"}
	if runtime == RuntimeNode {
		exts = []string{".js", ".mjs", ".cjs"}
	}
	for _, e := range exts {
		if b.files[file+e] {
			return true
		}
	}
	return false
}

// present fills what a version shows of its env (the names, never
// values) and its trigger's URL.
func (s *Service) present(f Function) Function {
	f.URL = s.url(f)
	f.Latest.EnvKeys = []string{}
	if f.Latest.EnvSealed == "" {
		return f
	}
	plain, err := s.cfg.Secrets.Open(f.Latest.EnvSealed, envAAD(f.Latest.SnapshotID))
	var env map[string]string
	if err == nil && json.Unmarshal([]byte(plain), &env) == nil {
		for k := range env {
			f.Latest.EnvKeys = append(f.Latest.EnvKeys, k)
		}
		sort.Strings(f.Latest.EnvKeys)
	}
	return f
}

// Get returns team's function name.
func (s *Service) Get(ctx context.Context, teamID, name string) (Function, error) {
	f, err := s.cfg.Store.GetFunction(ctx, teamID, name)
	if err != nil {
		return f, err
	}
	return s.present(f), nil
}

// List returns team's functions.
func (s *Service) List(ctx context.Context, teamID string) ([]Function, error) {
	fs, err := s.cfg.Store.ListFunctions(ctx, teamID)
	for i := range fs {
		fs[i] = s.present(fs[i])
	}
	return fs, err
}

// Delete removes team's function name: its queued invocations fail, its
// records go, then its versions' snapshots.
func (s *Service) Delete(ctx context.Context, teamID, name string) error {
	f, err := s.cfg.Store.GetFunction(ctx, teamID, name)
	if err != nil {
		return err
	}
	versions, err := s.cfg.Store.ListFunctionVersions(ctx, f.ID)
	if err != nil {
		return err
	}
	s.closeGate(f.ID)
	if err := s.cfg.Store.DeleteFunction(ctx, f.ID); err != nil {
		return err
	}
	s.unroute(teamID, f.Name)
	s.drainWarm(ctx, f.ID, "")
	s.unprewarm(ctx, f.ID)
	for _, v := range versions {
		s.dropSnapshot(ctx, v.SnapshotID)
	}
	s.log.Info("function deleted", "function", f.ID, "name", f.Name)
	return nil
}

func (s *Service) dropSnapshot(ctx context.Context, id string) {
	if err := s.cfg.Engine.DeleteSnapshot(context.WithoutCancel(ctx), id); err != nil {
		s.log.Error("delete function snapshot", "snapshot", id, "err", err)
	}
}

// GetInvocation returns one of team's function's invocations.
func (s *Service) GetInvocation(ctx context.Context, teamID, name, id string) (Invocation, error) {
	f, err := s.cfg.Store.GetFunction(ctx, teamID, name)
	if err != nil {
		return Invocation{}, err
	}
	inv, err := s.cfg.Store.GetInvocation(ctx, f.ID, id)
	inv.Function = f.Name
	return inv, err
}

// Wait waits for the asynchronous invocations in flight and for the kills
// of the VMs of those that ended.
func (s *Service) Wait() {
	s.async.Wait()
	s.teardowns.Wait()
}

// Close, at a server's stop, ends the invocations in flight (each
// recorded as an error, ServerStopped; its VM killed) and waits until the
// asynchronous ones and the kills of finished invocations' VMs are done,
// or ctx ends. Without it the records stayed running until the next
// start's Recover. The engine must still run: the kills go through it.
func (s *Service) Close(ctx context.Context) error {
	s.stop()
	done := make(chan struct{})
	go func() {
		s.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("functions: invocations still ending at stop: %w", ctx.Err())
	}
}

// vmLabel marks every microVM this package starts (deploys and
// invocations), so a restart can end those a crash left behind.
const vmLabel = "pandastack.function.vm"

// Recover, at start, kills the function VMs a previous server left
// running (a crash mid-invocation or mid-deploy) and marks the
// invocations it left queued or running as errors.
func (s *Service) Recover(ctx context.Context) error {
	if s.cfg.Records != nil {
		vms, err := s.cfg.Records.ListSandboxes(ctx, pandastack.SandboxFilter{Metadata: map[string]string{vmLabel: "1"}, LiveOnly: true})
		if err != nil {
			return fmt.Errorf("list function VMs: %w", err)
		}
		for _, vm := range vms {
			s.log.Info("killing a function VM left by the previous run", "sandbox", vm.ID)
			if err := s.cfg.Engine.Kill(ctx, vm.ID, pandastack.StateKilled); err != nil {
				s.log.Error("kill a function VM left by the previous run", "sandbox", vm.ID, "err", err)
			}
		}
	}
	invs, err := s.cfg.Store.UnfinishedInvocations(ctx)
	if err != nil {
		return err
	}
	for _, inv := range invs {
		now := time.Now().UTC()
		inv.Status, inv.EndedAt = StatusError, &now
		inv.Error = &FunctionError{Type: "ServerRestarted", Message: "the server stopped before this invocation ended"}
		if err := s.cfg.Store.PutInvocation(ctx, inv); err != nil {
			return err
		}
	}
	return nil
}
