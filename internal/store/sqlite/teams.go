package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/pandastack/pandastack"
)

// CreateTeam inserts a team. A taken id or name is a Conflict.
func (s *Store) CreateTeam(ctx context.Context, t pandastack.Team) error {
	if err := cmp.Or(requireKey("team", "id", t.ID), requireKey("team", "name", t.Name)); err != nil {
		return err
	}
	created, err := encodeTime("team created_at", t.CreatedAt)
	if err != nil {
		return err
	}
	_, err = s.w.ExecContext(ctx,
		`INSERT INTO teams (id, name, created_at) VALUES (?, ?, ?)`,
		t.ID, t.Name, created)
	if isUniqueViolation(err) {
		if strings.Contains(err.Error(), "teams.name") {
			return conflict(err, "team name %q is taken", t.Name)
		}
		return conflict(err, "team %s already exists", t.ID)
	}
	if err != nil {
		return fmt.Errorf("create team %s: %w", t.ID, err)
	}
	return nil
}

// GetTeam returns the team with the given id.
func (s *Store) GetTeam(ctx context.Context, id string) (pandastack.Team, error) {
	row := s.r.QueryRowContext(ctx, `SELECT id, name, created_at FROM teams WHERE id = ?`, id)
	t, err := scanTeam(row)
	if errors.Is(err, sql.ErrNoRows) {
		return pandastack.Team{}, notFound("team %s not found", id)
	}
	if err != nil {
		return pandastack.Team{}, fmt.Errorf("get team %s: %w", id, err)
	}
	return t, nil
}

// TeamByName returns the team with the given name.
func (s *Store) TeamByName(ctx context.Context, name string) (pandastack.Team, error) {
	row := s.r.QueryRowContext(ctx, `SELECT id, name, created_at FROM teams WHERE name = ?`, name)
	t, err := scanTeam(row)
	if errors.Is(err, sql.ErrNoRows) {
		return pandastack.Team{}, notFound("team %q not found", name)
	}
	if err != nil {
		return pandastack.Team{}, fmt.Errorf("get team by name %q: %w", name, err)
	}
	return t, nil
}

func scanTeam(row rowScanner) (pandastack.Team, error) {
	var t pandastack.Team
	var created string
	if err := row.Scan(&t.ID, &t.Name, &created); err != nil {
		return t, err
	}
	var err error
	t.CreatedAt, err = decodeTime("team created_at", created)
	return t, err
}
