package pandastack

import (
	"context"
	"encoding/json"
	"net/url"
)

// Quotas are a team's limits (0: no limit), which of them were set for
// the team (the others are the server's defaults), and what it holds now.
type Quotas struct {
	Team                string     `json:"team"`
	TeamID              string     `json:"team_id"`
	MaxSandboxes        int        `json:"max_sandboxes"`
	MaxServiceMachines  int        `json:"max_service_machines"`
	MaxSnapshots        int        `json:"max_snapshots"`
	MaxVolumes          int        `json:"max_volumes"`
	MaxConcurrentBuilds int        `json:"max_concurrent_builds"`
	MaxVCPUs            int        `json:"max_vcpus"`
	MaxMemoryMiB        int        `json:"max_memory_mib"`
	MaxDiskGiB          int        `json:"max_disk_gib"`
	RequestsPerSecond   float64    `json:"requests_per_second"`
	Burst               int        `json:"burst"`
	Overridden          []string   `json:"overridden"`
	Usage               QuotaUsage `json:"usage"`
	// Storage is the host's VM filesystem and its reserve (admin keys
	// only; nil otherwise).
	Storage *StorageStatus `json:"storage,omitempty"`
}

// StorageStatus is the host's VM filesystem: below ReserveBytes free, new
// sandboxes, forks, snapshots, hibernations, volumes and template builds
// fail with insufficient_storage (507).
type StorageStatus struct {
	Dir          string `json:"dir"`
	TotalBytes   int64  `json:"total_bytes"`
	FreeBytes    int64  `json:"free_bytes"`
	ReserveBytes int64  `json:"reserve_bytes"`
}

// QuotaUsage is what a team holds: live sandboxes (hibernated included)
// and their vCPUs and memory, service machines, snapshots, volumes, builds
// running.
type QuotaUsage struct {
	Sandboxes       int `json:"sandboxes"`
	ServiceMachines int `json:"service_machines"`
	Snapshots       int `json:"snapshots"`
	Volumes         int `json:"volumes"`
	Builds          int `json:"builds"`
	VCPUs           int `json:"vcpus"`
	MemoryMiB       int `json:"memory_mib"`
	// DiskMiB is disk held on the host (max_disk_gib): root disks of live
	// sandboxes at full size, hibernated ones' memory, volumes, snapshots,
	// the team's own template versions (RAM and disk each).
	DiskMiB int `json:"disk_mib"`
}

// QuotaUpdate changes a team's limits: each non-nil field sets that limit
// (0: no limit); the limits named in Reset (e.g. "max_sandboxes") go back to
// the server's defaults; the rest keep their values.
type QuotaUpdate struct {
	MaxSandboxes        *int     `json:"max_sandboxes,omitempty"`
	MaxServiceMachines  *int     `json:"max_service_machines,omitempty"`
	MaxSnapshots        *int     `json:"max_snapshots,omitempty"`
	MaxVolumes          *int     `json:"max_volumes,omitempty"`
	MaxConcurrentBuilds *int     `json:"max_concurrent_builds,omitempty"`
	MaxVCPUs            *int     `json:"max_vcpus,omitempty"`
	MaxMemoryMiB        *int     `json:"max_memory_mib,omitempty"`
	MaxDiskGiB          *int     `json:"max_disk_gib,omitempty"`
	RequestsPerSecond   *float64 `json:"requests_per_second,omitempty"`
	Burst               *int     `json:"burst,omitempty"`
	Reset               []string `json:"-"`
}

// MarshalJSON sends the set fields, and null for each name in Reset.
func (u QuotaUpdate) MarshalJSON() ([]byte, error) {
	type plain QuotaUpdate
	b, err := json.Marshal(plain(u))
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for _, k := range u.Reset {
		m[k] = nil
	}
	return json.Marshal(m)
}

// Quotas returns the calling key's own team's quotas and usage.
func (c *Client) Quotas(ctx context.Context) (*Quotas, error) {
	var q Quotas
	if err := c.do(ctx, request{method: "GET", path: "/v1/quotas"}, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// TeamQuotas returns a team's quotas and usage (team: an id or name). It
// needs an admin key.
func (c *Client) TeamQuotas(ctx context.Context, team string) (*Quotas, error) {
	var q Quotas
	if err := c.do(ctx, request{method: "GET", path: "/v1/teams/" + url.PathEscape(team) + "/quotas"}, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// SetTeamQuotas changes a team's limits and returns its quotas after the
// change. It needs an admin key.
func (c *Client) SetTeamQuotas(ctx context.Context, team string, u QuotaUpdate) (*Quotas, error) {
	var q Quotas
	if err := c.do(ctx, request{method: "PUT", path: "/v1/teams/" + url.PathEscape(team) + "/quotas", body: u}, &q); err != nil {
		return nil, err
	}
	return &q, nil
}
