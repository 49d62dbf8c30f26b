// Package server assembles a single-node PandaStack: the SQLite store, the
// QEMU driver (after probing KVM), the template builder, the host agent and
// the HTTP API, all in one process over one data directory.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/apps"
	"github.com/pandastack/pandastack/internal/ca"
	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/cron"
	"github.com/pandastack/pandastack/internal/databases"
	"github.com/pandastack/pandastack/internal/diskreserve"
	"github.com/pandastack/pandastack/internal/functions"
	"github.com/pandastack/pandastack/internal/hostagent"
	"github.com/pandastack/pandastack/internal/hostbench"
	"github.com/pandastack/pandastack/internal/network"
	"github.com/pandastack/pandastack/internal/objstore/objurl"
	"github.com/pandastack/pandastack/internal/quotas"
	"github.com/pandastack/pandastack/internal/router"
	"github.com/pandastack/pandastack/internal/sandboxes"
	"github.com/pandastack/pandastack/internal/secrets"
	"github.com/pandastack/pandastack/internal/snaparchive"
	"github.com/pandastack/pandastack/internal/store/sqlite"
	"github.com/pandastack/pandastack/internal/templates"
	"github.com/pandastack/pandastack/internal/templates/registry"
	"github.com/pandastack/pandastack/internal/vmm/qemu"
)

// Config configures a server.
type Config struct {
	DataDir   string
	CacheDir  string // build cache; default DataDir/cache
	Listen    string // e.g. 127.0.0.1:8080
	AgentPath string // pandastack-guest; default: beside this executable
	// Accel is "auto" (probe), "kvm" or "tcg".
	Accel string
	// Templates are built (or found in the cache) at start, in the background.
	Templates []string
	PoolSize  int
	// KillOnExit ends every sandbox when the server stops; otherwise they
	// keep running and the next start re-attaches to them.
	KillOnExit bool
	// SandboxDomain serves sandbox ports at PORT-ID.SandboxDomain.
	SandboxDomain string
	// StorageSize is the size of the XFS image made for VM files when the
	// data dir cannot reflink (0: the free space under it, sparse).
	StorageSize int64
	// StorageReserve is the free space kept on the VM filesystem for
	// running sandboxes: below it new allocations answer 507 (the zero
	// Spec: diskreserve's default, 5 % or 2 GiB).
	StorageReserve diskreserve.Spec
	// NoNetwork gives sandboxes no network; otherwise, when running as
	// root, each gets a network namespace (internal/network).
	NoNetwork bool
	// NetworkPool is the transit address range (default 10.223.0.0/16).
	NetworkPool string
	// DNSUpstreams are the resolvers sandboxes' DNS goes to (default: the
	// host's).
	DNSUpstreams []string
	// EgressDefaultDeny is what sandboxes may not reach unless their policy
	// names it (network.Config.EgressDefaultDeny; empty: the default).
	EgressDefaultDeny string
	// MaxLivePerTeam is the default max_sandboxes of a team (0: no cap);
	// the other default quotas are quotas.Defaults. Admins change any of
	// them per team (PUT /v1/teams/{team}/quotas).
	MaxLivePerTeam int
	// ObjectStore is the object store's URL (file:///path or
	// s3://bucket/prefix?endpoint=…; default file://DATA/objects). The
	// server refuses to start when it does not answer. With s3, every new
	// snapshot is exported there in the background.
	ObjectStore string
	// TLSListen, when set, is the address of the SNI listener: TLS for
	// names under SandboxDomain, terminated with the server's CA (or passed
	// through, per route). Empty: no TLS listener.
	TLSListen string
	// MaxConnsPerClient caps the connections one client address holds on
	// each listener (0: DefaultMaxConnsPerClient; below 0: no cap).
	MaxConnsPerClient int
	// DBMaxConnsPerClient caps them on the database router instead (0:
	// DefaultDBMaxConnsPerClient; below 0: no cap).
	DBMaxConnsPerClient int
	// TLSReady, if set, is called with the TLS listener's address.
	TLSReady func(addr string)
	// MaxServicePerTeam is the default max_service_machines of a team (0:
	// no cap).
	MaxServicePerTeam int
	Logger            *slog.Logger
	// Ready, if set, is called with the listening address once serving.
	Ready func(addr string)

	// MaxBuildsPerTeam caps the custom template builds a team (any key but
	// an admin's) runs at once (0: registry.DefaultMaxBuildsPerTeam).
	MaxBuildsPerTeam int

	// ExtraCACerts are PEM files of CA certificates every new sandbox (app
	// builds included) trusts besides its own (internal/cacerts).
	ExtraCACerts []string
	// GitAllow lists ranges apps may be cloned from although they are the
	// server's own networks (apps.GitGuard).
	GitAllow []netip.Prefix
	// ParkFor is how long a hibernated sandbox's VMM process is kept,
	// stopped, for a quick wake (qemu.Config.ParkFor: 0 the default,
	// negative never).
	ParkFor time.Duration
	// AppRollbackWindow is how long a replaced app release runs on for a
	// fast rollback before it hibernates (apps.Config.RollbackWindow).
	AppRollbackWindow time.Duration
	// DBListen, when set, is the address of the database router
	// (internal/pgrouter): PostgreSQL clients of every database on one
	// port. Empty: databases cannot be created.
	DBListen string
	// DBDomain is the parent of databases' host names (<id>.DBDomain;
	// default db.SandboxDomain), under SandboxDomain.
	DBDomain string
	// DBReady, if set, is called with the database router's address.
	DBReady func(addr string)
	// DBBackupSchedule is when databases' base backups are due
	// (internal/cron syntax; "" is @daily, "off" none but on demand);
	// DBBackupRetention how long backups and WAL are kept (0: 7 days).
	DBBackupSchedule  string
	DBBackupRetention time.Duration
	// DBBackupNoVerify: base backups are not restored in a throwaway
	// machine to verify them.
	DBBackupNoVerify bool
}

