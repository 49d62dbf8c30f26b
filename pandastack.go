// Package pandastack holds the vocabulary shared by every part of PandaStack:
// sandboxes, templates, teams and API keys, the error codes users see, and the
// interfaces (Store, Engine) that the server is assembled from. It imports only
// the standard library; each dependency (QEMU, SQLite, HTTP) lives in its own
// package that speaks these types.
package pandastack

import (
	"context"
	"io"
	"net"
	"strings"
	"time"
)

// Version is the product version reported by the server, CLI and agents.
var Version = "0.1.0-dev"

// SandboxState is where a sandbox is in its lifecycle.
type SandboxState string

const (
	StateStarting SandboxState = "starting"
	StateRunning  SandboxState = "running"
	// StateHibernated: the VM's full state is on disk and it holds no memory
	// or CPU; any use wakes it.
	StateHibernated SandboxState = "hibernated"
	StateKilled     SandboxState = "killed"
	StateExpired    SandboxState = "expired"
	StateFailed     SandboxState = "failed"
)

// LiveStates are the states of a sandbox that has not ended.
var LiveStates = []SandboxState{StateStarting, StateRunning, StateHibernated}

// Live reports whether a sandbox in this state has not ended (it runs, or
// sleeps and wakes on use).
func (s SandboxState) Live() bool {
	return s == StateStarting || s == StateRunning || s == StateHibernated
}

// Accel names the hardware accelerator a VM runs under.
type Accel string

const (
	AccelKVM Accel = "kvm"
	AccelTCG Accel = "tcg"
)

// Isolation says plainly what an accelerator means for untrusted code.
func (a Accel) Isolation() string {
	if a == AccelKVM {
		return "hardware-isolated (KVM)"
	}
	return "software emulation (TCG): fine for development and CI, NOT a security boundary for untrusted code"
}

// Sandbox is a microVM restored from a template and owned by a team.
type Sandbox struct {
	ID         string            `json:"id"`
	TeamID     string            `json:"team_id"`
	Template   string            `json:"template"`
	TemplateID string            `json:"template_id"` // the exact baked build it came from
	State      SandboxState      `json:"state"`
	Host       string            `json:"host"`
	Accel      Accel             `json:"accel"`
	Metadata   map[string]string `json:"metadata"`
	Env        map[string]string `json:"env,omitempty"`
	CPUs       int               `json:"cpus"`
	MemoryMiB  int               `json:"memory_mib"`
	DiskMiB    int               `json:"disk_mib,omitempty"`
	// TemplateVersion is the version number of the template build it came
	// from (0 when unknown).
	TemplateVersion int       `json:"template_version,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
	// ExpiresAt is when its TTL runs out; zero (and left out of JSON) for
	// a service machine, which has no TTL.
	ExpiresAt time.Time  `json:"expires_at,omitzero"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	EndReason string     `json:"end_reason,omitempty"`
	// Network is the sandbox's network policy and Domain the domain its
	// ports are served under (PORT-ID.Domain); the API fills both in.
	Network *NetworkPolicy `json:"network,omitempty"`
	Domain  string         `json:"domain,omitempty"`
	// Volumes are the durable volumes attached to it (by id); the API
	// fills them in from the volumes' records.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// AutoHibernateSeconds, when above 0, hibernates the sandbox after that
	// many seconds without activity (see README, "Auto-hibernate").
	AutoHibernateSeconds int `json:"auto_hibernate_seconds,omitempty"`
	// Lifetime is its lifetime class: LifetimeSandbox ("" in records made
	// before service machines existed) or LifetimeService.
	Lifetime Lifetime `json:"lifetime,omitempty"`
	// Defaults are its template's command defaults, captured at create (nil
	// on records made before they were captured).
	Defaults *CommandDefaults `json:"-"`
	// ManagedBy names the platform service that owns the machine — a
	// database's ("database:ID"), an app's ("app:ID"), a function's
	// ("function:ID") —, "" for a sandbox of the team's own. The sandbox
	// API lists such a machine but changes it only through its service.
	ManagedBy string `json:"managed_by,omitempty"`
	// OnExpiry is what its TTL's end does: "" ends it, OnExpiryHibernate
	// hibernates it (its deadline is then cleared until it is woken).
	OnExpiry OnExpiry `json:"on_expiry,omitempty"`
}

