package quotas

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
)

// Store is what the quota service reads and writes (pandastack.Store has
// it all).
type Store interface {
	GetTeamQuotas(ctx context.Context, teamID string) (pandastack.TeamQuotas, error)
	PutTeamQuotas(ctx context.Context, q pandastack.TeamQuotas) error
	ListSandboxes(ctx context.Context, f pandastack.SandboxFilter) ([]pandastack.Sandbox, error)
	ListSnapshots(ctx context.Context, teamID string) ([]pandastack.Snapshot, error)
	ListVolumes(ctx context.Context, teamID string) ([]pandastack.Volume, error)
}

// Counter adds to a team's usage what the store's sandboxes, snapshots and
// volumes do not show (say, service machines kept in records of their own).
type Counter func(ctx context.Context, teamID string) (Usage, error)

// Config assembles a Service.
type Config struct {
	Store Store
	// Defaults are the limits of a team with no overrides (Defaults in a
	// server; the zero Limits, no limit at all, when left zero).
	Defaults Limits
	// Counters add usage the store does not show; may be empty.
	Counters []Counter
	// Space, when set, is the host's storage reserve: every Reserve asks
	// it, after the team's limits, whether the VM filesystem may take a new
	// allocation (it answers insufficient_storage when not).
	Space Space
	// CacheFor is how long Limits keeps a team's limits before reading the
	// store again (default 5 s). Set refreshes them at once in this
	// process; the bound matters only when several servers share a store.
	CacheFor time.Duration
}

// Space is a check of the free space where allocations land
// (*diskreserve.Reserve is one).
type Space interface {
	// Check returns nil when a new allocation may start, else a
	// *pandastack.Error with code insufficient_storage saying how much is
	// free.
	Check(ctx context.Context) error
}

// Service answers what a team may hold and reserves what it takes. It is
// safe for concurrent use.
type Service struct {
	cfg Config

	mu    sync.Mutex
	teams map[string]*teamState
}

// teamState is a team's cached limits and its reservations in flight.
type teamState struct {
	reserve  sync.Mutex // held while counting, so two reservations never both fit
	limits   Limits
	loadedAt time.Time
	pending  Usage // guarded by Service.mu
}

// New returns a Service for cfg.
func New(cfg Config) *Service {
	if cfg.CacheFor <= 0 {
		cfg.CacheFor = 5 * time.Second
	}
	return &Service{cfg: cfg, teams: map[string]*teamState{}}
}

// Defaults returns the limits of a team with no overrides.
func (s *Service) Defaults() Limits { return s.cfg.Defaults }

func (s *Service) team(teamID string) *teamState {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.teams[teamID]
	if !ok {
		t = &teamState{}
		s.teams[teamID] = t
	}
	return t
}

// Overrides returns the team's stored overrides (none: all nil).
func (s *Service) Overrides(ctx context.Context, teamID string) (pandastack.QuotaOverrides, error) {
	if teamID == "" {
		return pandastack.QuotaOverrides{}, fmt.Errorf("quotas: no team")
	}
	q, err := s.cfg.Store.GetTeamQuotas(ctx, teamID)
	if pandastack.ErrorCode(err) == pandastack.ENotFound {
		return pandastack.QuotaOverrides{}, nil
	}
	if err != nil {
		return pandastack.QuotaOverrides{}, fmt.Errorf("read quotas of team %s: %w", teamID, err)
	}
	return q.Overrides, nil
}

// Limits returns the team's effective limits, from a cache at most
// CacheFor old.
func (s *Service) Limits(ctx context.Context, teamID string) (Limits, error) {
	t := s.team(teamID)
	s.mu.Lock()
	l, fresh := t.limits, !t.loadedAt.IsZero() && time.Since(t.loadedAt) < s.cfg.CacheFor
	s.mu.Unlock()
	if fresh {
		return l, nil
	}
	o, err := s.Overrides(ctx, teamID)
	if err != nil {
		return Limits{}, err
	}
	l = s.cfg.Defaults.With(o)
	s.mu.Lock()
	t.limits, t.loadedAt = l, time.Now()
	s.mu.Unlock()
	return l, nil
}

// Set replaces the team's overrides with o (nil fields: the default) and
// returns the effective limits. Bad values are EInvalid.
func (s *Service) Set(ctx context.Context, teamID string, o pandastack.QuotaOverrides) (Limits, error) {
	if err := Validate(o); err != nil {
		return Limits{}, err
	}
	if err := s.cfg.Store.PutTeamQuotas(ctx, pandastack.TeamQuotas{TeamID: teamID, Overrides: o, UpdatedAt: time.Now().UTC()}); err != nil {
		return Limits{}, fmt.Errorf("store quotas of team %s: %w", teamID, err)
	}
	l := s.cfg.Defaults.With(o)
	t := s.team(teamID)
	s.mu.Lock()
	t.limits, t.loadedAt = l, time.Now()
	s.mu.Unlock()
	return l, nil
}

