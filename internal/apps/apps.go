// Package apps is git-driven app hosting on the sandbox substrate. An app
// is a git repository served at NAME.apps.DOMAIN through the router's
// Table on the API's own port. A deploy clones the repository on the host
// (the git CLI, hooks off, a size limit), detects how to run it
// (internal/apps/detect), then builds it inside a short-lived sandbox from
// the base template — never on the host: the sandbox's size, TTL and the
// build's timeout cap it — with the install and build commands' output in
// the deploy's log. The app is started in that sandbox and health-checked
// (an HTTP GET of its health path through the guest agent, retried until
// a timeout); the running VM is then snapshotted — memory included — and
// the release is a service machine restored from that snapshot, so it
// serves the moment it exists and wakes from hibernation with its memory.
//
// Blue-green: an app's route is registered once, with a backend that
// dials whichever release is live; the new release takes traffic only
// after its own health check, by an atomic swap of that pointer. The
// previous release drains for a moment, then hibernates and is kept for
// rollback, which wakes it and swaps back. Older releases are killed and
// their snapshots deleted. A failed build or health check leaves the live
// release serving.
//
// Previews: a GitHub pull_request delivery deploys the pull request's
// head (refs/pull/N/head) through the same pipeline at
// pr-N--NAME.apps.DOMAIN, with a route, deploys and a release of its own
// (rows marked with the number), never the app's; closing the pull
// request removes it all (preview.go).
//
// Env values and webhook secrets are sealed with internal/secrets before
// they reach the store, and env values are masked in build logs.
//
// The node_modules an install made from a lockfile is kept on the host
// (internal/apps/depcache) and handed to the app's next build machine
// whose lockfile is the same, through the guest agent's file channel:
// that build skips its install. A team's caches are bounded, and they and
// its git repositories count in its max_disk_gib (DiskUsage).
package apps

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/apps/depcache"
	"github.com/pandastack/pandastack/internal/router"
	"github.com/pandastack/pandastack/internal/sandboxes"
	"github.com/pandastack/pandastack/internal/secrets"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultTemplate      = "base"
	DefaultBuildTimeout  = 20 * time.Minute
	DefaultHealthTimeout = 60 * time.Second
	DefaultDrain         = 5 * time.Second
	// DefaultRollbackWindow: see Config.RollbackWindow.
	DefaultRollbackWindow = 5 * time.Minute
	DefaultMaxRepoBytes   = 256 << 20
	DefaultDomain         = "localhost"
	// KeepReleases is how many releases an app keeps: the live one and
	// the previous one, hibernated, for rollback.
	KeepReleases = 2
)

// Machines creates sandboxes within a team's quotas (*sandboxes.Service).
type Machines interface {
	Create(ctx context.Context, teamID string, p sandboxes.CreateParams) (pandastack.Sandbox, error)
}

// Config configures a Service.
type Config struct {
	Store    Store
	Machines Machines
	// Engine runs the machines Machines made: guests, snapshots,
	// hibernate, wake, kill.
	Engine  pandastack.Engine
	Secrets *secrets.Box
	Routes  *router.Table
	// Ports reaches a release's port (internal/nicroute: over its
	// machine's NIC); nil: through the guest agent (router.AgentPorts,
	// New's default).
	Ports router.Ports
	// Domain: apps are served at NAME.apps.Domain (default localhost).
	Domain string
	// URLPort is appended to app URLs (":8080"; "" for none).
	URLPort string
	// Template builds run in (default base).
	Template string
	// WorkDir holds clones while a deploy runs.
	WorkDir string
	// RepoDir holds the apps' git remotes (default WorkDir/repos).
	RepoDir       string
	BuildTimeout  time.Duration
	HealthTimeout time.Duration
	// Drain is how long the previous release keeps serving requests it
	// already has before it hibernates.
	Drain time.Duration
	// RollbackWindow is how long, past the drain, the previous release
	// keeps running for a fast rollback before it hibernates (default
	// DefaultRollbackWindow; below 0: hibernate right after the drain).
	RollbackWindow time.Duration
	MaxRepoBytes   int64
	// CacheBudget is the bytes of dependency archives (depcache) each
	// team keeps (default DefaultCacheBudget; below 0: no cache).
	CacheBudget int64
	// Quotas, when set, admits what the dependency cache keeps into the
	// team's max_disk_gib (*quotas.Service; DiskUsage counts it).
	Quotas Reserver
	// Git keeps clones off the server's own networks (see GitGuard).
	Git    GitGuard
	Logger *slog.Logger
}

// Service runs apps. Create it with New, then Start it.
type Service struct {
	cfg Config
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	backends map[string]*backend           // app id → its route's backend
	locks    map[string]*sync.Mutex        // app id → one deploy/rollback at a time
	running  map[string]context.CancelFunc // deploy id → cancel
	logs     map[string]*deployLog         // deploy id → its log while it runs

	// deps keeps installed dependencies between builds (nil: none).
	deps *depcache.Cache
}

