// Package quotas keeps each team within its limits: how many sandboxes,
// service machines, snapshots, volumes and template builds it may hold at
// once, how many vCPUs and how much memory its live sandboxes may use, how
// much disk it holds on the host (max_disk_gib), and how many API requests
// per second each of its keys may send. Every reservation also asks the
// host's storage reserve (Config.Space), which refuses any new allocation
// with insufficient_storage once the VM filesystem is at it.
//
// A team's limits are the server's defaults (Defaults protects one 2-core,
// 24 GiB host) with the overrides an admin stored for the team on top
// (pandastack.QuotaOverrides; a limit of 0 means none). Services call
// Service.Reserve before they allocate: it counts what the team holds now
// (from the store, plus reservations still in flight, plus any Counter),
// and answers a *pandastack.Error with code quota_exceeded naming the limit
// and the numbers when the request does not fit. RateLimiter is the per-key
// token bucket the HTTP layer consults.
package quotas

import (
	"fmt"
	"math"

	"github.com/pandastack/pandastack"
)

// Limits are a team's effective limits. A limit of 0 means no limit.
type Limits struct {
	// MaxSandboxes bounds live sandboxes: running, starting and hibernated
	// (a hibernated one wakes on any use); a fork of N children needs N.
	MaxSandboxes int `json:"max_sandboxes"`
	// MaxServiceMachines bounds long-lived service machines (databases).
	MaxServiceMachines int `json:"max_service_machines"`
	MaxSnapshots       int `json:"max_snapshots"`
	MaxVolumes         int `json:"max_volumes"`
	// MaxConcurrentBuilds bounds template builds in flight.
	MaxConcurrentBuilds int `json:"max_concurrent_builds"`
	// MaxVCPUs and MaxMemoryMiB bound the sum over live sandboxes
	// (hibernated ones included: they wake without asking).
	MaxVCPUs     int `json:"max_vcpus"`
	MaxMemoryMiB int `json:"max_memory_mib"`
	// MaxDiskGiB bounds the disk the team holds on the host (Usage.DiskMiB
	// says what counts).
	MaxDiskGiB int `json:"max_disk_gib"`
	// RequestsPerSecond is the steady rate allowed to each API key of the
	// team, Burst how many requests it may send at once.
	RequestsPerSecond float64 `json:"requests_per_second"`
	Burst             int     `json:"burst"`
}

// Defaults are the limits of a team with no overrides, sized so that one
// team cannot take a single 2-core, 24 GiB server: 20 sandboxes is about
// what 2 cores restore in a couple of seconds and ~1.4 GB of idle QEMUs;
// 16 GiB leaves the host and other teams 8; the request rate stops floods
// without slowing a busy client (an exec costs far more than 10 ms); 50 GiB
// of disk is a fair share of a host's VM filesystem (its root disks are
// sparse, so most of it is room to grow into) and stops one team from
// holding it all.
var Defaults = Limits{
	MaxSandboxes:        20,
	MaxServiceMachines:  5,
	MaxSnapshots:        50,
	MaxVolumes:          20,
	MaxConcurrentBuilds: 2,
	MaxVCPUs:            32,
	MaxMemoryMiB:        16384,
	MaxDiskGiB:          50,
	RequestsPerSecond:   100,
	Burst:               200,
}

// Unlimited overrides every limit with 0 (none): what Bootstrap stores for
// the operator's own admin team.
func Unlimited() pandastack.QuotaOverrides {
	z, f := 0, 0.0
	return pandastack.QuotaOverrides{
		MaxSandboxes: &z, MaxServiceMachines: &z, MaxSnapshots: &z, MaxVolumes: &z,
		MaxConcurrentBuilds: &z, MaxVCPUs: &z, MaxMemoryMiB: &z, MaxDiskGiB: &z, RequestsPerSecond: &f, Burst: &z,
	}
}

// With returns l with the set fields of o in place of its own.
func (l Limits) With(o pandastack.QuotaOverrides) Limits {
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&l.MaxSandboxes, o.MaxSandboxes)
	set(&l.MaxServiceMachines, o.MaxServiceMachines)
	set(&l.MaxSnapshots, o.MaxSnapshots)
	set(&l.MaxVolumes, o.MaxVolumes)
	set(&l.MaxConcurrentBuilds, o.MaxConcurrentBuilds)
	set(&l.MaxVCPUs, o.MaxVCPUs)
	set(&l.MaxMemoryMiB, o.MaxMemoryMiB)
	set(&l.MaxDiskGiB, o.MaxDiskGiB)
	set(&l.Burst, o.Burst)
	if o.RequestsPerSecond != nil {
		l.RequestsPerSecond = *o.RequestsPerSecond
	}
	return l
}

// Bounds of a single override (beyond them a value is surely a mistake).
const (
	maxCount = 1 << 20
	maxRate  = 1e6
)