// SplitManagedBy splits a ManagedBy value ("database:db-orders") into the
// service's kind and the resource's id.
func SplitManagedBy(managedBy string) (kind, id string) {
	kind, id, _ = strings.Cut(managedBy, ":")
	return kind, id
}

// Lifetime is a machine's lifetime class.
type Lifetime string

// Lifetime classes.
const (
	// LifetimeSandbox is a sandbox: it ends when its TTL (at most the
	// server's maximum, 24 h by default) runs out.
	LifetimeSandbox Lifetime = "sandbox"
	// LifetimeService is a service machine (a database, an app release, a
	// function runtime, or a sandbox created as one): no TTL and no cap on
	// its life, never reaped, re-attached after a server or host restart
	// (or recorded failed, with the reason, when its VM did not survive),
	// hibernated and woken on demand. A team's service machines are listed
	// and capped on their own.
	LifetimeService Lifetime = "service"
)

// Expiry is when a machine of class l started at now with ttl ends: never
// (the zero time) for a service machine.
func (l Lifetime) Expiry(now time.Time, ttl time.Duration) time.Time {
	if l.IsService() {
		return time.Time{}
	}
	return now.Add(ttl)
}

// NoTTLError is the error for a TTL asked of service machine id.
func NoTTLError(id string) error {
	return Errorf(EInvalid, "%s is a service machine: it has no TTL (kill it to end it)", id)
}

// IsService reports whether l is the service class.
func (l Lifetime) IsService() bool { return l == LifetimeService }

// ParseLifetime checks a lifetime given by a user: "" is a sandbox.
func ParseLifetime(s string) (Lifetime, error) {
	switch Lifetime(s) {
	case "", LifetimeSandbox:
		return LifetimeSandbox, nil
	case LifetimeService:
		return LifetimeService, nil
	}
	return "", Errorf(EInvalid, "lifetime must be %q or %q, got %q", LifetimeSandbox, LifetimeService, s)
}

// Template is a baked guest image sandboxes are created from. It belongs to
// a team, or (TeamID "") to the public catalog every team sees.
type Template struct {
	TeamID    string    `json:"team_id,omitempty"`
	Name      string    `json:"name"`
	ID        string    `json:"id"` // content key of the build inputs
	CPUs      int       `json:"cpus"`
	MemoryMiB int       `json:"memory_mib"`
	DiskMiB   int       `json:"disk_mib"`
	Accel     Accel     `json:"accel"`
	Dir       string    `json:"-"`
	BuiltAt   time.Time `json:"built_at"`
	BuildMs   int64     `json:"build_ms"`
	Version   int       `json:"version,omitempty"` // 1, 2, ... per name; 0 when not versioned
	// Defaults are what every command in its sandboxes starts with (a
	// custom template's ENV, WORKDIR and USER); the host that holds the
	// build knows them.
	Defaults CommandDefaults `json:"-"`
}

// TemplateVersion is one build of a template, kept while anything may still
// use it. Tags (e.g. "latest", "v2") name versions; "latest" is the newest.
type TemplateVersion struct {
	Name      string    `json:"name"`
	Version   int       `json:"version"`
	ID        string    `json:"id"` // the build's content key
	Tags      []string  `json:"tags"`
	CPUs      int       `json:"cpus"`
	MemoryMiB int       `json:"memory_mib"`
	DiskMiB   int       `json:"disk_mib"`
	BuildID   string    `json:"build_id,omitempty"` // the build run that made it (its log)
	BuiltAt   time.Time `json:"built_at"`
}

