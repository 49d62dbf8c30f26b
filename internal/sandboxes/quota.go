package sandboxes

import (
	"context"
	"strings"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
)

// Smallest machine a create can ask for: what a sandbox of unknown size is
// counted as until its record (with its real size) is in the store.
const (
	minCountedCPUs = 1
	minCountedMiB  = 128
)

// reserve holds n machines of class lifetime, each of cpus vCPUs, mem MiB
// of memory and a root disk of disk MiB, against the team's quotas until release is called (the quota
// service refuses what would go over a limit with EQuota, naming it).
func (s *Service) reserve(ctx context.Context, teamID string, lifetime pandastack.Lifetime, n, cpus, mem, disk int) (release func(), err error) {
	u := quotas.Usage{Sandboxes: n, VCPUs: n * max(cpus, minCountedCPUs), MemoryMiB: n * max(mem, minCountedMiB), DiskMiB: n * disk}
	if lifetime.IsService() {
		u.ServiceMachines = n
	}
	return s.cfg.Quotas.Reserve(ctx, teamID, u)
}

// createSize is the size a create will have, for its quota: the size asked
// for, else its snapshot's sandbox's, else its template's (as the store
// knows it; the smallest machine and no disk when it does not).
func (s *Service) createSize(ctx context.Context, req pandastack.CreateRequest) (cpus, mem, disk int) {
	cpus, mem, disk = req.CPUs, req.MemoryMiB, req.DiskGiB<<10
	if cpus != 0 && mem != 0 && disk != 0 {
		return cpus, mem, disk
	}
	var c, m, d int
	if req.Snapshot != "" {
		if sn, err := s.cfg.Store.GetSnapshot(ctx, req.Snapshot); err == nil {
			if sb, err := s.cfg.Store.GetSandbox(ctx, sn.SandboxID); err == nil {
				c, m, d = sb.CPUs, sb.MemoryMiB, sb.DiskMiB
			}
		}
	} else {
		// The team's own template of that name, else the public one's.
		name, _, _ := strings.Cut(req.Template, ":")
		for _, team := range []string{req.TeamID, ""} {
			if t, err := s.cfg.Store.GetTemplate(ctx, team, name); err == nil {
				c, m, d = t.CPUs, t.MemoryMiB, t.DiskMiB
				break
			}
		}
	}
	if cpus == 0 {
		cpus = c
	}
	if mem == 0 {
		mem = m
	}
	if disk == 0 {
		disk = d
	}
	return cpus, mem, disk
}
