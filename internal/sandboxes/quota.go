package sandboxes

import (
	"context"
	"fmt"

	"github.com/pandastack/pandastack"
)

// reserve counts n machine creations of class lifetime against the team's
// quotas until release is called, refusing them (EQuota) when the team
// would go over a cap: live sandboxes of any class (MaxLivePerTeam), and
// service machines (MaxServicePerTeam).
func (s *Service) reserve(ctx context.Context, teamID string, lifetime pandastack.Lifetime, n int) (release func(), err error) {
	limit := s.cfg.MaxLivePerTeam
	svcLimit := 0
	if lifetime.IsService() {
		svcLimit = s.cfg.MaxServicePerTeam
	}
	if limit <= 0 && svcLimit <= 0 {
		return func() {}, nil
	}
	live, svc := 0, 0
	if limit > 0 {
		if live, err = s.cfg.Store.CountLiveSandboxes(ctx, teamID); err != nil {
			return nil, fmt.Errorf("count live sandboxes: %w", err)
		}
	}
	if svcLimit > 0 {
		if _, svc, err = s.Machines(ctx, teamID, false); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit > 0 && live+s.pending[teamID]+n > limit {
		return nil, pandastack.Errorf(pandastack.EQuota,
			"team has %d live sandboxes (limit %d); kill one before creating another", live+s.pending[teamID], limit)
	}
	if svcLimit > 0 && svc+s.pendingSvc[teamID]+n > svcLimit {
		return nil, pandastack.Errorf(pandastack.EQuota,
			"team has %d service machines (limit %d); kill one before creating another", svc+s.pendingSvc[teamID], svcLimit)
	}
	s.pending[teamID] += n
	if lifetime.IsService() {
		s.pendingSvc[teamID] += n
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.pending[teamID] -= n; s.pending[teamID] <= 0 {
			delete(s.pending, teamID)
		}
		if lifetime.IsService() {
			if s.pendingSvc[teamID] -= n; s.pendingSvc[teamID] <= 0 {
				delete(s.pendingSvc, teamID)
			}
		}
	}, nil
}
