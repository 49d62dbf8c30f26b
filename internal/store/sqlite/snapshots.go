package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/pandastack/pandastack"
)

const snapshotColumns = `id, team_id, name, sandbox_id, template, template_id, host, size_bytes, created_at, object_key, exported_at, export_error`

// CreateSnapshot records a snapshot; a taken name in the team is a conflict.
func (s *Store) CreateSnapshot(ctx context.Context, sn pandastack.Snapshot) error {
	if err := requireKey("snapshot", "id", sn.ID); err != nil {
		return err
	}
	created, err := encodeTime("created_at", sn.CreatedAt)
	if err != nil {
		return fmt.Errorf("create snapshot %s: %w", sn.ID, err)
	}
	exported, err := encodeExportTime(sn.ExportedAt)
	if err != nil {
		return fmt.Errorf("create snapshot %s: %w", sn.ID, err)
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO snapshots (`+snapshotColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sn.ID, sn.TeamID, sn.Name, sn.SandboxID, sn.Template, sn.TemplateID, sn.Host, sn.SizeBytes, created,
		sn.ObjectKey, exported, sn.ExportError)
	if isUniqueViolation(err) {
		return conflict(err, "a snapshot named %q already exists", sn.Name)
	}
	if err != nil {
		return fmt.Errorf("create snapshot %s: %w", sn.ID, err)
	}
	return nil
}

// GetSnapshot returns a snapshot by id.
func (s *Store) GetSnapshot(ctx context.Context, id string) (pandastack.Snapshot, error) {
	sn, err := scanSnapshot(s.r.QueryRowContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return sn, notFound("snapshot %s not found", id)
	}
	if err != nil {
		return sn, fmt.Errorf("get snapshot %s: %w", id, err)
	}
	return sn, nil
}

// ListSnapshots returns a team's snapshots (every team's for ""), oldest
// first; never nil.
func (s *Store) ListSnapshots(ctx context.Context, teamID string) ([]pandastack.Snapshot, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE ? = '' OR team_id = ? ORDER BY created_at, id`, teamID, teamID)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	defer rows.Close()
	out := []pandastack.Snapshot{}
	for rows.Next() {
		sn, err := scanSnapshot(rows)
		if err != nil {
			return nil, fmt.Errorf("list snapshots: %w", err)
		}
		out = append(out, sn)
	}
	return out, rows.Err()
}

// DeleteSnapshot removes a snapshot record.
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM snapshots WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete snapshot %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("snapshot %s not found", id)
	}
	return nil
}

func scanSnapshot(row rowScanner) (pandastack.Snapshot, error) {
	var sn pandastack.Snapshot
	var created string
	var exported sql.NullString
	if err := row.Scan(&sn.ID, &sn.TeamID, &sn.Name, &sn.SandboxID, &sn.Template, &sn.TemplateID, &sn.Host, &sn.SizeBytes, &created,
		&sn.ObjectKey, &exported, &sn.ExportError); err != nil {
		return sn, err
	}
	var err error
	if sn.CreatedAt, err = decodeTime("snapshot "+sn.ID+" created_at", created); err != nil {
		return sn, err
	}
	t, err := decodeOptTime("snapshot "+sn.ID+" exported_at", exported)
	if t != nil {
		sn.ExportedAt = *t
	}
	return sn, err
}

// encodeExportTime stores a zero ExportedAt (not exported) as NULL.
func encodeExportTime(t time.Time) (sql.NullString, error) {
	if t.IsZero() {
		return sql.NullString{}, nil
	}
	return encodeOptTime("exported_at", &t)
}

// SetSnapshotExport records a snapshot's export (or why it failed).
func (s *Store) SetSnapshotExport(ctx context.Context, id, objectKey string, exportedAt time.Time, exportErr string) error {
	exported, err := encodeExportTime(exportedAt)
	if err != nil {
		return fmt.Errorf("record export of snapshot %s: %w", id, err)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE snapshots SET object_key = ?, exported_at = ?, export_error = ? WHERE id = ?`,
		objectKey, exported, exportErr, id)
	if err != nil {
		return fmt.Errorf("record export of snapshot %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("snapshot %s not found", id)
	}
	return nil
}