// New returns a Service for cfg, filling in defaults.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Ports == nil {
		cfg.Ports = router.AgentPorts{Guests: cfg.Engine}
	}
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	if cfg.Template == "" {
		cfg.Template = DefaultTemplate
	}
	if cfg.BuildTimeout <= 0 {
		cfg.BuildTimeout = DefaultBuildTimeout
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = DefaultHealthTimeout
	}
	if cfg.Drain <= 0 {
		cfg.Drain = DefaultDrain
	}
	switch {
	case cfg.RollbackWindow == 0:
		cfg.RollbackWindow = DefaultRollbackWindow
	case cfg.RollbackWindow < 0:
		cfg.RollbackWindow = 0
	}
	if cfg.MaxRepoBytes <= 0 {
		cfg.MaxRepoBytes = DefaultMaxRepoBytes
	}
	if cfg.RepoDir == "" && cfg.WorkDir != "" {
		cfg.RepoDir = filepath.Join(cfg.WorkDir, "repos")
	}
	if cfg.CacheBudget == 0 {
		cfg.CacheBudget = DefaultCacheBudget
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{cfg: cfg, log: cfg.Logger.With("component", "apps"), ctx: ctx, cancel: cancel,
		backends: map[string]*backend{}, locks: map[string]*sync.Mutex{}, running: map[string]context.CancelFunc{},
		logs: map[string]*deployLog{}, deps: newDepCache(cfg)}
}

// Start registers the route of every app in the store, pointed at its
// live release (the service machines are re-attached by the engine),
// marks deploys a previous run left unfinished as failed, and sweeps
// what such deploys and deleted apps left on disk.
func (s *Service) Start(ctx context.Context) error {
	all, err := s.cfg.Store.ListApps(ctx, "")
	if err != nil {
		return fmt.Errorf("list apps: %w", err)
	}
	s.sweep(all)
	for _, a := range all {
		b := s.register(a)
		if b == nil {
			s.log.Error("app route taken", "app", a.Name, "host", s.host(a.Name))
			continue
		}
		if rel, ok := s.liveRelease(ctx, a); ok {
			gen := b.set(rel.MachineID, rel.Port)
			// A previous release the last run kept warm hibernates after
			// its window (one already hibernated stays so).
			if rels, err := s.cfg.Store.ListReleases(ctx, a.ID); err == nil {
				for _, r := range rels {
					if r.DeployID != a.LiveDeployID && s.cfg.Engine != nil {
						s.keepWarm(b, r.MachineID, gen)
					}
				}
			}
		}
		ds, err := s.cfg.Store.ListDeploys(ctx, a.ID)
		if err != nil {
			return fmt.Errorf("list deploys of %s: %w", a.Name, err)
		}
		for _, d := range ds {
			if d.Status == StatusQueued || d.Status == StatusBuilding || d.Status == StatusDeploying {
				full, err := s.cfg.Store.GetDeploy(ctx, a.ID, d.ID)
				if err == nil {
					full.Status, full.Error, full.UpdatedAt = StatusFailed, "the server stopped while it ran", now()
					full.Log += "deploy failed: the server stopped while it ran\n"
					_ = s.cfg.Store.PutDeploy(ctx, full)
				}
			}
		}
	}
	byID := map[string]App{}
	for _, a := range all {
		byID[a.ID] = a
	}
	return s.startPreviews(ctx, byID)
}

// Close cancels running deploys and waits for them.
func (s *Service) Close() {
	s.cancel()
	s.wg.Wait()
}

// Domain is the domain apps are served under (NAME.apps.DOMAIN).
func (s *Service) Domain() string { return s.cfg.Domain }

func (s *Service) host(name string) string { return name + ".apps." + s.cfg.Domain }

func now() time.Time { return time.Now().UTC() }

