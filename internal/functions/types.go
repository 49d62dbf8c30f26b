package functions

import (
	"context"
	"encoding/json"
	"time"
)

// Runtimes a function may use.
const (
	RuntimePython = "python"
	RuntimeNode   = "node"
)

// Invocation statuses.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"    // the handler raised
	StatusTimedOut  = "timed_out" // the deadline passed; its VM was killed
	StatusError     = "error"     // the platform could not run it
)

// Function is a team's named function; Latest is its serving version.
type Function struct {
	ID            string    `json:"id"`
	TeamID        string    `json:"-"`
	Name          string    `json:"name"`
	LatestVersion int       `json:"version"`
	URL           string    `json:"url,omitempty"` // its HTTP trigger, when it has one
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	Latest        Version   `json:"latest"`
}

// Version is one deploy of a function: its settings and the snapshot of a
// microVM with the runtime started and the handler imported.
type Version struct {
	FunctionID     string        `json:"-"`
	Version        int           `json:"version"`
	Runtime        string        `json:"runtime"`
	Handler        string        `json:"handler"`
	EnvSealed      string        `json:"-"`
	EnvKeys        []string      `json:"env_keys"`
	Timeout        time.Duration `json:"-"`
	MemoryMiB      int           `json:"memory_mib"`
	MaxConcurrency int           `json:"max_concurrency"`
	HTTPPublic     bool          `json:"http_public"` // its HTTP trigger needs no API key
	Isolation      string        `json:"isolation"`   // fresh or warm
	SnapshotID     string        `json:"-"`
	BundleSHA256   string        `json:"bundle_sha256"`
	BundleBytes    int64         `json:"bundle_bytes"`
	CreatedAt      time.Time     `json:"created_at"`
}

// FunctionError is what a handler raised (or a timeout), as the invoke
// answers it with the X-PandaStack-Function-Error header.
type FunctionError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Stack   string `json:"stack"`
}

// Invocation is one call of a function and how it ended.
type Invocation struct {
	ID          string          `json:"id"`
	FunctionID  string          `json:"-"`
	Function    string          `json:"function"`
	TeamID      string          `json:"-"`
	Version     int             `json:"version"`
	Trigger     string          `json:"trigger"` // "api" or "cron"
	ExecutionID string          `json:"execution_id,omitempty"`
	Status      string          `json:"status"`
	Result      json.RawMessage `json:"result,omitempty"`
	Error       *FunctionError  `json:"error,omitempty"`
	Logs        string          `json:"logs"`
	CreatedAt   time.Time       `json:"created_at"`
	EndedAt     *time.Time      `json:"ended_at,omitempty"`
	DurationMs  int64           `json:"duration_ms"`

	// Err is why the platform could not run it (Status error), with its
	// code (a team quota is EQuota); not stored.
	Err error `json:"-"`
}

// Store keeps functions, their versions and invocations
// (internal/store/sqlite implements it).
type Store interface {
	// AddFunctionVersion records v as the newest version of team's
	// function name (created when new) and returns the function with v
	// numbered.
	AddFunctionVersion(ctx context.Context, teamID, name, newID string, v Version) (Function, error)
	// GetFunction is team's function by name with its latest version
	// (ENotFound when there is none).
	GetFunction(ctx context.Context, teamID, name string) (Function, error)
	// ListFunctions lists team's functions (every team's for "").
	ListFunctions(ctx context.Context, teamID string) ([]Function, error)
	ListFunctionVersions(ctx context.Context, functionID string) ([]Version, error)
	// DeleteFunction removes a function with its versions and invocations.
	DeleteFunction(ctx context.Context, functionID string) error
	// PutInvocation writes an invocation (insert or replace).
	PutInvocation(ctx context.Context, inv Invocation) error
	GetInvocation(ctx context.Context, functionID, id string) (Invocation, error)
	// UnfinishedInvocations are the queued or running invocations (after
	// a restart: ones that will never end by themselves).
	UnfinishedInvocations(ctx context.Context) ([]Invocation, error)
}