// Server is a running single-node PandaStack.
type Server struct {
	cfg     Config
	log     *slog.Logger
	store   *sqlite.Store
	builder *templates.Builder
	agent   *hostagent.Agent
	engine  *sandboxes.Engine
	net     *network.Manager // nil without sandbox networking
	// proxySecret signs port URLs (DATA/proxy-secret).
	proxySecret []byte
	probe       qemu.ProbeResult
	cow         *cowfs.FS
	archive     *snaparchive.Archive

	// quotas holds every team's limits; the API and (later) the sandbox
	// service reserve through it.
	quotas *quotas.Service
	// reserve is the free space kept on the VM filesystem (DATA/cow).
	reserve *diskreserve.Reserve
	// ca issues the TLS listener's certificates (nil if it could not be
	// opened and no TLS listener needs it).
	ca *ca.CA
	// routes is the table services register hostnames in; hosts serves
	// HTTP for sandbox ports and those hostnames.
	routes *router.Table
	hosts  *router.HTTPRouter

	mu     sync.Mutex
	builds map[string]string // template → "building", "ready" or an error

	// registry keeps templates per team in the store (builder holds the
	// builds' files); see templates.go.
	registry *registry.Registry

	// bench measures restore floors and VM processes' cost for the
	// bench's admin routes.
	bench *hostbench.Bench

	// secrets seals what services keep for tenants and must read back
	// (database passwords, app and function env) before it reaches the
	// store; its key is DATA/secret.key.
	secrets *secrets.Box

	// extraCA is the PEM of Config.ExtraCACerts (nil: none).
	extraCA []byte
	// apps hosts git-driven apps (apps.go).
	apps *apps.Service
	// fns and cron are serverless functions and their schedules
	// (functions.go).
	fns  *functions.Service
	cron *cron.Service
	// databases is the managed PostgreSQL service (internal/databases).
	databases *databases.Service
}

