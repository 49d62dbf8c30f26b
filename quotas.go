package pandastack

import "time"

// QuotaOverrides are the quota values an admin set for one team. A nil
// field follows the server's default (internal/quotas); a value of 0 means
// no limit. Counts are of things that exist now: live sandboxes (running,
// starting or hibernated; each fork child counts), service machines,
// snapshots, volumes, template builds in flight, and the vCPUs and memory
// of the live sandboxes. RequestsPerSecond and Burst bound each API key of
// the team (a token bucket).
type QuotaOverrides struct {
	MaxSandboxes        *int `json:"max_sandboxes,omitempty"`
	MaxServiceMachines  *int `json:"max_service_machines,omitempty"`
	MaxSnapshots        *int `json:"max_snapshots,omitempty"`
	MaxVolumes          *int `json:"max_volumes,omitempty"`
	MaxConcurrentBuilds *int `json:"max_concurrent_builds,omitempty"`
	MaxVCPUs            *int `json:"max_vcpus,omitempty"`
	MaxMemoryMiB        *int `json:"max_memory_mib,omitempty"`
	// MaxDiskGiB bounds the disk a team holds on the host: the root disks
	// of its live sandboxes (their full size), the saved memory of its
	// hibernated ones, its volumes (their size) and its snapshots (their
	// bytes measured at save).
	MaxDiskGiB        *int     `json:"max_disk_gib,omitempty"`
	RequestsPerSecond *float64 `json:"requests_per_second,omitempty"`
	Burst             *int     `json:"burst,omitempty"`
}

// TeamQuotas is the record of one team's quota overrides.
type TeamQuotas struct {
	TeamID    string
	Overrides QuotaOverrides
	UpdatedAt time.Time
}
