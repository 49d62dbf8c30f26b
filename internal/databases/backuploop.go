package databases

import (
	"context"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cron"
)

// RunBackups archives every running database's WAL, takes the base
// backups the schedule makes due, and removes what retention ends, until
// ctx ends. It returns at once when backups are off.
func (s *Service) RunBackups(ctx context.Context) error {
	if s.backupsOn() != nil {
		return nil
	}
	var spec cron.Spec
	if sched := s.cfg.Backup.Schedule; sched != "off" {
		if sched == "" {
			sched = "@daily"
		}
		var err error
		if spec, err = cron.Parse(sched, ""); err != nil {
			return err
		}
	}
	every := s.cfg.Backup.ArchiveEvery
	if every <= 0 {
		every = 10 * time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	lastPull := map[string]time.Time{}
	var lastSchedule, lastSweep time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		all, err := s.cfg.Store.ListDatabases(ctx, "")
		if err != nil {
			s.log.Error("list databases for archiving", "err", err)
			continue
		}
		now := time.Now()
		for _, d := range all {
			ok, gap := s.archivable(ctx, d)
			if !ok || now.Sub(lastPull[d.ID]) < gap {
				continue
			}
			lastPull[d.ID] = now
			// Bounded: one database whose machine stopped answering
			// (killed or deleted mid-call) must not hold up every other
			// database's archiving and its slot's check.
			actx, cancel := context.WithTimeout(ctx, archiveCallLimit)
			if _, err := s.archive(actx, d); err != nil && ctx.Err() == nil {
				s.log.Warn("archive WAL", "database", d.ID, "machine", d.MachineID, "err", err)
			}
			cancel()
		}
		if spec != nil && now.Sub(lastSchedule) >= time.Minute {
			lastSchedule = now
			s.scheduled(ctx, spec, all, now)
		}
		if now.Sub(lastSweep) >= time.Hour {
			lastSweep = now
			s.sweep(ctx, all, now)
		}
	}
}

// scheduled takes the base backups spec makes due, one database at a
// time.
func (s *Service) scheduled(ctx context.Context, spec cron.Spec, all []pandastack.Database, now time.Time) {
	for _, d := range all {
		if ok, _ := s.archivable(ctx, d); !ok {
			continue
		}
		list, err := s.cfg.Backup.Store.ListDatabaseBackups(ctx, d.ID)
		if err != nil || !dueForBackup(spec, d, list, now) {
			continue
		}
		if _, err := s.backup(ctx, d); err != nil {
			s.log.Warn("scheduled base backup", "database", d.ID, "err", err)
		}
	}
}

// sweep removes base backups that ended before the retention window and
// the WAL no kept backup needs. A database's newest finished backup stays
// while the database exists; a deleted database's backups and WAL go
// once they are older than the window.
func (s *Service) sweep(ctx context.Context, all []pandastack.Database, now time.Time) {
	keep := s.cfg.Backup.Retention
	if keep <= 0 {
		keep = DefaultRetention
	}
	cutoff := now.Add(-keep)
	live := map[string]bool{}
	for _, d := range all {
		live[d.ID] = true
	}
	backups, err := s.cfg.Backup.Store.ListDatabaseBackups(ctx, "")
	if err != nil {
		s.log.Error("list backups for retention", "err", err)
		return
	}
	byDB := map[string][]pandastack.DatabaseBackup{}
	for _, b := range backups {
		byDB[b.DatabaseID] = append(byDB[b.DatabaseID], b)
	}
	objs, err := s.cfg.Backup.Objects.List(ctx, "databases/")
	if err != nil {
		s.log.Error("list backup objects for retention", "err", err)
		return
	}
	for _, o := range objs {
		if id, _, ok := strings.Cut(strings.TrimPrefix(o.Key, "databases/"), "/"); ok {
			if _, seen := byDB[id]; !seen {
				byDB[id] = nil
			}
		}
	}
	for id, list := range byDB {
		newest := -1
		for i, b := range list {
			if b.State == pandastack.BackupDone {
				newest = i
			}
		}
		oldestWAL := ""
		for i, b := range list {
			if b.State == pandastack.BackupRunning {
				continue
			}
			end := b.FinishedAt
			if !end.Before(cutoff) || (i == newest && live[id]) {
				if b.State == pandastack.BackupDone && (oldestWAL == "" || b.StartWAL < oldestWAL) {
					oldestWAL = b.StartWAL
				}
				continue
			}
			if err := s.cfg.Backup.Objects.Delete(ctx, baseKey(id, b.ID)); err != nil {
				s.log.Warn("delete expired base backup", "database", id, "backup", b.ID, "err", err)
				continue
			}
			if err := s.cfg.Backup.Store.DeleteDatabaseBackup(ctx, b.ID); err != nil {
				s.log.Warn("delete expired backup record", "database", id, "backup", b.ID, "err", err)
			}
			s.log.Info("expired base backup removed", "database", id, "backup", b.ID)
		}
		s.sweepWAL(ctx, id, oldestWAL, cutoff, live[id])
	}
}

// sweepWAL removes database id's archived WAL before segment oldest (the
// oldest kept backup's start); with no backup kept, what is older than
// cutoff.
func (s *Service) sweepWAL(ctx context.Context, id, oldest string, cutoff time.Time, live bool) {
	objs, err := s.cfg.Backup.Objects.List(ctx, walPrefix(id))
	if err != nil {
		s.log.Warn("list archived WAL for retention", "database", id, "err", err)
		return
	}
	left := 0
	for _, o := range objs {
		name := walNameOfKey(id, o.Key)
		expired := o.ModTime.Before(cutoff) && (oldest == "" || (walSegmentRE.MatchString(name) && name < oldest))
		if !expired {
			left++
			continue
		}
		if err := s.cfg.Backup.Objects.Delete(ctx, o.Key); err != nil {
			s.log.Warn("delete expired WAL", "database", id, "key", o.Key, "err", err)
			left++
		}
	}
	if left == 0 && !live {
		if err := s.cfg.Backup.Store.DeleteDatabaseWAL(ctx, id); err != nil {
			s.log.Warn("forget WAL archive", "database", id, "err", err)
		}
	}
}