// TemplateBuild is one run of a template build: its status, its steps
// (and which came from the cache), and its kept log.
type TemplateBuild struct {
	ID         string      `json:"id"`
	TeamID     string      `json:"team_id,omitempty"` // "" for the public catalog
	Name       string      `json:"name"`
	Status     string      `json:"status"` // "running", "succeeded", "failed"
	Version    int         `json:"version,omitempty"`
	TemplateID string      `json:"template_id,omitempty"`
	Error      *Error      `json:"error,omitempty"`
	Steps      []BuildStep `json:"steps"`
	StartedAt  time.Time   `json:"started_at"`
	EndedAt    *time.Time  `json:"ended_at,omitempty"`
}

// BuildStep is one step of a custom template build.
type BuildStep struct {
	Number      int     `json:"number"` // from 1
	Line        int     `json:"line"`
	Instruction string  `json:"instruction"`
	Cached      bool    `json:"cached"`
	DurationMs  float64 `json:"duration_ms"`
}

// CustomBuild asks for a template built from a spec file and a build
// context (a directory on the server's host).
type CustomBuild struct {
	// TeamID owns the template ("" for the public catalog). Builds of
	// different teams share nothing: not a step, not a bake.
	TeamID  string
	Name    string // template name
	Tag     string // optional extra tag for the new version
	Spec    []byte
	Context string
	// CPUs, MemoryMiB, DiskGiB override the spec's and the parent's size.
	CPUs, MemoryMiB, DiskGiB int
	// ResolveFrom, when set, turns the spec's FROM reference into the exact
	// build ("name@ID") this team may build on; the registry's rule.
	ResolveFrom func(ctx context.Context, ref string) (string, error)
	// Run, when set, records the build run: it is started once the spec
	// and the context are found valid (a refused build leaves no run).
	Run BuildRun
}

// BuildRun is where a builder reports a custom build run (the template
// registry keeps it).
type BuildRun interface {
	// Start begins the run; what the build prints from then on also goes
	// to the writer it returns (the run's kept log).
	Start(ctx context.Context) (io.Writer, error)
	// Step records a finished step.
	Step(s BuildStep)
}

// Snapshot is a saved sandbox — memory, processes, disk — that new
// sandboxes can be created from, any number of times.
type Snapshot struct {
	ID         string    `json:"id"`
	TeamID     string    `json:"team_id"`
	Name       string    `json:"name"`
	SandboxID  string    `json:"sandbox_id"` // the sandbox it was taken of
	Template   string    `json:"template"`
	TemplateID string    `json:"template_id"`
	Host       string    `json:"host"`
	SizeBytes  int64     `json:"size_bytes"`
	CreatedAt  time.Time `json:"created_at"`
	// ObjectKey is where the snapshot is exported in object storage ("" if
	// it is not), ExportedAt when the export finished; ExportError says
	// why the last export failed. A snapshot with an ObjectKey can be
	// imported on another server, and restored here after its local files
	// are lost.
	ObjectKey   string    `json:"object_key,omitempty"`
	ExportedAt  time.Time `json:"exported_at,omitzero"`
	ExportError string    `json:"export_error,omitempty"`
}

// Volume is a durable disk a team creates once and attaches to sandboxes at
// create, mounted at a path. Its data outlives every sandbox it is attached
// to. A volume is attached writable to at most one live (running or
// hibernated) sandbox at a time; forks and snapshot restores of that
// sandbox get private copy-on-write copies instead (see README, Volumes).
type Volume struct {
	ID        string    `json:"id"` // "vol_..."
	TeamID    string    `json:"team_id"`
	Name      string    `json:"name"` // unique in the team
	SizeMiB   int       `json:"size_mib"`
	CreatedAt time.Time `json:"created_at"`
	// SandboxID is the live sandbox it is attached to ("" when free), at
	// MountPath in the guest, in the VM's volume slot Slot.
	SandboxID string `json:"sandbox_id"`
	MountPath string `json:"mount_path,omitempty"`
	Slot      int    `json:"-"`
	Host      string `json:"host"`
	// ManagedBy names the platform service whose volume it is (a
	// database's data: "database:ID"), "" for the team's own. Such a
	// volume goes with its service's resource and attaches only to that
	// service's machines.
	ManagedBy string `json:"managed_by,omitempty"`
}

