package databases

import (
	"context"
	"fmt"
	"time"

	"github.com/pandastack/pandastack"
)

// BackupInfo is a base backup as the API shows it.
type BackupInfo struct {
	ID         string     `json:"id"`
	DatabaseID string     `json:"database_id"`
	State      string     `json:"state"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	StartLSN   string     `json:"start_lsn,omitempty"`
	EndLSN     string     `json:"end_lsn,omitempty"`
	SizeBytes  int64      `json:"size_bytes"`
	Verified   bool       `json:"verified"`
	Error      string     `json:"error,omitempty"`
}

// WALInfo is where a database's WAL archive stands.
type WALInfo struct {
	// LastSegment is the newest WAL segment in object storage.
	LastSegment string `json:"last_segment,omitempty"`
	// ArchivedThroughLSN: every change before this LSN is in object
	// storage (compare pg_current_wal_lsn()).
	ArchivedThroughLSN string     `json:"archived_through_lsn,omitempty"`
	ArchivedAt         *time.Time `json:"archived_at,omitempty"`
}

// BackupList is a database's backups and restore window.
type BackupList struct {
	Backups []BackupInfo `json:"backups"`
	WAL     WALInfo      `json:"wal"`
	// EarliestRestoreTime is the first moment a restore can reach (the
	// oldest finished base backup's end); absent before the first.
	EarliestRestoreTime *time.Time `json:"earliest_restore_time,omitempty"`
	// RestoreGaps are the stretches inside the window no restore reaches:
	// gaps in the WAL archive (walgaps.go), oldest first.
	RestoreGaps []RestoreGap `json:"restore_gaps,omitempty"`
}

func backupInfo(b pandastack.DatabaseBackup) BackupInfo {
	in := BackupInfo{ID: b.ID, DatabaseID: b.DatabaseID, State: b.State, StartedAt: b.StartedAt, StartLSN: b.StartLSN,
		EndLSN: b.EndLSN, SizeBytes: b.SizeBytes, Verified: b.Verified, Error: b.Error}
	if !b.FinishedAt.IsZero() {
		t := b.FinishedAt
		in.FinishedAt = &t
	}
	return in
}

// Backups lists database ref's base backups, oldest first, where its WAL
// archive stands, and the gaps in it.
func (s *Service) Backups(ctx context.Context, teamID, ref string) (BackupList, error) {
	if err := s.backupsOn(); err != nil {
		return BackupList{}, err
	}
	d, err := s.own(ctx, teamID, ref)
	if err != nil {
		return BackupList{}, err
	}
	return s.backupList(ctx, d)
}

// backupList is Backups for database d.
func (s *Service) backupList(ctx context.Context, d pandastack.Database) (BackupList, error) {
	list, err := s.cfg.Backup.Store.ListDatabaseBackups(ctx, d.ID)
	if err != nil {
		return BackupList{}, err
	}
	out := BackupList{Backups: make([]BackupInfo, 0, len(list))}
	for _, b := range list {
		out.Backups = append(out.Backups, backupInfo(b))
		if b.State == pandastack.BackupDone && out.EarliestRestoreTime == nil {
			t := b.FinishedAt
			out.EarliestRestoreTime = &t
		}
	}
	objs, err := s.cfg.Backup.Objects.List(ctx, walPrefix(d.ID))
	if err != nil {
		return BackupList{}, fmt.Errorf("list archived WAL: %w", err)
	}
	out.RestoreGaps = restoreGaps(walGaps(d.ID, objs, list))
	w, err := s.cfg.Backup.Store.GetDatabaseWAL(ctx, d.ID)
	if err != nil {
		return BackupList{}, err
	}
	out.WAL.LastSegment = w.LastSegment
	if end, ok := walSegmentEnd(w.LastSegment); ok {
		out.WAL.ArchivedThroughLSN = formatLSN(end)
	}
	if !w.ArchivedAt.IsZero() {
		t := w.ArchivedAt
		out.WAL.ArchivedAt = &t
	}
	return out, nil
}
