package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pandastack/pandastack"
)

const databaseColumns = `id, team_id, name, state, machine_id, db_user, password, db_name, created_at, volume_id`

// CreateDatabase records a database; a name taken in the team is a
// conflict.
func (s *Store) CreateDatabase(ctx context.Context, d pandastack.Database) error {
	if err := requireKey("database", "id", d.ID); err != nil {
		return err
	}
	created, err := encodeTime("created_at", d.CreatedAt)
	if err != nil {
		return fmt.Errorf("create database %s: %w", d.ID, err)
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO databases (`+databaseColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.ID, d.TeamID, d.Name, d.State, d.MachineID, d.User, d.PasswordSealed, d.DBName, created, d.VolumeID)
	if isUniqueViolation(err) {
		return conflict(err, "a database named %q already exists", d.Name)
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", d.ID, err)
	}
	return nil
}

// UpdateDatabase sets a database's state and machine.
func (s *Store) UpdateDatabase(ctx context.Context, id, state, machineID string) error {
	res, err := s.w.ExecContext(ctx, `UPDATE databases SET state = ?, machine_id = ? WHERE id = ?`, state, machineID, id)
	if err != nil {
		return fmt.Errorf("update database %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("database %s not found", id)
	}
	return nil
}

// SetDatabaseVolume records the volume a database's PGDATA lives on.
func (s *Store) SetDatabaseVolume(ctx context.Context, id, volumeID string) error {
	res, err := s.w.ExecContext(ctx, `UPDATE databases SET volume_id = ? WHERE id = ?`, volumeID, id)
	if err != nil {
		return fmt.Errorf("set volume of database %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("database %s not found", id)
	}
	return nil
}

// GetDatabase returns a database by id.
func (s *Store) GetDatabase(ctx context.Context, id string) (pandastack.Database, error) {
	d, err := scanDatabase(s.r.QueryRowContext(ctx, `SELECT `+databaseColumns+` FROM databases WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return d, notFound("database %s not found", id)
	}
	if err != nil {
		return d, fmt.Errorf("get database %s: %w", id, err)
	}
	return d, nil
}

// ListDatabases lists a team's databases (every team's when teamID is
// empty), oldest first.
func (s *Store) ListDatabases(ctx context.Context, teamID string) ([]pandastack.Database, error) {
	q, args := `SELECT `+databaseColumns+` FROM databases ORDER BY created_at, id`, []any{}
	if teamID != "" {
		q, args = `SELECT `+databaseColumns+` FROM databases WHERE team_id = ? ORDER BY created_at, id`, []any{teamID}
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list databases: %w", err)
	}
	defer rows.Close()
	var out []pandastack.Database
	for rows.Next() {
		d, err := scanDatabase(rows)
		if err != nil {
			return nil, fmt.Errorf("list databases: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list databases: %w", err)
	}
	return out, nil
}

// DeleteDatabase removes a database's record; a missing one is not an
// error.
func (s *Store) DeleteDatabase(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM databases WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete database %s: %w", id, err)
	}
	return nil
}

func scanDatabase(row rowScanner) (pandastack.Database, error) {
	var d pandastack.Database
	var created string
	if err := row.Scan(&d.ID, &d.TeamID, &d.Name, &d.State, &d.MachineID, &d.User, &d.PasswordSealed, &d.DBName, &created, &d.VolumeID); err != nil {
		return d, err
	}
	var err error
	d.CreatedAt, err = decodeTime("database "+d.ID+" created_at", created)
	return d, err
}
