package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/pandastack/pandastack"
)

const backupColumns = `id, database_id, team_id, state, started_at, finished_at, start_lsn, end_lsn, start_wal, size_bytes, verified, error`

// encodeTimeOrZero encodes t, the zero time as ”.
func encodeTimeOrZero(field string, t time.Time) (string, error) {
	if t.IsZero() {
		return "", nil
	}
	return encodeTime(field, t)
}

func decodeTimeOrZero(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return decodeTime(field, s)
}

// PutDatabaseBackup records a base backup, or replaces its record.
func (s *Store) PutDatabaseBackup(ctx context.Context, b pandastack.DatabaseBackup) error {
	if err := requireKey("backup", "id", b.ID); err != nil {
		return err
	}
	started, err := encodeTime("started_at", b.StartedAt)
	if err != nil {
		return fmt.Errorf("record backup %s: %w", b.ID, err)
	}
	finished, err := encodeTimeOrZero("finished_at", b.FinishedAt)
	if err != nil {
		return fmt.Errorf("record backup %s: %w", b.ID, err)
	}
	_, err = s.w.ExecContext(ctx, `INSERT OR REPLACE INTO database_backups (`+backupColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		b.ID, b.DatabaseID, b.TeamID, b.State, started, finished, b.StartLSN, b.EndLSN, b.StartWAL, b.SizeBytes, b.Verified, b.Error)
	if err != nil {
		return fmt.Errorf("record backup %s: %w", b.ID, err)
	}
	return nil
}

// ListDatabaseBackups lists a database's base backups, oldest first
// (every database's when databaseID is empty).
func (s *Store) ListDatabaseBackups(ctx context.Context, databaseID string) ([]pandastack.DatabaseBackup, error) {
	q, args := `SELECT `+backupColumns+` FROM database_backups ORDER BY started_at, id`, []any{}
	if databaseID != "" {
		q, args = `SELECT `+backupColumns+` FROM database_backups WHERE database_id = ? ORDER BY started_at, id`, []any{databaseID}
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list backups: %w", err)
	}
	defer rows.Close()
	var out []pandastack.DatabaseBackup
	for rows.Next() {
		var b pandastack.DatabaseBackup
		var started, finished string
		if err := rows.Scan(&b.ID, &b.DatabaseID, &b.TeamID, &b.State, &started, &finished, &b.StartLSN, &b.EndLSN,
			&b.StartWAL, &b.SizeBytes, &b.Verified, &b.Error); err != nil {
			return nil, fmt.Errorf("list backups: %w", err)
		}
		if b.StartedAt, err = decodeTime("backup "+b.ID+" started_at", started); err != nil {
			return nil, err
		}
		if b.FinishedAt, err = decodeTimeOrZero("backup "+b.ID+" finished_at", finished); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list backups: %w", err)
	}
	return out, nil
}

// DeleteDatabaseBackup removes a backup's record; a missing one is not an
// error.
func (s *Store) DeleteDatabaseBackup(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM database_backups WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete backup %s: %w", id, err)
	}
	return nil
}

// PutDatabaseWAL records where a database's WAL archive stands.
func (s *Store) PutDatabaseWAL(ctx context.Context, w pandastack.DatabaseWAL) error {
	if err := requireKey("wal", "database_id", w.DatabaseID); err != nil {
		return err
	}
	archived, err := encodeTimeOrZero("archived_at", w.ArchivedAt)
	if err != nil {
		return err
	}
	marked, err := encodeTimeOrZero("marked_at", w.MarkedAt)
	if err != nil {
		return err
	}
	_, err = s.w.ExecContext(ctx, `INSERT OR REPLACE INTO database_wal (database_id, last_segment, archived_at, marked_at) VALUES (?, ?, ?, ?)`,
		w.DatabaseID, w.LastSegment, archived, marked)
	if err != nil {
		return fmt.Errorf("record wal of database %s: %w", w.DatabaseID, err)
	}
	return nil
}

// GetDatabaseWAL returns where a database's WAL archive stands; one with
// none yet is the zero record (with its id), not an error.
func (s *Store) GetDatabaseWAL(ctx context.Context, databaseID string) (pandastack.DatabaseWAL, error) {
	w := pandastack.DatabaseWAL{DatabaseID: databaseID}
	var archived, marked string
	err := s.r.QueryRowContext(ctx, `SELECT last_segment, archived_at, marked_at FROM database_wal WHERE database_id = ?`, databaseID).
		Scan(&w.LastSegment, &archived, &marked)
	if errors.Is(err, sql.ErrNoRows) {
		return w, nil
	}
	if err != nil {
		return w, fmt.Errorf("get wal of database %s: %w", databaseID, err)
	}
	if w.ArchivedAt, err = decodeTimeOrZero("wal archived_at", archived); err != nil {
		return w, err
	}
	if w.MarkedAt, err = decodeTimeOrZero("wal marked_at", marked); err != nil {
		return w, err
	}
	return w, nil
}

// DeleteDatabaseWAL forgets a database's WAL archive record.
func (s *Store) DeleteDatabaseWAL(ctx context.Context, databaseID string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM database_wal WHERE database_id = ?`, databaseID); err != nil {
		return fmt.Errorf("delete wal of database %s: %w", databaseID, err)
	}
	return nil
}