// FindAgent locates the pandastack-guest binary: beside the running
// executable, then on PATH.
func FindAgent() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "pandastack-guest")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("pandastack-guest")
	if err != nil {
		return "", fmt.Errorf("pandastack-guest not found beside the pandastack binary or on PATH (run scripts/setup, which builds bin/pandastack and bin/pandastack-guest, or pass --guest-agent PATH)")
	}
	return filepath.Abs(p)
}

// Run serves until ctx is cancelled.
func Run(ctx context.Context, cfg Config) error {
	s, err := Open(ctx, cfg)
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}

// Open prepares everything but the listener: store, admin key, accelerator
// probe, driver, host agent (reconciled).
func Open(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger
	if cfg.AgentPath == "" {
		p, err := FindAgent()
		if err != nil {
			return nil, err
		}
		cfg.AgentPath = p
	}
	if err := checkAgent(cfg.AgentPath); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o711); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	// VM processes run as unprivileged uids and must reach template files.
	_ = os.Chmod(cfg.DataDir, 0o711)
	// The object store first: a bad URL or credentials stop the start
	// before anything is made.
	objURL := ObjectStoreURL(cfg.DataDir, cfg.ObjectStore)
	objects, err := OpenObjectStore(ctx, objURL)
	if err != nil {
		return nil, err
	}
	log.Info("object store", "url", objurl.Redact(objURL), "auto_export", objurl.Remote(objURL))
	store, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, "pandastack.db"))
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// The database holds key hashes and every team's sandboxes: owner only.
	for _, f := range []string{"pandastack.db", "pandastack.db-wal", "pandastack.db-shm"} {
		if err := os.Chmod(filepath.Join(cfg.DataDir, f), 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			store.Close()
			return nil, fmt.Errorf("protect database: %w", err)
		}
	}
	s := &Server{cfg: cfg, log: log, store: store, builds: map[string]string{}, routes: router.NewTable()}
	defaults := quotas.Defaults
	defaults.MaxSandboxes = cfg.MaxLivePerTeam
	defaults.MaxServiceMachines = cfg.MaxServicePerTeam
	if cfg.MaxBuildsPerTeam > 0 {
		defaults.MaxConcurrentBuilds = cfg.MaxBuildsPerTeam
	}
	ok := false
	defer func() {
		if !ok {
			if s.cow != nil {
				// Mounted by this start and used by nothing yet: a failed
				// start leaves no loop mount behind.
				if err := s.cow.Close(); err != nil {
					log.Warn("unmount vm storage after a failed start", "err", err)
				}
			}
			store.Close()
		}
	}()
	if s.secrets, err = secrets.LoadOrCreate(filepath.Join(cfg.DataDir, "secret.key")); err != nil {
		return nil, err
	}
	if s.extraCA, err = loadExtraCA(cfg.ExtraCACerts, log); err != nil {
		return nil, err
	}
	key, created, err := api.Bootstrap(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("bootstrap admin key: %w", err)
	}
	if created {
		if err := writeAdminKey(cfg.DataDir, key, log); err != nil {
			return nil, err
		}
	}
	// Every VM file (templates, running VMs, snapshots, hibernated
	// sandboxes) lives on one copy-on-write filesystem: they are copied
	// by reflink.
	cow, err := cowfs.Open(ctx, filepath.Join(cfg.DataDir, "cow"), cowfs.Options{Size: cfg.StorageSize, Logger: log,
		LoopDirectIO: os.Getenv("PANDASTACK_LOOP_DIRECT_IO") == "on"})
	if err != nil {
		return nil, fmt.Errorf("open vm storage: %w", err)
	}
	s.cow = cow
	// Below the reserve new allocations are refused (507); running
	// sandboxes write into it.
	if s.reserve, err = diskreserve.New(cow.Dir(), cfg.StorageReserve); err != nil {
		return nil, fmt.Errorf("storage reserve: %w", err)
	}
	log.Info("vm storage", "dir", cow.Dir(), "image", cow.Image(), "reserve_mib", s.reserve.Bytes()>>20)
	s.quotas = quotas.New(quotas.Config{Store: store, Defaults: defaults, Space: s.reserve,
		Counters: []quotas.Counter{func(ctx context.Context, teamID string) (quotas.Usage, error) {
			n, err := store.TemplateDiskMiB(ctx, teamID)
			return quotas.Usage{DiskMiB: n}, err
		}}})
	s.builder, err = templates.New(templates.Config{DataDir: cfg.DataDir, CacheDir: cfg.CacheDir, TemplateDir: filepath.Join(cow.Dir(), "templates"),
		AgentPath: cfg.AgentPath, Logger: log, ExtraCA: s.extraCA})
	if err != nil {
		return nil, err
	}
	if err := s.openRegistry(ctx); err != nil {
		return nil, err
	}
	s.probe, err = s.chooseAccel(ctx)
	if err != nil {
		return nil, err
	}
	log.Info("accelerator chosen", "accel", s.probe.Accel, "reason", s.probe.Reason, "isolation", s.probe.Accel.Isolation())
	if s.probe.Accel == pandastack.AccelTCG {
		log.Warn("VMs run under TCG software emulation: not a security boundary for untrusted code; use a host with working KVM in production")
	}
	uidBase := 0
	if os.Getuid() == 0 {
		uidBase = qemu.DefaultUIDBase
	}
	qcfg := qemu.Config{Dir: filepath.Join(cow.Dir(), "vms"), Accel: s.probe.Accel, UIDBase: uidBase, Logger: log, ParkFor: cfg.ParkFor}
	hcfg := hostagent.Config{Templates: s.builder, Logger: log, PoolSize: cfg.PoolSize,
		HibernateDir: filepath.Join(cow.Dir(), "hibernated"), SnapshotDir: filepath.Join(cow.Dir(), "snapshots"),
		VolumeDir: filepath.Join(cow.Dir(), "volumes"), SpaceDirs: []string{cfg.DataDir},
		StateDir: filepath.Join(cfg.DataDir, "machines")}
	s.archive = snaparchive.New(snaparchive.Config{Objects: objects, Store: store, SnapshotDir: hcfg.SnapshotDir,
		BootDir: filepath.Join(cfg.DataDir, "boot"), AutoExport: objurl.Remote(objURL), Logger: log})
	hcfg.Archive = s.archive
	if s.proxySecret, err = loadProxySecret(cfg.DataDir); err != nil {
		return nil, err
	}
	if err := s.openCA(); err != nil {
		return nil, err
	}
	if s.net, err = openNetwork(ctx, cfg); err != nil {
		return nil, err
	}
	if s.net != nil {
		qcfg.Network, hcfg.Network = s.net, s.net
	}
	drv, err := qemu.New(qcfg)
	if err != nil {
		s.closeNetwork()
		return nil, err
	}
	s.builder.UseDriver(drv)
	s.bench = hostbench.New(hostbench.Config{Driver: drv, Templates: s.builder, Functions: benchFunctions{s}, Logger: log})
	hcfg.Driver = drv
	s.agent = hostagent.New(hcfg)
	s.engine = sandboxes.NewEngine(sandboxes.EngineConfig{Store: store, Host: s.agent, Logger: log, Archive: s.archive})
	s.hosts = router.NewHTTP(router.HTTPConfig{Domain: s.domain(), Table: s.routes, Sandboxes: store, Guests: s.engine,
		Policies: s.routerPolicies(), Secret: s.proxySecret})
	if err := s.agent.Start(ctx); err != nil {
		drv.Close()
		s.closeNetwork()
		return nil, err
	}
	if err := s.engine.Start(ctx); err != nil {
		_ = s.agent.Close(ctx, false)
		s.engine.Wait()
		s.closeNetwork()
		return nil, err
	}
	s.archive.ResumeExports(ctx)
	s.openApps(ctx)
	if err := s.openFunctions(ctx); err != nil {
		s.log.Error("recover function invocations", "err", err)
	}
	if err := s.openDatabases(ctx); err != nil {
		_ = s.agent.Close(ctx, false)
		s.engine.Wait()
		s.closeNetwork()
		return nil, err
	}
	ok = true
	return s, nil
}