// Validate checks overrides an admin asks for: every value at least 0 and
// below a sane bound; EInvalid naming the field otherwise.
func Validate(o pandastack.QuotaOverrides) error {
	ints := []struct {
		name string
		v    *int
	}{
		{"max_sandboxes", o.MaxSandboxes}, {"max_service_machines", o.MaxServiceMachines},
		{"max_snapshots", o.MaxSnapshots}, {"max_volumes", o.MaxVolumes},
		{"max_concurrent_builds", o.MaxConcurrentBuilds}, {"max_vcpus", o.MaxVCPUs},
		{"max_memory_mib", o.MaxMemoryMiB}, {"max_disk_gib", o.MaxDiskGiB}, {"burst", o.Burst},
	}
	for _, f := range ints {
		if f.v != nil && (*f.v < 0 || *f.v > maxCount) {
			return pandastack.Errorf(pandastack.EInvalid, "%s must be between 0 (no limit) and %d, got %d", f.name, maxCount, *f.v)
		}
	}
	if r := o.RequestsPerSecond; r != nil && (math.IsNaN(*r) || *r < 0 || *r > maxRate) {
		return pandastack.Errorf(pandastack.EInvalid, "requests_per_second must be between 0 (no limit) and %g, got %g", float64(maxRate), *r)
	}
	return nil
}

// Usage is what a team holds, or what a request asks for.
type Usage struct {
	Sandboxes       int `json:"sandboxes"`
	ServiceMachines int `json:"service_machines"`
	Snapshots       int `json:"snapshots"`
	Volumes         int `json:"volumes"`
	Builds          int `json:"builds"`
	VCPUs           int `json:"vcpus"`
	MemoryMiB       int `json:"memory_mib"`
	// DiskMiB is disk on the host: the root disks of live sandboxes (their
	// full size: a guest may fill it), the saved memory of hibernated ones,
	// volumes (their size) and snapshots (their bytes measured at save).
	DiskMiB int `json:"disk_mib"`
}

// Plus returns the sum of u and v.
func (u Usage) Plus(v Usage) Usage {
	return Usage{
		Sandboxes: u.Sandboxes + v.Sandboxes, ServiceMachines: u.ServiceMachines + v.ServiceMachines,
		Snapshots: u.Snapshots + v.Snapshots, Volumes: u.Volumes + v.Volumes, Builds: u.Builds + v.Builds,
		VCPUs: u.VCPUs + v.VCPUs, MemoryMiB: u.MemoryMiB + v.MemoryMiB, DiskMiB: u.DiskMiB + v.DiskMiB,
	}
}

func (u Usage) minus(v Usage) Usage {
	return u.Plus(Usage{-v.Sandboxes, -v.ServiceMachines, -v.Snapshots, -v.Volumes, -v.Builds, -v.VCPUs, -v.MemoryMiB, -v.DiskMiB})
}

// Check answers quota_exceeded if a team holding have may not take want
// more under l. Only the kinds want asks for are checked, so a team over a
// limit an admin lowered can still take what that limit does not cover.
func Check(l Limits, have, want Usage) error {
	checks := []struct {
		limit      string
		max        int
		have, want int
		what       string
	}{
		{"max_sandboxes", l.MaxSandboxes, have.Sandboxes, want.Sandboxes, "live sandboxes"},
		{"max_service_machines", l.MaxServiceMachines, have.ServiceMachines, want.ServiceMachines, "service machines"},
		{"max_snapshots", l.MaxSnapshots, have.Snapshots, want.Snapshots, "snapshots"},
		{"max_volumes", l.MaxVolumes, have.Volumes, want.Volumes, "volumes"},
		{"max_concurrent_builds", l.MaxConcurrentBuilds, have.Builds, want.Builds, "builds running"},
		{"max_vcpus", l.MaxVCPUs, have.VCPUs, want.VCPUs, "vCPUs in live sandboxes"},
		{"max_memory_mib", l.MaxMemoryMiB, have.MemoryMiB, want.MemoryMiB, "MiB of memory in live sandboxes"},
	}
	for _, c := range checks {
		if c.want <= 0 || c.max <= 0 || c.have+c.want <= c.max {
			continue
		}
		return &pandastack.Error{Code: pandastack.EQuota, Message: fmt.Sprintf(
			"%s is %d; team has %d %s and this needs %d more", c.limit, c.max, c.have, c.what, c.want)}
	}
	if d := int64(l.MaxDiskGiB) << 10; want.DiskMiB > 0 && d > 0 && int64(have.DiskMiB+want.DiskMiB) > d {
		return &pandastack.Error{Code: pandastack.EQuota, Message: fmt.Sprintf(
			"max_disk_gib is %d; team holds %s of disk (root disks of live sandboxes, hibernated memory, volumes, snapshots, app build caches and git repositories) and this needs %s more",
			l.MaxDiskGiB, gib(have.DiskMiB), gib(want.DiskMiB))}
	}
	return nil
}

// gib says n MiB in GiB, to a tenth.
func gib(n int) string { return fmt.Sprintf("%.1f GiB", float64(n)/1024) }
