package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pandastack/pandastack"
)

const volumeColumns = `id, team_id, name, size_mib, host, created_at, sandbox_id, mount_path, slot, managed_by`

// CreateVolume records a volume; a taken name in the team is a conflict.
func (s *Store) CreateVolume(ctx context.Context, v pandastack.Volume) error {
	if err := requireKey("volume", "id", v.ID); err != nil {
		return err
	}
	created, err := encodeTime("created_at", v.CreatedAt)
	if err != nil {
		return fmt.Errorf("create volume %s: %w", v.ID, err)
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO volumes (`+volumeColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.TeamID, v.Name, v.SizeMiB, v.Host, created, v.SandboxID, v.MountPath, v.Slot, v.ManagedBy)
	if isUniqueViolation(err) {
		return conflict(err, "a volume named %q already exists", v.Name)
	}
	if err != nil {
		return fmt.Errorf("create volume %s: %w", v.ID, err)
	}
	return nil
}

// GetVolume returns a volume by id.
func (s *Store) GetVolume(ctx context.Context, id string) (pandastack.Volume, error) {
	v, err := scanVolume(s.r.QueryRowContext(ctx, `SELECT `+volumeColumns+` FROM volumes WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return v, notFound("volume %s not found", id)
	}
	if err != nil {
		return v, fmt.Errorf("get volume %s: %w", id, err)
	}
	return v, nil
}

// VolumeByName returns a team's volume by name.
func (s *Store) VolumeByName(ctx context.Context, teamID, name string) (pandastack.Volume, error) {
	v, err := scanVolume(s.r.QueryRowContext(ctx, `SELECT `+volumeColumns+` FROM volumes WHERE team_id = ? AND name = ?`, teamID, name))
	if errors.Is(err, sql.ErrNoRows) {
		return v, notFound("volume %s not found", name)
	}
	if err != nil {
		return v, fmt.Errorf("get volume %s: %w", name, err)
	}
	return v, nil
}

// ListVolumes returns a team's volumes (every team's for ""), oldest first;
// never nil.
func (s *Store) ListVolumes(ctx context.Context, teamID string) ([]pandastack.Volume, error) {
	q, args := `SELECT `+volumeColumns+` FROM volumes ORDER BY created_at, id`, []any{}
	if teamID != "" {
		q, args = `SELECT `+volumeColumns+` FROM volumes WHERE team_id = ? ORDER BY created_at, id`, []any{teamID}
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	defer rows.Close()
	out := []pandastack.Volume{}
	for rows.Next() {
		v, err := scanVolume(rows)
		if err != nil {
			return nil, fmt.Errorf("list volumes: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// DeleteVolume removes a free volume's record.
func (s *Store) DeleteVolume(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM volumes WHERE id = ? AND sandbox_id = ''`, id)
	if err != nil {
		return fmt.Errorf("delete volume %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	v, err := s.GetVolume(ctx, id)
	if err != nil {
		return err
	}
	return pandastack.Errorf(pandastack.EConflict, "volume %s is attached to sandbox %s; kill the sandbox first", v.Name, v.SandboxID)
}

// AttachVolume attaches a free volume: the update only matches while
// sandbox_id is empty, so of two racing callers one wins.
func (s *Store) AttachVolume(ctx context.Context, id, sandboxID, mountPath string, slot int) error {
	if err := requireKey("sandbox", "id", sandboxID); err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, `UPDATE volumes SET sandbox_id = ?, mount_path = ?, slot = ? WHERE id = ? AND sandbox_id = ''`,
		sandboxID, mountPath, slot, id)
	if err != nil {
		return fmt.Errorf("attach volume %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	v, err := s.GetVolume(ctx, id)
	if err != nil {
		return err
	}
	return pandastack.Errorf(pandastack.EConflict, "volume %s is in use by sandbox %s", v.Name, v.SandboxID)
}

// MoveVolumes re-points the attachments of sandbox from to sandbox to.
func (s *Store) MoveVolumes(ctx context.Context, from, to string) error {
	if err := requireKey("sandbox", "id", to); err != nil {
		return err
	}
	if from == "" {
		return nil
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE volumes SET sandbox_id = ? WHERE sandbox_id = ?`, to, from); err != nil {
		return fmt.Errorf("move volumes of %s to %s: %w", from, to, err)
	}
	return nil
}

// DetachVolumes frees the volumes attached to a sandbox.
func (s *Store) DetachVolumes(ctx context.Context, sandboxID string) error {
	if sandboxID == "" {
		return nil
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE volumes SET sandbox_id = '', mount_path = '', slot = 0 WHERE sandbox_id = ?`, sandboxID); err != nil {
		return fmt.Errorf("detach volumes of %s: %w", sandboxID, err)
	}
	return nil
}

func scanVolume(row rowScanner) (pandastack.Volume, error) {
	var v pandastack.Volume
	var created string
	if err := row.Scan(&v.ID, &v.TeamID, &v.Name, &v.SizeMiB, &v.Host, &created, &v.SandboxID, &v.MountPath, &v.Slot, &v.ManagedBy); err != nil {
		return v, err
	}
	var err error
	v.CreatedAt, err = decodeTime("volume "+v.ID+" created_at", created)
	return v, err
}
