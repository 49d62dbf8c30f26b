package pandastack

import (
	"context"
	"net/url"
	"time"
)

// Sandbox is a microVM and a handle to operate on it. Its fields are a
// snapshot from the server; Refresh updates them.
type Sandbox struct {
	ID         string            `json:"id"`
	TeamID     string            `json:"team_id"`
	Template   string            `json:"template"`
	TemplateID string            `json:"template_id"`
	State      string            `json:"state"` // starting, running, killed, expired, failed
	Host       string            `json:"host"`
	Accel      string            `json:"accel"` // kvm or tcg
	Metadata   map[string]string `json:"metadata"`
	Env        map[string]string `json:"env,omitempty"`
	CPUs       int               `json:"cpus"`
	MemoryMiB  int               `json:"memory_mib"`
	DiskMiB    int               `json:"disk_mib,omitempty"`
	// TemplateVersion is the version of the template build it came from.
	TemplateVersion int        `json:"template_version,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	ExpiresAt       time.Time  `json:"expires_at"` // zero for a service machine
	EndedAt         *time.Time `json:"ended_at,omitempty"`
	EndReason       string     `json:"end_reason,omitempty"`
	// Network is the sandbox's network policy (nil when the server gives
	// sandboxes no network); Domain is where its ports are served (Host).
	Network *NetworkPolicy `json:"network,omitempty"`
	Domain  string         `json:"domain,omitempty"`
	// Volumes are the durable volumes attached to it (Volume is the id).
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// AutoHibernateSeconds is its idle time before it is hibernated (0:
	// never).
	AutoHibernateSeconds int `json:"auto_hibernate_seconds,omitempty"`
	// Lifetime is "sandbox" or "service" (a service machine: no TTL, so
	// ExpiresAt is zero; see CreateSandboxParams.Lifetime).
	Lifetime string `json:"lifetime,omitempty"`
	// ManagedBy names the platform service that owns the machine
	// ("database:ID", "app:NAME", "function:NAME"); such a machine is
	// changed only through its service (other sandbox calls answer 409).
	ManagedBy string `json:"managed_by,omitempty"`
	// OnExpiry is "hibernate" when its TTL's end hibernates it ("": ends it).
	OnExpiry string `json:"on_expiry,omitempty"`

	c *Client
}

// Live reports whether the sandbox was running when last fetched.
func (s *Sandbox) Live() bool {
	return s.State == "starting" || s.State == "running" || s.State == "hibernated"
}

// CreateSandboxParams describes a new sandbox.
type CreateSandboxParams struct {
	Template string // required, e.g. "base"
	// TTLSeconds is how long the sandbox lives (0: the server's default,
	// 5 minutes unless configured otherwise). SetTTL changes it later.
	TTLSeconds int
	Metadata   map[string]string // labels, usable as ListSandboxes filters
	Env        map[string]string // environment of every command
	Snapshot   string            // start from this snapshot instead of the template
	// CPUs and MemoryMiB ask for another size than the template's (0: its
	// own); the server bakes that variant once, then reuses it.
	CPUs, MemoryMiB int
	// DiskGiB asks for a bigger root disk than the template's (0: its own).
	DiskGiB int
	Network *NetworkPolicy // egress policy and public ports (nil: allow all, no public ports)
	// Volumes are durable volumes to mount (at most 2; not with Snapshot).
	Volumes []VolumeMount
	// AutoHibernateSeconds hibernates the sandbox after that many seconds
	// without an exec, file, port or run_code request (0: never); any later
	// use wakes it.
	AutoHibernateSeconds int
	// Lifetime "service" makes a service machine: no TTL (leave
	// TTLSeconds 0), never reaped, re-attached after server restarts,
	// listed by ListMachines and capped per team. "" is a sandbox.
	Lifetime string
	// OnExpiry "hibernate" hibernates the sandbox when its TTL runs out
	// instead of ending it (E2B's autoPause): it sleeps, its disk kept and
	// counted, until it is woken (it then gets its TTL again) or killed.
	// "" or "kill" ends it.
	OnExpiry string
}

// CreateSandbox starts a sandbox from a template.
func (c *Client) CreateSandbox(ctx context.Context, p CreateSandboxParams) (*Sandbox, error) {
	body := struct {
		Template   string            `json:"template"`
		TTLSeconds int               `json:"ttl_seconds,omitempty"`
		Metadata   map[string]string `json:"metadata,omitempty"`
		Env        map[string]string `json:"env,omitempty"`
		Snapshot   string            `json:"snapshot,omitempty"`
		CPUs       int               `json:"cpus,omitempty"`
		MemoryMiB  int               `json:"memory_mib,omitempty"`
		DiskGiB    int               `json:"disk_gib,omitempty"`
		Network    *NetworkPolicy    `json:"network,omitempty"`
		AutoHib    int               `json:"auto_hibernate_seconds,omitempty"`
		Volumes    []VolumeMount     `json:"volumes,omitempty"`
		Lifetime   string            `json:"lifetime,omitempty"`
		OnExpiry   string            `json:"on_expiry,omitempty"`
	}{p.Template, p.TTLSeconds, p.Metadata, p.Env, p.Snapshot, p.CPUs, p.MemoryMiB, p.DiskGiB, p.Network, p.AutoHibernateSeconds, p.Volumes,
		p.Lifetime, p.OnExpiry}
	sb := &Sandbox{c: c}
	if err := c.do(ctx, request{method: "POST", path: "/v1/sandboxes", body: body}, sb); err != nil {
		return nil, err
	}
	return sb, nil
}

// GetSandbox fetches a sandbox, live or ended.
func (c *Client) GetSandbox(ctx context.Context, id string) (*Sandbox, error) {
	sb := &Sandbox{c: c}
	if err := c.do(ctx, request{method: "GET", path: sandboxPath(id)}, sb); err != nil {
		return nil, err
	}
	return sb, nil
}

// Sandbox returns a handle for the sandbox id without fetching it; its
// fields other than ID are empty until Refresh.
func (c *Client) Sandbox(id string) *Sandbox { return &Sandbox{ID: id, c: c} }

// ListParams filters ListSandboxes.
type ListParams struct {
	Metadata map[string]string // all must match
	All      bool              // include ended sandboxes
}

// ListSandboxes lists the team's sandboxes, oldest first.
func (c *Client) ListSandboxes(ctx context.Context, p ListParams) ([]*Sandbox, error) {
	q := url.Values{}
	if p.All {
		q.Set("state", "all")
	}
	for k, v := range p.Metadata {
		q.Set("metadata."+k, v)
	}
	var out struct {
		Sandboxes []*Sandbox `json:"sandboxes"`
	}
	if err := c.do(ctx, request{method: "GET", path: "/v1/sandboxes", query: q}, &out); err != nil {
		return nil, err
	}
	for _, s := range out.Sandboxes {
		s.c = c
	}
	return out.Sandboxes, nil
}

// MachineList is a team's service machines and its cap on them.
type MachineList struct {
	Machines []*Sandbox `json:"machines"`
	Count    int        `json:"count"` // live ones
	Limit    int        `json:"limit"` // the team's cap (0: none)
}

// ListMachines lists the team's service machines, oldest first: the live
// ones, or with all every one (one whose VM did not survive a restart is
// failed, with the reason in EndReason).
func (c *Client) ListMachines(ctx context.Context, all bool) (*MachineList, error) {
	q := url.Values{}
	if all {
		q.Set("state", "all")
	}
	var out MachineList
	if err := c.do(ctx, request{method: "GET", path: "/v1/machines", query: q}, &out); err != nil {
		return nil, err
	}
	for _, s := range out.Machines {
		s.c = c
	}
	return &out, nil
}

func sandboxPath(id string) string { return "/v1/sandboxes/" + url.PathEscape(id) }

func (s *Sandbox) path(rest string) string { return sandboxPath(s.ID) + rest }

// load performs r and replaces the sandbox's fields with the answer.
func (s *Sandbox) load(ctx context.Context, r request) error {
	fresh := Sandbox{c: s.c}
	if err := s.c.do(ctx, r, &fresh); err != nil {
		return err
	}
	*s = fresh
	return nil
}

// Refresh reloads the sandbox's fields from the server.
func (s *Sandbox) Refresh(ctx context.Context) error {
	return s.load(ctx, request{method: "GET", path: s.path("")})
}

// Kill ends the sandbox. Killing a sandbox that has already ended is not an
// error.
func (s *Sandbox) Kill(ctx context.Context) error {
	return s.c.do(ctx, request{method: "DELETE", path: s.path("")}, nil)
}

// SetTTL makes the sandbox expire seconds from now, and updates ExpiresAt.
func (s *Sandbox) SetTTL(ctx context.Context, seconds int) error {
	body := struct {
		TTLSeconds int `json:"ttl_seconds"`
	}{seconds}
	return s.load(ctx, request{method: "PUT", path: s.path("/ttl"), body: body})
}

// Process is a command started in a sandbox.
type Process struct {
	PID        int       `json:"pid"`
	Cmd        string    `json:"cmd"`
	Args       []string  `json:"args"`
	Background bool      `json:"background"`
	Running    bool      `json:"running"`
	ExitCode   *int      `json:"exit_code,omitempty"`
	StartedAt  time.Time `json:"started_at"`
}

// Processes lists the commands started in the sandbox.
func (s *Sandbox) Processes(ctx context.Context) ([]Process, error) {
	var out struct {
		Processes []Process `json:"processes"`
	}
	if err := s.c.do(ctx, request{method: "GET", path: s.path("/processes")}, &out); err != nil {
		return nil, err
	}
	return out.Processes, nil
}

// Hibernate saves the sandbox whole (memory, processes, disk) and frees its
// memory and CPU on the host. Its TTL keeps counting; any use wakes it.
func (s *Sandbox) Hibernate(ctx context.Context) error {
	return s.c.do(ctx, request{method: "POST", path: sandboxPath(s.ID) + "/hibernate"}, s)
}

// Wake brings a hibernated sandbox back exactly as it was.
func (s *Sandbox) Wake(ctx context.Context) error {
	return s.c.do(ctx, request{method: "POST", path: sandboxPath(s.ID) + "/wake"}, s)
}

// Fork makes a copy-on-write child of the running sandbox: it starts from
// this sandbox's exact state (memory, processes, disk); this one runs on.
func (s *Sandbox) Fork(ctx context.Context) (*Sandbox, error) {
	kid := &Sandbox{c: s.c}
	if err := s.c.do(ctx, request{method: "POST", path: sandboxPath(s.ID) + "/fork"}, kid); err != nil {
		return nil, err
	}
	return kid, nil
}

// ForkN makes count children at once (1-10).
func (s *Sandbox) ForkN(ctx context.Context, count int) ([]*Sandbox, error) {
	var out struct {
		Sandboxes []*Sandbox `json:"sandboxes"`
	}
	body := map[string]int{"count": count}
	if err := s.c.do(ctx, request{method: "POST", path: sandboxPath(s.ID) + "/fork", body: body}, &out); err != nil {
		return nil, err
	}
	for _, k := range out.Sandboxes {
		k.c = s.c
	}
	return out.Sandboxes, nil
}

// SnapshotInfo describes a saved sandbox.
type SnapshotInfo struct {
	ID         string    `json:"id"`
	TeamID     string    `json:"team_id"`
	Name       string    `json:"name"`
	SandboxID  string    `json:"sandbox_id"`
	Template   string    `json:"template"`
	TemplateID string    `json:"template_id"`
	Host       string    `json:"host"`
	SizeBytes  int64     `json:"size_bytes"`
	CreatedAt  time.Time `json:"created_at"`
	// ObjectKey is where the snapshot is exported in object storage (""
	// until it is); ImportSnapshot takes it. ExportedAt is when;
	// ExportError why the last export failed.
	ObjectKey   string    `json:"object_key,omitempty"`
	ExportedAt  time.Time `json:"exported_at,omitzero"`
	ExportError string    `json:"export_error,omitempty"`
}

// ExportSnapshot exports a snapshot to the server's object storage and
// returns it with ObjectKey set; an exported one answers at once.
func (c *Client) ExportSnapshot(ctx context.Context, id string) (*SnapshotInfo, error) {
	sn := &SnapshotInfo{}
	if err := c.do(ctx, request{method: "POST", path: "/v1/snapshots/" + url.PathEscape(id) + "/export"}, sn); err != nil {
		return nil, err
	}
	return sn, nil
}

// ImportSnapshot makes a snapshot of the caller's team from the export at
// key (an ObjectKey, also another server's), verified; name "" keeps the
// exported name.
func (c *Client) ImportSnapshot(ctx context.Context, key, name string) (*SnapshotInfo, error) {
	sn := &SnapshotInfo{}
	body := map[string]string{"object_key": key}
	if name != "" {
		body["name"] = name
	}
	if err := c.do(ctx, request{method: "POST", path: "/v1/snapshots", body: body}, sn); err != nil {
		return nil, err
	}
	return sn, nil
}

// Snapshot saves the running sandbox whole (memory, processes, disk) under
// name (empty: the id is the name); it runs on. Start new sandboxes from it
// with CreateSandboxParams.Snapshot.
func (s *Sandbox) Snapshot(ctx context.Context, name string) (*SnapshotInfo, error) {
	var body any
	if name != "" {
		body = map[string]string{"name": name}
	}
	sn := &SnapshotInfo{}
	if err := s.c.do(ctx, request{method: "POST", path: sandboxPath(s.ID) + "/snapshot", body: body}, sn); err != nil {
		return nil, err
	}
	return sn, nil
}

// ListSnapshots lists the team's snapshots, oldest first.
func (c *Client) ListSnapshots(ctx context.Context) ([]SnapshotInfo, error) {
	var out struct {
		Snapshots []SnapshotInfo `json:"snapshots"`
	}
	err := c.do(ctx, request{method: "GET", path: "/v1/snapshots"}, &out)
	return out.Snapshots, err
}

// DeleteSnapshot deletes a snapshot; sandboxes made from it are not affected.
func (c *Client) DeleteSnapshot(ctx context.Context, id string) error {
	return c.do(ctx, request{method: "DELETE", path: "/v1/snapshots/" + url.PathEscape(id)}, nil)
}