// chooseAccel honours an explicit choice, or probes (cached per kernel, QEMU
// and host kernel in DATA/accel.json).
func (s *Server) chooseAccel(ctx context.Context) (qemu.ProbeResult, error) {
	switch s.cfg.Accel {
	case "tcg":
		return qemu.ProbeResult{Accel: pandastack.AccelTCG, Reason: "chosen by --accel tcg"}, nil
	case "kvm":
		return qemu.ProbeResult{Accel: pandastack.AccelKVM, Reason: "chosen by --accel kvm"}, nil
	case "", "auto":
	default:
		return qemu.ProbeResult{}, fmt.Errorf("--accel must be auto, kvm or tcg, not %q", s.cfg.Accel)
	}
	bt, err := s.builder.BootFiles(ctx, logWriter{s.log, "kernel"})
	if err != nil {
		return qemu.ProbeResult{}, err
	}
	uname, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	cacheKey := strings.Join([]string{bt.Kernel.Package, bt.InitrdKey, strings.TrimSpace(string(uname)), templates.QEMUVersion()}, "|")
	cachePath := filepath.Join(s.cfg.DataDir, "accel.json")
	var cached struct {
		Key    string           `json:"key"`
		Result qemu.ProbeResult `json:"result"`
	}
	if b, err := os.ReadFile(cachePath); err == nil && json.Unmarshal(b, &cached) == nil && cached.Key == cacheKey {
		return cached.Result, nil
	}
	res := qemu.Probe(ctx, "", bt.Kernel.Vmlinuz, bt.Initrd)
	cached.Key, cached.Result = cacheKey, res
	b, _ := json.Marshal(cached)
	_ = os.WriteFile(cachePath, b, 0o644)
	return res, nil
}

