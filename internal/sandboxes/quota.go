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

// reserve holds n machines of class lifetime, each of cpus vCPUs and mem
// MiB, against the team's quotas until release is called (the quota
// service refuses what would go over a limit with EQuota, naming it).
func (s *Service) reserve(ctx context.Context, teamID string, lifetime pandastack.Lifetime, n, cpus, mem int) (release func(), err error) {
	u := quotas.Usage{Sandboxes: n, VCPUs: n * max(cpus, minCountedCPUs), MemoryMiB: n * max(mem, minCountedMiB)}
	if lifetime.IsService() {
		u.ServiceMachines = n
	}
	return s.cfg.Quotas.Reserve(ctx, teamID, u)
}

// createSize is the size a create will have, for its quota: the size asked
// for, else its snapshot's sandbox's, else its template's (as the store
// knows it; the smallest machine when it does not).
func (s *Service) createSize(ctx context.Context, req pandastack.CreateRequest) (cpus, mem int) {
	cpus, mem = req.CPUs, req.MemoryMiB
	if cpus != 0 && mem != 0 {
		return cpus, mem
	}
	var c, m int
	if req.Snapshot != "" {
		if sn, err := s.cfg.Store.GetSnapshot(ctx, req.Snapshot); err == nil {
			if sb, err := s.cfg.Store.GetSandbox(ctx, sn.SandboxID); err == nil {
				c, m = sb.CPUs, sb.MemoryMiB
			}
		}
	} else {
		// The team's own template of that name, else the public one's.
		name, _, _ := strings.Cut(req.Template, ":")
		for _, team := range []string{req.TeamID, ""} {
			if t, err := s.cfg.Store.GetTemplate(ctx, team, name); err == nil {
				c, m = t.CPUs, t.MemoryMiB
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
	return cpus, mem
}