// Usage counts what the team holds now: its live sandboxes (with their
// vCPUs and memory), snapshots and volumes from the store, what the
// Counters add, and the reservations still in flight.
func (s *Service) Usage(ctx context.Context, teamID string) (Usage, error) {
	u, err := s.count(ctx, teamID)
	if err != nil {
		return Usage{}, err
	}
	t := s.team(teamID)
	s.mu.Lock()
	defer s.mu.Unlock()
	return u.Plus(t.pending), nil
}

func (s *Service) count(ctx context.Context, teamID string) (Usage, error) {
	if teamID == "" {
		// The store reads "" as every team: never count that for one.
		return Usage{}, fmt.Errorf("quotas: count usage: no team")
	}
	var u Usage
	sbs, err := s.cfg.Store.ListSandboxes(ctx, pandastack.SandboxFilter{TeamID: teamID, LiveOnly: true})
	if err != nil {
		return u, fmt.Errorf("count live sandboxes of team %s: %w", teamID, err)
	}
	for _, sb := range sbs {
		u.Sandboxes++
		if sb.Lifetime.IsService() {
			u.ServiceMachines++
		}
		u.VCPUs += sb.CPUs
		u.MemoryMiB += sb.MemoryMiB
		u.DiskMiB += SandboxDiskMiB(sb)
	}
	snaps, err := s.cfg.Store.ListSnapshots(ctx, teamID)
	if err != nil {
		return u, fmt.Errorf("count snapshots of team %s: %w", teamID, err)
	}
	u.Snapshots = len(snaps)
	for _, sn := range snaps {
		u.DiskMiB += int((sn.SizeBytes + 1<<20 - 1) >> 20)
	}
	vols, err := s.cfg.Store.ListVolumes(ctx, teamID)
	if err != nil {
		return u, fmt.Errorf("count volumes of team %s: %w", teamID, err)
	}
	u.Volumes = len(vols)
	for _, v := range vols {
		u.DiskMiB += v.SizeMiB
	}
	for _, c := range s.counters() {
		more, err := c(ctx, teamID)
		if err != nil {
			return u, fmt.Errorf("count usage of team %s: %w", teamID, err)
		}
		u = u.Plus(more)
	}
	return u, nil
}

// Reserve checks that the team may take want more and holds it as taken
// until release is called; call release once the allocation has either
// landed in the store (and so is counted from there) or failed. A request
// that does not fit is a *pandastack.Error with code quota_exceeded naming
// the limit and the numbers. Reservations of one team are counted one at a
// time, so concurrent requests never overshoot together.
//
// Call it once per allocation, with everything it takes: a create of a
// sandbox {Sandboxes: 1, VCPUs: c, MemoryMiB: m, DiskMiB: d}, a fork of N
// children N times that, a snapshot {Snapshots: 1, DiskMiB: its estimate},
// a hibernate {DiskMiB: m}, a volume {Volumes: 1, DiskMiB: size}, a build
// {Builds: 1, DiskMiB: 1} held for the build's whole run (its template
// version counts from the store once recorded). After the team's limits it
// checks the host's storage reserve (Config.Space): below it the answer is
// insufficient_storage, whoever asks.
func (s *Service) Reserve(ctx context.Context, teamID string, want Usage) (release func(), err error) {
	l, err := s.Limits(ctx, teamID)
	if err != nil {
		return nil, err
	}
	t := s.team(teamID)
	t.reserve.Lock()
	defer t.reserve.Unlock()
	have, err := s.Usage(ctx, teamID)
	if err != nil {
		return nil, err
	}
	if err := Check(l, have, want); err != nil {
		return nil, err
	}
	if err := s.CheckSpace(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	t.pending = t.pending.Plus(want)
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			t.pending = t.pending.minus(want)
			s.mu.Unlock()
		})
	}, nil
}

// CheckSpace answers insufficient_storage when the host's VM filesystem is
// below its reserve (nil without a Space): a new allocation must not start.
func (s *Service) CheckSpace(ctx context.Context) error {
	if s.cfg.Space == nil {
		return nil
	}
	return s.cfg.Space.Check(ctx)
}

// SandboxDiskMiB is what a live sandbox holds on the host's disk, for the
// max_disk_gib quota: its root disk at full size (a guest may fill it),
// plus its saved memory while it is hibernated.
func SandboxDiskMiB(sb pandastack.Sandbox) int {
	n := sb.DiskMiB
	if sb.State == pandastack.StateHibernated {
		n += sb.MemoryMiB
	}
	return n
}
