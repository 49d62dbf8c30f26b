// Package sandboxes is the sandbox product's rules, in one place between the
// HTTP API and the host that runs machines (hostapi.Host). Service
// validates a create once (template or snapshot, lifetime, TTL, idle time,
// metadata, env, size, volumes, network policy), counts it against the
// team's quotas (live sandboxes, service machines), and its lifetime
// decides its deadline: a sandbox's TTL, capped by MaxTTL; none for a
// service machine (pandastack.LifetimeService). Engine is the sandbox
// product over a host: it mints ids, resolves snapshots and volumes within
// the team, keeps the control plane's records (sandboxes, snapshots,
// volume attachments) from the host's results and events (records.go),
// and at start reconciles the store with what the host found
// (reconcile.go). The API decodes requests and presents records; the host
// (internal/hostagent) runs what this package asks for and imports no
// store.
package sandboxes

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultMaxTTL = 24 * time.Hour
	DefaultTTL    = 5 * time.Minute
)

// MaxMetadataKeys bounds a sandbox's metadata.
const MaxMetadataKeys = 64

// Config configures a Service.
type Config struct {
	Store  pandastack.Store
	Engine pandastack.Engine
	Logger *slog.Logger // nil: discard

	// MaxTTL bounds a sandbox's TTL and idle time (default 24h).
	MaxTTL time.Duration
	// DefaultTTL is a sandbox's TTL when the create names none (default 5m).
	DefaultTTL time.Duration
	// Quotas counts creates and forks against each team's limits (live
	// sandboxes, service machines, vCPUs, memory); nil: no limits.
	Quotas *quotas.Service
}

// Service applies the sandbox product's rules. Create it with New.
type Service struct {
	cfg Config
	log *slog.Logger
}

// New returns a Service for cfg, filling in defaults.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = DefaultMaxTTL
	}
	if cfg.DefaultTTL <= 0 {
		cfg.DefaultTTL = DefaultTTL
	}
	if cfg.Quotas == nil {
		cfg.Quotas = quotas.New(quotas.Config{Store: cfg.Store})
	}
	return &Service{cfg: cfg, log: cfg.Logger}
}

// MaxTTL is the longest TTL (and idle time) a sandbox may have.
func (s *Service) MaxTTL() time.Duration { return s.cfg.MaxTTL }

// ServiceLimit is the team's cap on live service machines (0: none).
func (s *Service) ServiceLimit(ctx context.Context, teamID string) (int, error) {
	l, err := s.cfg.Quotas.Limits(ctx, teamID)
	return l.MaxServiceMachines, err
}

// CreateParams is a create as a user asks for it (the wire's fields; nil
// pointers and zero values are "not given").
type CreateParams struct {
	Template             string
	Snapshot             string
	Lifetime             string
	TTLSeconds           *int64
	AutoHibernateSeconds *int64
	Metadata             map[string]string
	Env                  map[string]string
	CPUs                 int
	MemoryMiB            int
	DiskGiB              int
	Network              *pandastack.NetworkPolicy
	Volumes              []pandastack.VolumeMount
	// ManagedBy marks a platform service's machine (pandastack.Sandbox.ManagedBy).
	ManagedBy string
	// OnExpiry is "" or "kill" (end it when its TTL runs out) or
	// "hibernate" (pandastack.OnExpiry).
	OnExpiry string
	// DeferSession is pandastack.CreateRequest's (a platform service's
	// machine only; never set from a request).
	DeferSession bool
}

// Request validates p, a create for teamID, and returns it as the engine
// takes it. Errors are EInvalid and say what is wrong.
func (s *Service) Request(teamID string, p CreateParams) (pandastack.CreateRequest, error) {
	bad := func(format string, args ...any) (pandastack.CreateRequest, error) {
		return pandastack.CreateRequest{}, pandastack.Errorf(pandastack.EInvalid, format, args...)
	}
	if p.Template == "" && p.Snapshot == "" {
		return bad("template is required (or a snapshot to start from)")
	}
	lifetime, err := pandastack.ParseLifetime(p.Lifetime)
	if err != nil {
		return pandastack.CreateRequest{}, err
	}
	var ttl time.Duration
	if lifetime.IsService() {
		if p.TTLSeconds != nil {
			return bad("a service machine has no TTL: leave ttl_seconds out (it lives until it is killed)")
		}
	} else if ttl, err = s.TTL(p.TTLSeconds); err != nil {
		return pandastack.CreateRequest{}, err
	}
	idle, err := s.autoHibernate(p.AutoHibernateSeconds)
	if err != nil {
		return pandastack.CreateRequest{}, err
	}
	onExpiry, err := pandastack.ParseOnExpiry(p.OnExpiry)
	if err != nil {
		return pandastack.CreateRequest{}, err
	}
	if onExpiry.Hibernates() && lifetime.IsService() {
		return bad("a service machine has no TTL, so nothing for on_expiry to do: leave it out")
	}
	if len(p.Metadata) > MaxMetadataKeys {
		return bad("metadata has %d keys; at most %d are allowed", len(p.Metadata), MaxMetadataKeys)
	}
	for k := range p.Metadata {
		if k == "" {
			return bad("metadata keys must not be empty")
		}
	}
	if err := pandastack.CheckEnv(p.Env); err != nil {
		return pandastack.CreateRequest{}, err
	}
	if err := pandastack.CheckSize(p.CPUs, p.MemoryMiB, p.DiskGiB); err != nil {
		return pandastack.CreateRequest{}, err
	}
	if p.Snapshot != "" && (p.CPUs != 0 || p.MemoryMiB != 0 || p.DiskGiB != 0) {
		return bad("cpus, memory_mib and disk_gib cannot be changed when starting from a snapshot")
	}
	if err := pandastack.CheckVolumeMounts(p.Volumes); err != nil {
		return pandastack.CreateRequest{}, err
	}
	if p.Snapshot != "" && len(p.Volumes) > 0 {
		return bad("volumes cannot be attached to a sandbox created from a snapshot: it gets copies of the snapshot's volumes")
	}
	var policy *pandastack.NetworkPolicy
	if p.Network != nil {
		n, err := p.Network.Normalize()
		if err != nil {
			return pandastack.CreateRequest{}, err
		}
		policy = &n
	}
	meta := p.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	return pandastack.CreateRequest{
		TeamID: teamID, Template: p.Template, Snapshot: p.Snapshot, TTL: ttl, Metadata: meta, Env: p.Env,
		CPUs: p.CPUs, MemoryMiB: p.MemoryMiB, DiskGiB: p.DiskGiB, Network: policy, Volumes: p.Volumes,
		AutoHibernate: idle, Lifetime: lifetime, ManagedBy: p.ManagedBy, OnExpiry: onExpiry,
		DeferSession: p.DeferSession && p.ManagedBy != "",
	}, nil
}

