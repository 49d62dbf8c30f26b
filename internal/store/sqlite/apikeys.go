package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// CreateAPIKey inserts a key. A taken id or hash is a Conflict; a team that
// does not exist is NotFound.
func (s *Store) CreateAPIKey(ctx context.Context, k pandastack.APIKey) error {
	if err := cmp.Or(requireKey("api key", "id", k.ID), requireKey("api key", "hash", k.Hash)); err != nil {
		return err
	}
	created, err := encodeTime("api key created_at", k.CreatedAt)
	if err != nil {
		return err
	}
	revoked, err := encodeOptTime("api key revoked_at", k.RevokedAt)
	if err != nil {
		return err
	}
	_, err = s.w.ExecContext(ctx,
		`INSERT INTO api_keys (id, team_id, name, prefix, hash, admin, created_at, revoked_at)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.TeamID, k.Name, k.Prefix, k.Hash, k.Admin, created, revoked)
	switch {
	case isUniqueViolation(err) && strings.Contains(err.Error(), "api_keys.hash"):
		// Deliberately vague: the message must not help anyone probe hashes.
		return conflict(err, "api key %s conflicts with an existing key", k.ID)
	case isUniqueViolation(err):
		return conflict(err, "api key %s already exists", k.ID)
	case isForeignKeyViolation(err):
		return &pandastack.Error{Code: pandastack.ENotFound, Message: fmt.Sprintf("team %s not found", k.TeamID), Err: err}
	case err != nil:
		return fmt.Errorf("create api key %s: %w", k.ID, err)
	}
	return nil
}

// APIKeyByHash returns the unrevoked key with the given hash.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (pandastack.APIKey, error) {
	row := s.r.QueryRowContext(ctx,
		`SELECT id, team_id, name, prefix, hash, admin, created_at, revoked_at
		 FROM api_keys WHERE hash = ? AND revoked_at IS NULL`, hash)
	k, err := scanAPIKey(row)
	if errors.Is(err, sql.ErrNoRows) {
		// Never echo the hash: it is a credential derivative.
		return pandastack.APIKey{}, notFound("api key not found")
	}
	if err != nil {
		return pandastack.APIKey{}, fmt.Errorf("get api key by hash: %w", err)
	}
	return k, nil
}

// CountAPIKeys counts every key ever created, revoked ones included, so that
// revoking all keys never looks like a fresh install.
func (s *Store) CountAPIKeys(ctx context.Context) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM api_keys`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count api keys: %w", err)
	}
	return n, nil
}

func scanAPIKey(row rowScanner) (pandastack.APIKey, error) {
	var k pandastack.APIKey
	var created string
	var revoked sql.NullString
	if err := row.Scan(&k.ID, &k.TeamID, &k.Name, &k.Prefix, &k.Hash, &k.Admin, &created, &revoked); err != nil {
		return k, err
	}
	var err error
	if k.CreatedAt, err = decodeTime("api key created_at", created); err != nil {
		return k, err
	}
	k.RevokedAt, err = decodeOptTime("api key revoked_at", revoked)
	return k, err
}

const apiKeyColumns = `id, team_id, name, prefix, hash, admin, created_at, revoked_at`

// GetAPIKey returns the key with the given id, revoked or not.
func (s *Store) GetAPIKey(ctx context.Context, id string) (pandastack.APIKey, error) {
	k, err := scanAPIKey(s.r.QueryRowContext(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return pandastack.APIKey{}, notFound("api key %s not found", id)
	}
	if err != nil {
		return pandastack.APIKey{}, fmt.Errorf("get api key %s: %w", id, err)
	}
	return k, nil
}

// ListAPIKeys lists a team's keys (every team's for ""), oldest first,
// revoked ones included.
func (s *Store) ListAPIKeys(ctx context.Context, teamID string) ([]pandastack.APIKey, error) {
	q := `SELECT ` + apiKeyColumns + ` FROM api_keys`
	var args []any
	if teamID != "" {
		q += ` WHERE team_id = ?`
		args = append(args, teamID)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	var out []pandastack.APIKey
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list api keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// RevokeAPIKey sets a key's revoked_at unless it is set already.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) (pandastack.APIKey, error) {
	when, err := encodeTime("api key revoked_at", at)
	if err != nil {
		return pandastack.APIKey{}, err
	}
	if _, err := s.w.ExecContext(ctx,
		`UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, when, id); err != nil {
		return pandastack.APIKey{}, fmt.Errorf("revoke api key %s: %w", id, err)
	}
	// Read through the writer: the read pool may not see the update yet.
	k, err := scanAPIKey(s.w.QueryRowContext(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return pandastack.APIKey{}, notFound("api key %s not found", id)
	}
	if err != nil {
		return pandastack.APIKey{}, fmt.Errorf("revoke api key %s: %w", id, err)
	}
	return k, nil
}