// VolumeMount asks for a volume (by id or name) mounted at Path in a new
// sandbox.
type VolumeMount struct {
	Volume string `json:"volume"`
	Path   string `json:"path"`
}

// Volume limits: a size in MiB between these, and at most MaxVolumeMounts
// volumes per sandbox (the VM's volume slots).
const (
	MinVolumeMiB    = 16
	MaxVolumeMiB    = 1 << 20 // 1 TiB
	MaxVolumeMounts = 2
)

// Team is a tenant. Keys and sandboxes belong to exactly one team.
type Team struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// APIKey is a credential. Only a hash of the secret is ever stored.
type APIKey struct {
	ID        string     `json:"id"`
	TeamID    string     `json:"team_id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"` // first characters of the key, for display
	Hash      string     `json:"-"`
	Admin     bool       `json:"admin"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// SandboxFilter narrows a sandbox listing.
type SandboxFilter struct {
	TeamID   string
	Metadata map[string]string
	LiveOnly bool
	Host     string
	// Lifetime, when set, matches that class only (LifetimeSandbox also
	// matches records without one).
	Lifetime Lifetime
}

// Store persists control-plane state. Implementations: store/sqlite.
// Methods return *Error with code NotFound or Conflict where those apply.
type Store interface {
	CreateTeam(ctx context.Context, t Team) error
	GetTeam(ctx context.Context, id string) (Team, error)
	TeamByName(ctx context.Context, name string) (Team, error)

	CreateAPIKey(ctx context.Context, k APIKey) error
	APIKeyByHash(ctx context.Context, hash string) (APIKey, error)
	CountAPIKeys(ctx context.Context) (int, error)
	// GetAPIKey returns the key with that id, revoked or not (ENotFound if
	// none).
	GetAPIKey(ctx context.Context, id string) (APIKey, error)
	// ListAPIKeys lists a team's keys, revoked ones included, oldest first;
	// with teamID "" every team's (for admins).
	ListAPIKeys(ctx context.Context, teamID string) ([]APIKey, error)
	// RevokeAPIKey marks a key revoked at the given time and returns it; a
	// key revoked before keeps its first time. ENotFound if there is none.
	// A revoked key is never returned by APIKeyByHash again.
	RevokeAPIKey(ctx context.Context, id string, at time.Time) (APIKey, error)

	// GetTeamQuotas returns a team's quota overrides (ENotFound when none
	// were ever stored). PutTeamQuotas stores them, replacing what was
	// there (ENotFound when the team does not exist).
	GetTeamQuotas(ctx context.Context, teamID string) (TeamQuotas, error)
	PutTeamQuotas(ctx context.Context, q TeamQuotas) error

	PutSandbox(ctx context.Context, s Sandbox) error
	GetSandbox(ctx context.Context, id string) (Sandbox, error)
	ListSandboxes(ctx context.Context, f SandboxFilter) ([]Sandbox, error)
	CountLiveSandboxes(ctx context.Context, teamID string) (int, error)

	// CreateSnapshot fails with EConflict when the team has a snapshot of
	// that name.
	CreateSnapshot(ctx context.Context, s Snapshot) error
	GetSnapshot(ctx context.Context, id string) (Snapshot, error)
	// ListSnapshots lists a team's snapshots, oldest first; with teamID ""
	// every team's.
	ListSnapshots(ctx context.Context, teamID string) ([]Snapshot, error)
	DeleteSnapshot(ctx context.Context, id string) error
	// SetSnapshotExport records a snapshot's export: its object key and
	// time, or (exportErr != "") why it failed. ENotFound if it is gone.
	SetSnapshotExport(ctx context.Context, id, objectKey string, exportedAt time.Time, exportErr string) error

	// CreateVolume fails with EConflict when the team has a volume of that
	// name.
	CreateVolume(ctx context.Context, v Volume) error
	GetVolume(ctx context.Context, id string) (Volume, error)
	// VolumeByName finds a team's volume by name (ENotFound if none).
	VolumeByName(ctx context.Context, teamID, name string) (Volume, error)
	// ListVolumes lists a team's volumes, oldest first; with teamID "" every
	// team's.
	ListVolumes(ctx context.Context, teamID string) ([]Volume, error)
	// DeleteVolume removes a free volume: EConflict when it is attached.
	DeleteVolume(ctx context.Context, id string) error
	// AttachVolume attaches a free volume to a sandbox, atomically: of two
	// callers only one wins, the other gets EConflict.
	AttachVolume(ctx context.Context, id, sandboxID, mountPath string, slot int) error
	// MoveVolumes hands every volume attached to sandbox from over to
	// sandbox to.
	MoveVolumes(ctx context.Context, from, to string) error
	// DetachVolumes frees every volume attached to the sandbox.
	DetachVolumes(ctx context.Context, sandboxID string) error

	TemplateStore

	Close() error
}

// ExecRequest runs a command inside a sandbox.
type ExecRequest struct {
	// Cmd is run with /bin/sh -c. Either Cmd or Args is set.
	Cmd            string            `json:"cmd,omitempty"`
	Args           []string          `json:"args,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	User           string            `json:"user,omitempty"`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty"`
	Stdin          []byte            `json:"stdin,omitempty"`
	Background     bool              `json:"background,omitempty"`
	// Follow, with Background, streams the background process's output
	// and its end on the same call, as an attach would, in one round trip
	// to the guest: the process still outlives a caller that goes away.
	Follow bool `json:"-"`
}

// ExecResult is how a command ended.
type ExecResult struct {
	ExitCode   int     `json:"exit_code"`
	Signal     string  `json:"signal,omitempty"`
	TimedOut   bool    `json:"timed_out"`
	DurationMs float64 `json:"duration_ms"`
}

// ExecEvent is one item of a streamed exec: output, a start notice, or the end.
type ExecEvent struct {
	Type   string      `json:"type"` // "start", "stdout", "stderr", "exit", "error"
	PID    int         `json:"pid,omitempty"`
	Data   []byte      `json:"data,omitempty"`
	Result *ExecResult `json:"result,omitempty"`
	Error  *Error      `json:"error,omitempty"`
}

// Process is a command running in a sandbox.
type Process struct {
	PID        int       `json:"pid"`
	Cmd        string    `json:"cmd"`
	Args       []string  `json:"args"`
	Background bool      `json:"background"`
	Running    bool      `json:"running"`
	ExitCode   *int      `json:"exit_code,omitempty"`
	StartedAt  time.Time `json:"started_at"`
}

// FileInfo describes a path inside a sandbox.
type FileInfo struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"`
	IsDir   bool      `json:"is_dir"`
	ModTime time.Time `json:"mod_time"`
	Link    string    `json:"symlink_target,omitempty"`
}