// Probe reports the accelerator decision.
func (s *Server) Probe() qemu.ProbeResult { return s.probe }

// BuildTemplates builds (or validates the cache of) each template, then
// fills its pool.
func (s *Server) BuildTemplates(ctx context.Context, names []string) error {
	var errs []error
	for _, name := range names {
		s.setBuild(name, "building")
		_, err := s.registry.BuildCatalog(ctx, name, logWriter{s.log, "template " + name})
		if err != nil {
			s.setBuild(name, err.Error())
			s.log.Error("template build failed", "template", name, "err", err)
			errs = append(errs, fmt.Errorf("build template %s: %w", name, err))
			continue
		}
		s.setBuild(name, "ready")
		if err := s.agent.Prewarm(ctx, name); err != nil {
			s.log.Warn("prewarm", "template", name, "err", err)
		}
	}
	return errors.Join(errs...)
}

func (s *Server) setBuild(name, st string) {
	s.mu.Lock()
	s.builds[name] = st
	s.mu.Unlock()
}

// Handler is the HTTP API.
func (s *Server) Handler() http.Handler {
	return api.New(api.Config{Store: s.store, Engine: registry.Engine{Engine: s.sandboxEngine(), Registry: s.registry}, Builder: s.builder, Templates: s.registry, Logger: s.log,
		Quotas: s.quotas, Storage: s.reserve, SandboxDomain: s.cfg.SandboxDomain, Network: s.apiNetwork(),
		ProxySecret: s.proxySecret, Archive: s.archive, Hosts: s.hosts, CACert: s.caPEM(), Bench: s.bench, Apps: s.apps,
		E2B: s.e2bServer(), Functions: s.fns, Cron: s.cron, Databases: s.databases, SQL: s.sqlHandler(),
		DatabaseBackups: s.databases, DatabaseBench: s.databases}).Handler()
}

