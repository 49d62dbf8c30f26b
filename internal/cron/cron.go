package cron

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pandastack/pandastack"
)

// Defaults applied by New.
const (
	DefaultTick  = 200 * time.Millisecond
	DefaultGrace = 5 * time.Second
	MaxDataBytes = 256 << 10
	maxCatchUp   = 100000 // occurrences walked to find the latest missed one
)

// Invoker runs a schedule's function for one occurrence.
type Invoker interface {
	// Check reports whether team's function exists (ENotFound if not).
	Check(ctx context.Context, teamID, function string) error
	// InvokeScheduled runs team's function on data for the occurrence
	// executionID due at fireAt and returns how it ended: status is one of
	// succeeded, failed, timed_out (anything else is failed).
	InvokeScheduled(ctx context.Context, teamID, function string, data []byte, executionID string, fireAt time.Time) (invocationID, status, message string, err error)
}

// Config configures a Service.
type Config struct {
	Store   Store
	Invoker Invoker
	Logger  *slog.Logger     // nil: discard
	Now     func() time.Time // nil: time.Now
	// Tick is how often due schedules are looked for (default 200ms).
	Tick time.Duration
	// Grace is how late an occurrence may fire; one later than that was
	// missed (the server was down) and the missed-run policy applies
	// (default 5s).
	Grace time.Duration
}

// Service keeps schedules and fires them. Create it with New, then Run it.
type Service struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	running map[string]int   // schedule id: runs in flight
	queued  map[string][]Run // schedule id: runs waiting (overlap queue)
	wg      sync.WaitGroup
	// stopping is set by Stop: runs ending now stay open.
	stopping atomic.Bool
}

// New returns a Service for cfg.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	return &Service{cfg: cfg, log: cfg.Logger, running: map[string]int{}, queued: map[string][]Run{}}
}

// CreateParams is a schedule as a user asks for it.
type CreateParams struct {
	Function string          `json:"function"`
	Schedule string          `json:"schedule"`
	TZ       string          `json:"tz"`
	Data     json.RawMessage `json:"data"`
	Overlap  string          `json:"overlap"`
	Missed   string          `json:"missed"`
}

// Create checks p and records the schedule with its first fire time.
// Errors are EInvalid naming the field.
func (s *Service) Create(ctx context.Context, teamID string, p CreateParams) (Schedule, error) {
	bad := func(format string, args ...any) (Schedule, error) {
		return Schedule{}, pandastack.Errorf(pandastack.EInvalid, format, args...)
	}
	if p.Function == "" {
		return bad("function is required")
	}
	if p.TZ == "" {
		p.TZ = "UTC"
	}
	spec, err := Parse(p.Schedule, p.TZ)
	if err != nil {
		return Schedule{}, err
	}
	switch p.Overlap {
	case "":
		p.Overlap = OverlapSkip
	case OverlapSkip, OverlapQueue, OverlapAllow:
	default:
		return bad("overlap must be skip, queue or allow, got %q", p.Overlap)
	}
	switch p.Missed {
	case "":
		p.Missed = MissedSkip
	case MissedSkip, MissedCatchUp:
	default:
		return bad("missed must be skip or catch_up, got %q", p.Missed)
	}
	if len(p.Data) == 0 {
		p.Data = json.RawMessage("null")
	}
	if len(p.Data) > MaxDataBytes || !json.Valid(p.Data) {
		return bad("data must be JSON of at most %d bytes", MaxDataBytes)
	}
	if err := s.cfg.Invoker.Check(ctx, teamID, p.Function); err != nil {
		return Schedule{}, err
	}
	now := s.cfg.Now().UTC()
	next := spec.Next(now)
	if next.IsZero() {
		return bad("schedule: %q never fires after now", p.Schedule)
	}
	sc := Schedule{ID: pandastack.NewID("cron_"), TeamID: teamID, Function: p.Function, Expr: p.Schedule, TZ: p.TZ, Data: p.Data,
		Overlap: p.Overlap, Missed: p.Missed, NextFireAt: &next, CreatedAt: now}
	if err := s.cfg.Store.CreateSchedule(ctx, sc); err != nil {
		return Schedule{}, err
	}
	return sc, nil
}

// Get returns team's schedule id (another team's is ENotFound).
func (s *Service) Get(ctx context.Context, teamID, id string) (Schedule, error) {
	sc, err := s.cfg.Store.GetSchedule(ctx, id)
	if err == nil && sc.TeamID != teamID {
		return Schedule{}, pandastack.Errorf(pandastack.ENotFound, "schedule %s not found", id)
	}
	return sc, err
}

// List returns team's schedules.
func (s *Service) List(ctx context.Context, teamID string) ([]Schedule, error) {
	return s.cfg.Store.ListSchedules(ctx, teamID)
}

// Delete removes team's schedule id and its run history; a run in flight
// finishes.
func (s *Service) Delete(ctx context.Context, teamID, id string) error {
	if _, err := s.Get(ctx, teamID, id); err != nil {
		return err
	}
	return s.cfg.Store.DeleteSchedule(ctx, id)
}

// Runs returns team's schedule id's newest runs, newest first.
func (s *Service) Runs(ctx context.Context, teamID, id string, limit int) ([]Run, error) {
	if _, err := s.Get(ctx, teamID, id); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	return s.cfg.Store.ListRuns(ctx, id, limit)
}

// ExecutionID is the stable id of schedule id's occurrence at fireAt.
func ExecutionID(scheduleID string, fireAt time.Time) string {
	sum := sha256.Sum256([]byte(scheduleID + "@" + fireAt.UTC().Format(time.RFC3339Nano)))
	return "exe_" + hex.EncodeToString(sum[:12])
}