// nameRE: a DNS label, lower case; "--" is kept for preview hosts.
var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$`)

// CreateParams is an app as a user asks for it.
type CreateParams struct {
	Name                 string            `json:"name"`
	GitURL               string            `json:"git_url"`
	Branch               string            `json:"branch"`
	Env                  map[string]string `json:"env"`
	BuildCommand         string            `json:"build_command"`
	StartCommand         string            `json:"start_command"`
	Port                 int               `json:"port"`
	HealthPath           string            `json:"health_path"`
	HealthTimeoutSeconds int               `json:"health_timeout_seconds"`
	AutoHibernateSeconds int               `json:"auto_hibernate_seconds"`

	// AllowLocal lets git_url be a path (or file://) on the server: only
	// for the operator (admin keys), since the server reads every
	// repository on its disk.
	AllowLocal bool `json:"-"`
}

func invalid(format string, args ...any) error {
	return pandastack.Errorf(pandastack.EInvalid, format, args...)
}

func (p *CreateParams) check() error {
	switch {
	case !nameRE.MatchString(p.Name) || strings.Contains(p.Name, "--"):
		return invalid("name must be 1-40 lower-case letters, digits and single hyphens, starting and ending with a letter or digit (it is the app's host name), got %q", p.Name)
	case strings.HasPrefix(p.GitURL, "-") || strings.ContainsAny(p.GitURL, "\n\r\x00"):
		return invalid("git_url %q is not a repository address", p.GitURL)
	case p.GitURL != "" && isLocal(p.GitURL) && !p.AllowLocal:
		return pandastack.Errorf(pandastack.EForbidden, "git_url %q is a path on the server: only admin keys may deploy from one (use an https, git or ssh address)", p.GitURL)
	case p.Port < 0 || p.Port > 65535:
		return invalid("port must be between 1 and 65535, got %d", p.Port)
	case p.AutoHibernateSeconds < 0:
		return invalid("auto_hibernate_seconds must be 0 (off) or more, got %d", p.AutoHibernateSeconds)
	case p.HealthTimeoutSeconds < 0 || p.HealthTimeoutSeconds > 1800:
		return invalid("health_timeout_seconds must be between 1 and 1800 (0: the server's default), got %d", p.HealthTimeoutSeconds)
	case p.HealthPath != "" && !strings.HasPrefix(p.HealthPath, "/"):
		return invalid("health_path must start with /, got %q", p.HealthPath)
	}
	if p.Branch == "" {
		p.Branch = "main"
	}
	if err := checkRef(p.Branch); err != nil {
		return err
	}
	if p.HealthPath == "" {
		p.HealthPath = "/"
	}
	if err := pandastack.CheckEnv(p.Env); err != nil {
		return err
	}
	return nil
}

// isLocal reports whether a git address names the server's own files.
func isLocal(url string) bool {
	u := strings.ToLower(url)
	return strings.HasPrefix(u, "/") || strings.HasPrefix(u, "file:") || strings.HasPrefix(u, ".") || strings.HasPrefix(u, "~") ||
		!strings.Contains(u, ":")
}

var refRE = regexp.MustCompile(`^[A-Za-z0-9._/-]{1,200}$`)

func checkRef(ref string) error {
	if !refRE.MatchString(ref) || strings.HasPrefix(ref, "-") || strings.Contains(ref, "..") {
		return invalid("%q is not a branch or tag name", ref)
	}
	return nil
}

// Create records a new app for teamID and registers its route (serving
// 503 until a deploy goes live). The returned app carries its webhook
// secret, shown this once.
func (s *Service) Create(ctx context.Context, teamID string, p CreateParams) (App, error) {
	if err := p.check(); err != nil {
		return App{}, err
	}
	if p.GitURL != "" && !isLocal(p.GitURL) {
		// Refused now when it points at the server's own networks; a name
		// that does not resolve yet fails its deploy instead, with the
		// reason.
		var pe *pandastack.Error
		if _, _, err := s.cfg.Git.check(ctx, p.GitURL); errors.As(err, &pe) {
			return App{}, err
		}
	}
	a := App{ID: pandastack.NewID("app_"), TeamID: teamID, Name: p.Name, GitURL: p.GitURL, Branch: p.Branch,
		Env: p.Env, BuildCommand: p.BuildCommand, StartCommand: p.StartCommand, Port: p.Port,
		HealthPath: p.HealthPath, HealthTimeoutSeconds: p.HealthTimeoutSeconds, AutoHibernateSeconds: p.AutoHibernateSeconds, CreatedAt: now()}
	secret := make([]byte, 24)
	_, _ = rand.Read(secret)
	a.WebhookSecret = "whsec_" + hex.EncodeToString(secret)
	var err error
	if a.SecretSealed, err = s.cfg.Secrets.Seal(a.WebhookSecret, "app-webhook:"+a.ID); err != nil {
		return App{}, fmt.Errorf("seal webhook secret: %w", err)
	}
	if len(a.Env) > 0 {
		b, _ := json.Marshal(a.Env)
		if a.EnvSealed, err = s.cfg.Secrets.Seal(string(b), "app-env:"+a.ID); err != nil {
			return App{}, fmt.Errorf("seal env: %w", err)
		}
	}
	// The host name is the server's, across teams: taken elsewhere is a
	// conflict too.
	b := s.register(a)
	if b == nil {
		return App{}, pandastack.Errorf(pandastack.EConflict, "the name %q is taken on this server", a.Name)
	}
	if err := s.cfg.Store.CreateApp(ctx, a); err != nil {
		s.unregister(a)
		return App{}, fmt.Errorf("create app: %w", err)
	}
	return s.present(a), nil
}

// present fills in what is computed for a user: URL, webhook URL, env keys.
func (s *Service) present(a App) App {
	a.URL = "http://" + s.host(a.Name) + s.cfg.URLPort
	a.WebhookURL = "/v1/apps/" + a.ID + "/hooks/github"
	a.GitRemote = GitRemotePath(a.Name)
	a.EnvKeys = []string{}
	for k := range a.Env {
		a.EnvKeys = append(a.EnvKeys, k)
	}
	if len(a.EnvKeys) == 0 && a.EnvSealed != "" {
		if env, err := s.openEnv(a); err == nil {
			for k := range env {
				a.EnvKeys = append(a.EnvKeys, k)
			}
		}
	}
	sort.Strings(a.EnvKeys)
	return a
}

func (s *Service) openEnv(a App) (map[string]string, error) {
	if a.EnvSealed == "" {
		return map[string]string{}, nil
	}
	plain, err := s.cfg.Secrets.Open(a.EnvSealed, "app-env:"+a.ID)
	if err != nil {
		return nil, fmt.Errorf("open env of app %s: %w", a.Name, err)
	}
	env := map[string]string{}
	if err := json.Unmarshal([]byte(plain), &env); err != nil {
		return nil, fmt.Errorf("decode env of app %s: %w", a.Name, err)
	}
	return env, nil
}

// Get returns teamID's app name (ENotFound for another team's).
func (s *Service) Get(ctx context.Context, teamID, name string) (App, error) {
	a, err := s.cfg.Store.GetApp(ctx, teamID, name)
	if err != nil {
		return App{}, err
	}
	return s.present(a), nil
}

// List returns teamID's apps.
func (s *Service) List(ctx context.Context, teamID string) ([]App, error) {
	all, err := s.cfg.Store.ListApps(ctx, teamID)
	if err != nil {
		return nil, err
	}
	for i := range all {
		all[i] = s.present(all[i])
	}
	return all, nil
}

// Delete stops the app's deploys (its previews' too), removes its routes,
// kills its release machines, deletes their snapshots and forgets it.
func (s *Service) Delete(ctx context.Context, teamID, name string) error {
	a, err := s.cfg.Store.GetApp(ctx, teamID, name)
	if err != nil {
		return err
	}
	ds, err := s.cfg.Store.ListDeploys(ctx, a.ID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	for _, d := range ds {
		if cancel, ok := s.running[d.ID]; ok {
			cancel()
		}
	}
	s.mu.Unlock()
	lock := s.appLock(a.ID)
	lock.Lock()
	defer lock.Unlock()
	previews, err := s.cfg.Store.ListPreviews(ctx, a.ID)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range previews {
		if err := s.dropPreview(ctx, a, p.Number); err != nil {
			errs = append(errs, err)
		}
	}
	s.unregister(a)
	rels, err := s.cfg.Store.ListReleases(ctx, a.ID)
	if err != nil {
		return err
	}
	for _, r := range rels {
		if err := s.dropRelease(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.removeRepo(a); err != nil {
		errs = append(errs, err)
	}
	if s.deps != nil {
		if err := s.deps.DropApp(a.TeamID, a.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("delete app %s: %w", a.Name, errs[0])
	}
	return s.cfg.Store.DeleteApp(ctx, a.ID)
}

// dropRelease kills a release's machine, deletes its snapshot and record.
func (s *Service) dropRelease(ctx context.Context, r Release) error {
	if err := s.cfg.Engine.Kill(ctx, r.MachineID, pandastack.StateKilled); err != nil && pandastack.ErrorCode(err) != pandastack.ENotFound {
		return fmt.Errorf("kill release machine %s: %w", r.MachineID, err)
	}
	if err := s.cfg.Engine.DeleteSnapshot(ctx, r.SnapshotID); err != nil && pandastack.ErrorCode(err) != pandastack.ENotFound {
		return fmt.Errorf("delete release snapshot %s: %w", r.SnapshotID, err)
	}
	return s.cfg.Store.DeleteRelease(ctx, r.ID)
}

func (s *Service) appLock(appID string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[appID]
	if !ok {
		l = &sync.Mutex{}
		s.locks[appID] = l
	}
	return l
}

// liveRelease is the release of the app's live deploy.
func (s *Service) liveRelease(ctx context.Context, a App) (Release, bool) {
	if a.LiveDeployID == "" {
		return Release{}, false
	}
	rels, err := s.cfg.Store.ListReleases(ctx, a.ID)
	if err != nil {
		return Release{}, false
	}
	for _, r := range rels {
		if r.DeployID == a.LiveDeployID {
			return r, true
		}
	}
	return Release{}, false
}