// Routes is the route table services register hostnames in (the HTTP
// router and the TLS listener read it).
func (s *Server) Routes() *router.Table { return s.routes }

// Serve listens and serves until ctx is done, building the configured
// templates in the background; then it shuts down.
func (s *Server) Serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		s.Close(context.Background())
		return fmt.Errorf("listen: %w", err)
	}
	ln = router.LimitPerClient(ln, s.maxConnsPerClient())
	s.databases.SetSQLURL("http://" + ln.Addr().String() + "/sql")
	h := s.Handler()
	srv := newHTTPServer(h, defaultLimits, s.log)
	stopTLS := func() {}
	if s.cfg.TLSListen != "" {
		addr, stop, err := s.serveTLS(h)
		if err != nil {
			ln.Close()
			s.Close(context.Background())
			return err
		}
		stopTLS = stop
		s.log.Info("serving TLS", "addr", addr, "domain", s.domain(), "ca", s.ca.CertPath())
		if s.cfg.TLSReady != nil {
			s.cfg.TLSReady(addr)
		}
	}
	stopDB := func() {}
	if s.cfg.DBListen != "" {
		addr, stop, err := s.serveDatabases()
		if err != nil {
			stopTLS()
			ln.Close()
			s.Close(context.Background())
			return err
		}
		stopDB = stop
		s.log.Info("serving databases", "addr", addr, "domain", s.dbDomain())
		if s.cfg.DBReady != nil {
			s.cfg.DBReady(addr)
		}
	}
	bctx, cancelBuilds := context.WithCancel(ctx)
	defer cancelBuilds()
	// The builds are waited for at the end: a build cancelled mid-step
	// kills its process group and unmounts its chroot before the server
	// exits (else apt-get ran on, orphaned, holding the mounts).
	builds := make(chan struct{})
	go func() {
		defer close(builds)
		_ = s.BuildTemplates(bctx, s.cfg.Templates)
	}()
	// Removed VM files go back to the host's disk, not only to the image.
	go s.cow.KeepTrimmed(bctx, s.log)
	go s.collectVariants(bctx)
	go func() { _ = s.cron.Run(bctx) }()
	go s.runDatabaseBackups(bctx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("serving", "addr", ln.Addr().String(), "data_dir", s.cfg.DataDir, "accel", s.probe.Accel)
	if s.cfg.Ready != nil {
		s.cfg.Ready(ln.Addr().String())
	}
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
	}
	stopDB()
	stopTLS()
	cancelBuilds()
	<-builds
	return errors.Join(err, s.Close(context.Background()))
}

// Close stops the host agent (killing sandboxes when KillOnExit) and the store.
func (s *Server) Close(ctx context.Context) error {
	s.archive.Close()
	if s.apps != nil {
		s.apps.Close()
	}
	s.stopFunctions(ctx)
	err := s.agent.Close(ctx, s.cfg.KillOnExit)
	s.engine.Wait() // the ends the host reported are recorded before the store closes
	if s.net != nil && s.cfg.KillOnExit {
		err = errors.Join(err, s.net.Teardown(ctx))
	}
	s.closeNetwork()
	return errors.Join(err, s.store.Close())
}

// logWriter turns progress lines into log records.
type logWriter struct {
	log  *slog.Logger
	what string
}

func (w logWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if line != "" && !strings.Contains(line, "(Reading database ...") {
			w.log.Info(w.what, "msg", line)
		}
	}
	return len(p), nil
}

// Engine is the sandbox engine over the host agent (for in-process tests
// and benchmarks).
func (s *Server) Engine() pandastack.Engine { return s.engine }