// CreateRequest asks for a new sandbox.
type CreateRequest struct {
	TeamID   string
	Template string
	TTL      time.Duration
	Metadata map[string]string
	Env      map[string]string
	// Snapshot, when set, is the id of a snapshot to start from instead of
	// the template's bake.
	Snapshot string
	// CPUs, MemoryMiB and DiskGiB, when set, ask for that size instead of
	// the template's: the matching variant is baked once and reused.
	CPUs, MemoryMiB, DiskGiB int
	// Network, when set, is the sandbox's network policy (normalized);
	// nil allows all egress.
	Network *NetworkPolicy
	// Volumes are mounted in the new sandbox (at most MaxVolumeMounts; not
	// with Snapshot).
	Volumes []VolumeMount
	// AutoHibernate, when above 0, hibernates the sandbox after that long
	// without activity.
	AutoHibernate time.Duration
	// Lifetime is the machine's class; LifetimeService ignores TTL (a
	// service machine has none).
	Lifetime Lifetime
	// TemplateVersion is the version the template reference resolved to
	// (the registry numbers versions; hosts know builds only). 0: unknown.
	TemplateVersion int
	// ManagedBy is the owning service of a platform machine (see
	// Sandbox.ManagedBy).
	ManagedBy string
	// OnExpiry is what the TTL's end does (Sandbox.OnExpiry).
	OnExpiry OnExpiry
	// DeferSession starts the guest agent's session at the first use of
	// the sandbox's guest instead of before the create answers: the
	// caller reaches the VM on its direct port first and does in the
	// guest what the agent's hello does (reseed the kernel's RNG, step
	// the clock), or begins the session before the guest runs anything
	// of a user's. With Snapshot only.
	DeferSession bool
}

