package cron

import (
	"context"
	"encoding/json"
	"time"
)

// Overlap policies: what a fire does while the schedule's previous run is
// still running.
const (
	OverlapSkip  = "skip"  // record the new occurrence as skipped (default)
	OverlapQueue = "queue" // run it once the previous one ends
	OverlapAllow = "allow" // run it alongside
)

// Missed-run policies: what happens to occurrences that passed while the
// server was down (more than Grace late).
const (
	MissedSkip    = "skip"     // record none of them; go on from now (default)
	MissedCatchUp = "catch_up" // run the latest of them once
)

// Run statuses.
const (
	RunPending   = "pending" // claimed (its execution id is fixed), not yet fired
	RunQueued    = "queued"  // waiting for the previous run (overlap queue)
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
	RunTimedOut  = "timed_out"
	RunSkipped   = "skipped"
)

// Schedule invokes a team's function at the times Expr names in TZ.
type Schedule struct {
	ID         string          `json:"id"`
	TeamID     string          `json:"-"`
	Function   string          `json:"function"`
	Expr       string          `json:"schedule"`
	TZ         string          `json:"tz"`
	Data       json.RawMessage `json:"data"`
	Overlap    string          `json:"overlap"`
	Missed     string          `json:"missed"`
	NextFireAt *time.Time      `json:"next_fire_at"` // nil: nothing left to fire (a one-shot that fired)
	CreatedAt  time.Time       `json:"created_at"`
}

// Run is one occurrence of a schedule. Its ID is the execution id the
// handler gets in its context: stable for the occurrence, also when the
// occurrence is delivered again after a crash.
type Run struct {
	ID           string     `json:"execution_id"`
	ScheduleID   string     `json:"schedule_id"`
	FireAt       time.Time  `json:"fire_at"`
	Status       string     `json:"status"`
	Attempts     int        `json:"attempts"`
	InvocationID string     `json:"invocation_id,omitempty"`
	Message      string     `json:"message,omitempty"`
	StartedAt    *time.Time `json:"started_at,omitempty"`
	EndedAt      *time.Time `json:"ended_at,omitempty"`
	DurationMs   int64      `json:"duration_ms"`
}

// Store keeps schedules and their runs (internal/store/sqlite implements
// it).
type Store interface {
	CreateSchedule(ctx context.Context, s Schedule) error
	GetSchedule(ctx context.Context, id string) (Schedule, error)
	// ListSchedules lists team's schedules (every team's for ""), oldest
	// first.
	ListSchedules(ctx context.Context, teamID string) ([]Schedule, error)
	DeleteSchedule(ctx context.Context, id string) error
	// ClaimRuns, in one transaction, moves the schedule's next fire time
	// from prev to next and records runs — only when next_fire_at still is
	// prev. It reports false (nothing written) when another claimer moved
	// it first or the schedule is gone: each occurrence is claimed once.
	ClaimRuns(ctx context.Context, scheduleID string, prev, next *time.Time, runs []Run) (bool, error)
	UpdateRun(ctx context.Context, r Run) error
	ListRuns(ctx context.Context, scheduleID string, limit int) ([]Run, error)
	// OpenRuns are the runs claimed but not ended (pending, queued,
	// running), oldest fire first.
	OpenRuns(ctx context.Context) ([]Run, error)
}