// Create validates p, counts it against teamID's quotas and has the engine
// start it.
func (s *Service) Create(ctx context.Context, teamID string, p CreateParams) (pandastack.Sandbox, error) {
	req, err := s.Request(teamID, p)
	if err != nil {
		return pandastack.Sandbox{}, err
	}
	cpus, mem, disk := s.createSize(ctx, req)
	release, err := s.reserve(ctx, teamID, req.Lifetime, 1, cpus, mem, disk)
	if err != nil {
		return pandastack.Sandbox{}, err
	}
	defer release()
	sb, err := s.cfg.Engine.Create(ctx, req)
	if err != nil {
		return pandastack.Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	return sb, nil
}

// Fork makes n children of live sandbox sb, each counted against the
// team's quotas at the parent's size (its disk included). The children of a service machine
// are service machines.
func (s *Service) Fork(ctx context.Context, sb pandastack.Sandbox, n int) ([]pandastack.Sandbox, error) {
	release, err := s.reserve(ctx, sb.TeamID, sb.Lifetime, n, sb.CPUs, sb.MemoryMiB, sb.DiskMiB)
	if err != nil {
		return nil, err
	}
	defer release()
	kids, err := s.cfg.Engine.Fork(ctx, sb.ID, n)
	if err != nil {
		return kids, fmt.Errorf("fork sandbox: %w", err)
	}
	return kids, nil
}

// SetTTL moves live sandbox sb's expiry to ttl_seconds from now. A service
// machine has no TTL: asking for one is EInvalid.
func (s *Service) SetTTL(ctx context.Context, sb pandastack.Sandbox, sec *int64) (pandastack.Sandbox, error) {
	if sec == nil {
		return sb, pandastack.Errorf(pandastack.EInvalid, "ttl_seconds is required")
	}
	ttl, err := s.TTL(sec)
	if err != nil {
		return sb, err
	}
	if sb.Lifetime.IsService() {
		return sb, pandastack.NoTTLError(sb.ID)
	}
	updated, err := s.cfg.Engine.SetTTL(ctx, sb.ID, ttl)
	if err != nil {
		return updated, fmt.Errorf("set TTL of sandbox %s: %w", sb.ID, err)
	}
	return updated, nil
}

// Machines lists teamID's service machines, oldest first (the live ones,
// or with all every one), and how many are live.
func (s *Service) Machines(ctx context.Context, teamID string, all bool) ([]pandastack.Sandbox, int, error) {
	ms, err := s.cfg.Store.ListSandboxes(ctx, pandastack.SandboxFilter{TeamID: teamID, Lifetime: pandastack.LifetimeService, LiveOnly: !all})
	if err != nil {
		return nil, 0, fmt.Errorf("list service machines: %w", err)
	}
	live := 0
	for _, m := range ms {
		if m.State.Live() {
			live++
		}
	}
	return ms, live, nil
}

// TTL checks ttl_seconds against (0, MaxTTL]; nil means the default.
func (s *Service) TTL(sec *int64) (time.Duration, error) {
	if sec == nil {
		return s.cfg.DefaultTTL, nil
	}
	maxSec := int64(s.cfg.MaxTTL / time.Second)
	if *sec <= 0 || *sec > maxSec {
		return 0, pandastack.Errorf(pandastack.EInvalid, "ttl_seconds must be between 1 and %d (%s), got %d", maxSec, s.cfg.MaxTTL, *sec)
	}
	return time.Duration(*sec) * time.Second, nil
}

// autoHibernate checks auto_hibernate_seconds against [0, MaxTTL]: 0 (or
// nil) is off, and an idle time longer than any TTL is a mistake.
func (s *Service) autoHibernate(sec *int64) (time.Duration, error) {
	if sec == nil {
		return 0, nil
	}
	maxSec := int64(s.cfg.MaxTTL / time.Second)
	if *sec < 0 || *sec > maxSec {
		return 0, pandastack.Errorf(pandastack.EInvalid, "auto_hibernate_seconds must be between 0 (off) and %d (%s), got %d", maxSec, s.cfg.MaxTTL, *sec)
	}
	return time.Duration(*sec) * time.Second, nil
}
