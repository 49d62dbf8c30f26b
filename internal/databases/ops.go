package databases

import (
	"context"
	"fmt"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
)

// own returns database ref (an id, or a name in the team) if it is
// teamID's; another team's is ENotFound like a missing one.
func (s *Service) own(ctx context.Context, teamID, ref string) (pandastack.Database, error) {
	notFound := pandastack.Errorf(pandastack.ENotFound, "database %s not found", ref)
	d, err := s.cfg.Store.GetDatabase(ctx, ref)
	if pandastack.ErrorCode(err) == pandastack.ENotFound {
		list, lerr := s.cfg.Store.ListDatabases(ctx, teamID)
		if lerr != nil {
			return d, fmt.Errorf("get database %s: %w", ref, lerr)
		}
		for _, x := range list {
			if x.Name == ref {
				return x, nil
			}
		}
		return d, notFound
	}
	if err != nil {
		return d, fmt.Errorf("get database %s: %w", ref, err)
	}
	if d.TeamID != teamID {
		return pandastack.Database{}, notFound
	}
	return d, nil
}

// state is what GET reports for d: a ready database is as its machine.
func (s *Service) state(ctx context.Context, d pandastack.Database) string {
	st, _ := s.machine(ctx, d)
	return st
}

// machine reports d's state and its machine's auto-hibernate time.
func (s *Service) machine(ctx context.Context, d pandastack.Database) (state string, autoHibernate int) {
	if d.State != pandastack.DatabaseReady {
		return StateCreating, 0
	}
	sb, err := s.cfg.Store.GetSandbox(ctx, d.MachineID)
	if err != nil {
		return StateStopped, 0
	}
	switch sb.State {
	case pandastack.StateRunning, pandastack.StateStarting:
		return StateRunning, sb.AutoHibernateSeconds
	case pandastack.StateHibernated:
		return StateHibernated, sb.AutoHibernateSeconds
	}
	return StateStopped, sb.AutoHibernateSeconds
}

// present is d as the API shows it, its machine looked up.
func (s *Service) present(ctx context.Context, d pandastack.Database, password string) Info {
	st, auto := s.machine(ctx, d)
	in := s.info(d, st, password)
	in.AutoHibernateSeconds = auto
	return in
}

// Get returns a database of teamID's with its credentials.
func (s *Service) Get(ctx context.Context, teamID, ref string) (Info, error) {
	d, err := s.own(ctx, teamID, ref)
	if err != nil {
		return Info{}, err
	}
	pw, err := s.password(d)
	if err != nil {
		return Info{}, err
	}
	return s.present(ctx, d, pw), nil
}

// List returns teamID's databases, oldest first, without credentials.
func (s *Service) List(ctx context.Context, teamID string) ([]Info, error) {
	list, err := s.cfg.Store.ListDatabases(ctx, teamID)
	if err != nil {
		return nil, fmt.Errorf("list databases: %w", err)
	}
	out := make([]Info, 0, len(list))
	for _, d := range list {
		out = append(out, s.present(ctx, d, ""))
	}
	return out, nil
}

// Delete removes a database: its route, its machine, its volume (and
// with it the data) and its record.
func (s *Service) Delete(ctx context.Context, teamID, ref string) error {
	d, err := s.own(ctx, teamID, ref)
	if err != nil {
		return err
	}
	if d.State != pandastack.DatabaseReady {
		return pandastack.Errorf(pandastack.EConflict, "database %s is still being created", ref)
	}
	s.unregister(d)
	s.endSessions(d.ID)
	if err := s.cfg.Engine.Kill(ctx, d.MachineID, pandastack.StateKilled); err != nil {
		if rerr := s.register(d); rerr != nil {
			s.log.Error("route database again after a failed delete", "database", d.ID, "err", rerr)
		}
		return fmt.Errorf("delete database %s: %w", ref, err)
	}
	if d.VolumeID != "" {
		if err := s.cfg.Engine.DeleteVolume(ctx, d.VolumeID); err != nil && pandastack.ErrorCode(err) != pandastack.ENotFound {
			return fmt.Errorf("delete database %s: its volume: %w", ref, err)
		}
	}
	if err := s.cfg.Store.DeleteDatabase(ctx, d.ID); err != nil {
		return err
	}
	s.log.Info("database deleted", "database", d.ID, "machine", d.MachineID, "volume", d.VolumeID)
	return nil
}

// Hibernate saves a database's machine to disk and frees its memory; the
// next connection (or Wake) brings it back with its caches.
func (s *Service) Hibernate(ctx context.Context, teamID, ref string) (Info, error) {
	d, err := s.ready(ctx, teamID, ref)
	if err != nil {
		return Info{}, err
	}
	sb, err := s.cfg.Store.GetSandbox(ctx, d.MachineID)
	if err != nil {
		return Info{}, fmt.Errorf("hibernate database %s: %w", ref, err)
	}
	if sb.State == pandastack.StateRunning && s.cfg.Quotas != nil {
		// Its memory stays on disk while it sleeps.
		release, err := s.cfg.Quotas.Reserve(ctx, d.TeamID, quotas.Usage{DiskMiB: sb.MemoryMiB})
		if err != nil {
			return Info{}, err
		}
		defer release()
	}
	s.endSessions(d.ID) // before the save: their backends end, not sleep
	if _, err := s.cfg.Engine.Hibernate(ctx, d.MachineID); err != nil {
		return Info{}, fmt.Errorf("hibernate database %s: %w", ref, err)
	}
	return s.present(ctx, d, ""), nil
}

// Wake brings a hibernated database back, or restarts from its volume
// one whose machine is gone.
func (s *Service) Wake(ctx context.Context, teamID, ref string) (Info, error) {
	d, err := s.ready(ctx, teamID, ref)
	if err != nil {
		return Info{}, err
	}
	if sb, err := s.cfg.Store.GetSandbox(ctx, d.MachineID); err == nil && !sb.State.Live() {
		if d, err = s.revive(ctx, d); err != nil {
			return Info{}, fmt.Errorf("wake database %s: %w", ref, err)
		}
		return s.present(ctx, d, ""), nil
	}
	if _, err := s.cfg.Engine.Wake(ctx, d.MachineID); err != nil {
		return Info{}, fmt.Errorf("wake database %s: %w", ref, err)
	}
	return s.present(ctx, d, ""), nil
}

func (s *Service) ready(ctx context.Context, teamID, ref string) (pandastack.Database, error) {
	d, err := s.own(ctx, teamID, ref)
	if err != nil {
		return d, err
	}
	if d.State != pandastack.DatabaseReady {
		return d, pandastack.Errorf(pandastack.EConflict, "database %s is still being created", ref)
	}
	return d, nil
}
