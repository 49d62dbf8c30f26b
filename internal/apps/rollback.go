package apps

import (
	"context"
	"fmt"
	"time"

	"github.com/pandastack/pandastack"
)

// Rollback makes a previous release live again: deployID's, or by default
// the newest release that is not live. Its machine — running inside the
// rollback window, else hibernated and woken — is health-checked and
// swapped in atomically; the release it replaces is kept warm in turn. It
// returns the deploy now live.
func (s *Service) Rollback(ctx context.Context, teamID, name, deployID string) (Deploy, error) {
	t0 := time.Now()
	a, err := s.cfg.Store.GetApp(ctx, teamID, name)
	if err != nil {
		return Deploy{}, err
	}
	lock := s.appLock(a.ID)
	lock.Lock()
	defer lock.Unlock()
	if a, err = s.cfg.Store.GetAppByID(ctx, a.ID); err != nil {
		return Deploy{}, err
	}
	rels, err := s.cfg.Store.ListReleases(ctx, a.ID)
	if err != nil {
		return Deploy{}, err
	}
	var target *Release
	for i, r := range rels {
		if (deployID == "" && r.DeployID != a.LiveDeployID) || (deployID != "" && r.DeployID == deployID) {
			target = &rels[i]
			break
		}
	}
	switch {
	case target == nil && deployID != "":
		return Deploy{}, pandastack.Errorf(pandastack.ENotFound, "deploy %s has no release kept to roll back to (only the last %d are kept)", deployID, KeepReleases)
	case target == nil:
		return Deploy{}, pandastack.Errorf(pandastack.EConflict, "app %s has no previous release to roll back to", a.Name)
	case target.DeployID == a.LiveDeployID:
		return Deploy{}, pandastack.Errorf(pandastack.EConflict, "deploy %s is already live", target.DeployID)
	}
	d, err := s.cfg.Store.GetDeploy(ctx, a.ID, target.DeployID)
	if err != nil {
		return Deploy{}, err
	}
	l := newDeployLog(nil)
	l.add(d.Log)
	l.printf("rollback: to release %s", target.MachineID)
	// Any use of the guest wakes a hibernated machine.
	g, err := s.cfg.Engine.Guest(ctx, target.MachineID)
	if err == nil {
		err = s.healthy(ctx, g, target.MachineID, s.host(a.Name), target.Port, a.HealthPath, a.healthTimeout(), l)
	}
	if err != nil {
		return Deploy{}, pandastack.Errorf(pandastack.EUnavailable, "roll back to deploy %s: %v", d.ID, err)
	}
	switched, err := s.promote(ctx, a.ID, &d, *target, l)
	if err != nil {
		return Deploy{}, fmt.Errorf("roll back to deploy %s: %w", d.ID, err)
	}
	// From the request to the route switch: what a user waits for the
	// previous release to serve (the health check and, past the rollback
	// window, the wake are in it).
	s.log.Info("rolled back", "app", a.Name, "deploy", d.ID, "machine", target.MachineID, "switch_ms", switched.Sub(t0).Milliseconds())
	return d, nil
}

// GetDeploy returns one of teamID's app's deploys with its log so far.
func (s *Service) GetDeploy(ctx context.Context, teamID, name, id string) (Deploy, error) {
	a, err := s.cfg.Store.GetApp(ctx, teamID, name)
	if err != nil {
		return Deploy{}, err
	}
	d, err := s.cfg.Store.GetDeploy(ctx, a.ID, id)
	if err != nil {
		return Deploy{}, err
	}
	s.mu.Lock()
	l := s.logs[id]
	s.mu.Unlock()
	if l != nil {
		d.Log = l.String()
	}
	return d, nil
}

// ListDeploys returns teamID's app's deploys, newest first.
func (s *Service) ListDeploys(ctx context.Context, teamID, name string) ([]Deploy, error) {
	a, err := s.cfg.Store.GetApp(ctx, teamID, name)
	if err != nil {
		return nil, err
	}
	return s.cfg.Store.ListDeploys(ctx, a.ID)
}