// Guest is the live connection to one sandbox's guest agent.
type Guest interface {
	// Exec starts a command; events are delivered to fn in order. For a
	// background command Exec returns after the start event.
	Exec(ctx context.Context, req ExecRequest, stdin io.Reader, fn func(ExecEvent) error) (ExecResult, error)
	Processes(ctx context.Context) ([]Process, error)
	Attach(ctx context.Context, pid int, fn func(ExecEvent) error) (ExecResult, error)
	Signal(ctx context.Context, pid int, signal string) error
	ReadFile(ctx context.Context, path string, w io.Writer, start func(FileInfo) error) error
	WriteFile(ctx context.Context, path string, mode uint32, r io.Reader) (FileInfo, error)
	ListDir(ctx context.Context, path string) ([]FileInfo, error)
	Stat(ctx context.Context, path string) (FileInfo, error)
	MakeDir(ctx context.Context, path string) error
	Remove(ctx context.Context, path string, recursive bool) error
	Rename(ctx context.Context, from, to string) error
	Ping(ctx context.Context) (time.Duration, error)
	// DialPort connects to a TCP port a process in the sandbox listens on
	// (on its loopback). A port nobody listens on answers ERefused.
	DialPort(ctx context.Context, port int) (net.Conn, error)
	// Terminal starts a command on a pseudo-terminal (terminal.go). ctx
	// bounds the start only: the terminal lives until it ends or is closed.
	Terminal(ctx context.Context, req TerminalRequest) (Terminal, error)
	// WatchDir reports changes under a directory (the tree, if recursive)
	// to fn until ctx ends (it returns nil) or fn fails; start is called
	// once the watch is in place.
	WatchDir(ctx context.Context, path string, recursive bool, start func() error, fn func(FileEvent) error) error
}

// Engine runs sandboxes on a host and keeps their records. Implemented by
// internal/sandboxes.Engine over a host (internal/hostapi.Host).
type Engine interface {
	Accel() Accel
	Create(ctx context.Context, req CreateRequest) (Sandbox, error)
	Guest(ctx context.Context, id string) (Guest, error)
	Kill(ctx context.Context, id string, reason SandboxState) error
	SetTTL(ctx context.Context, id string, ttl time.Duration) (Sandbox, error)
	// Hibernate saves the sandbox's whole state to disk and frees its memory
	// and CPU; Wake (or any use through Guest) brings it back exactly.
	Hibernate(ctx context.Context, id string) (Sandbox, error)
	Wake(ctx context.Context, id string) (Sandbox, error)
	// Fork makes count copy-on-write children of a running sandbox, each
	// starting from its exact state; the parent keeps running.
	Fork(ctx context.Context, id string, count int) ([]Sandbox, error)
	// Snapshot saves a running sandbox (it runs on) under a name unique in
	// its team; DeleteSnapshot removes one.
	Snapshot(ctx context.Context, id, name string) (Snapshot, error)
	DeleteSnapshot(ctx context.Context, snapshotID string) error
	// CreateVolume makes a formatted, empty volume on this host: EInvalid
	// for a bad name or size, EInsufficientStorage when the size exceeds the free disk,
	// EConflict for a taken name. DeleteVolume removes a free one (EConflict
	// when attached).
	CreateVolume(ctx context.Context, teamID, name string, sizeMiB int) (Volume, error)
	DeleteVolume(ctx context.Context, id string) error
}

// TemplateBuilder builds (or finds in its cache) and bakes a named template,
// writing human-readable progress lines to log.
type TemplateBuilder interface {
	Build(ctx context.Context, name string, log io.Writer) (Template, error)
}
