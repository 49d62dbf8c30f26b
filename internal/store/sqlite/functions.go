package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pandastack/pandastack/internal/functions"
)

var _ functions.Store = (*Store)(nil)

const fnVersionColumns = `function_id, version, runtime, handler, env_sealed, timeout_ms, memory_mib, max_concurrency, http_public, isolation, snapshot_id, bundle_sha256, bundle_bytes, created_at`

// AddFunctionVersion records v as the newest version of team's function
// name, creating the function (with id newID) when it is new.
func (s *Store) AddFunctionVersion(ctx context.Context, teamID, name, newID string, v functions.Version) (functions.Function, error) {
	now, err := encodeTime("created_at", v.CreatedAt)
	if err != nil {
		return functions.Function{}, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return functions.Function{}, fmt.Errorf("add function version: begin: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO functions (id, team_id, name, latest_version, created_at, updated_at)
		VALUES (?, ?, ?, 0, ?, ?) ON CONFLICT (team_id, name) DO NOTHING`, newID, teamID, name, now, now); err != nil {
		return functions.Function{}, fmt.Errorf("add function %s: %w", name, err)
	}
	var id string
	var latest int
	if err := tx.QueryRowContext(ctx, `SELECT id, latest_version FROM functions WHERE team_id = ? AND name = ?`, teamID, name).Scan(&id, &latest); err != nil {
		return functions.Function{}, fmt.Errorf("add function %s: %w", name, err)
	}
	v.FunctionID, v.Version = id, latest+1
	if _, err := tx.ExecContext(ctx, `INSERT INTO function_versions (`+fnVersionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.FunctionID, v.Version, v.Runtime, v.Handler, v.EnvSealed, v.Timeout.Milliseconds(), v.MemoryMiB, v.MaxConcurrency, v.HTTPPublic, v.Isolation,
		v.SnapshotID, v.BundleSHA256, v.BundleBytes, now); err != nil {
		return functions.Function{}, fmt.Errorf("add version of function %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE functions SET latest_version = ?, updated_at = ? WHERE id = ?`, v.Version, now, id); err != nil {
		return functions.Function{}, fmt.Errorf("add version of function %s: %w", name, err)
	}
	if err := tx.Commit(); err != nil {
		return functions.Function{}, fmt.Errorf("add version of function %s: commit: %w", name, err)
	}
	return s.GetFunction(ctx, teamID, name)
}

// GetFunction returns team's function name with its latest version.
func (s *Store) GetFunction(ctx context.Context, teamID, name string) (functions.Function, error) {
	fs, err := s.listFunctions(ctx, `f.team_id = ? AND f.name = ?`, teamID, name)
	if err != nil {
		return functions.Function{}, err
	}
	if len(fs) == 0 {
		return functions.Function{}, notFound("function %s not found", name)
	}
	return fs[0], nil
}

// ListFunctions returns team's functions (every team's for "") by name, the
// earliest made first among the same name (it keeps its HTTP hostname);
// never nil.
func (s *Store) ListFunctions(ctx context.Context, teamID string) ([]functions.Function, error) {
	return s.listFunctions(ctx, `(? = '' OR f.team_id = ?)`, teamID, teamID)
}

func (s *Store) listFunctions(ctx context.Context, where string, args ...any) ([]functions.Function, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT f.id, f.team_id, f.name, f.latest_version, f.created_at, f.updated_at,
		v.function_id, v.version, v.runtime, v.handler, v.env_sealed, v.timeout_ms, v.memory_mib, v.max_concurrency, v.http_public, v.isolation, v.snapshot_id, v.bundle_sha256, v.bundle_bytes, v.created_at
		FROM functions f JOIN function_versions v ON v.function_id = f.id AND v.version = f.latest_version
		WHERE `+where+` ORDER BY f.name, f.created_at, f.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list functions: %w", err)
	}
	defer rows.Close()
	out := []functions.Function{}
	for rows.Next() {
		var f functions.Function
		var created, updated string
		vals := []any{&f.ID, &f.TeamID, &f.Name, &f.LatestVersion, &created, &updated}
		v, vdest := versionDest()
		if err := rows.Scan(append(vals, vdest...)...); err != nil {
			return nil, fmt.Errorf("list functions: %w", err)
		}
		if f.CreatedAt, err = decodeTime("created_at", created); err != nil {
			return nil, err
		}
		if f.UpdatedAt, err = decodeTime("updated_at", updated); err != nil {
			return nil, err
		}
		if f.Latest, err = v(); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// versionDest returns scan destinations for fnVersionColumns and a func
// that assembles the version once scanned.
func versionDest() (func() (functions.Version, error), []any) {
	var v functions.Version
	var timeoutMs int64
	var created string
	dest := []any{&v.FunctionID, &v.Version, &v.Runtime, &v.Handler, &v.EnvSealed, &timeoutMs, &v.MemoryMiB, &v.MaxConcurrency, &v.HTTPPublic, &v.Isolation,
		&v.SnapshotID, &v.BundleSHA256, &v.BundleBytes, &created}
	return func() (functions.Version, error) {
		v.Timeout = time.Duration(timeoutMs) * time.Millisecond
		t, err := decodeTime("created_at", created)
		v.CreatedAt = t
		return v, err
	}, dest
}

// ListFunctionVersions returns a function's versions, oldest first.
func (s *Store) ListFunctionVersions(ctx context.Context, functionID string) ([]functions.Version, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+fnVersionColumns+` FROM function_versions WHERE function_id = ? ORDER BY version`, functionID)
	if err != nil {
		return nil, fmt.Errorf("list versions of function %s: %w", functionID, err)
	}
	defer rows.Close()
	out := []functions.Version{}
	for rows.Next() {
		v, dest := versionDest()
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("list versions of function %s: %w", functionID, err)
		}
		ver, err := v()
		if err != nil {
			return nil, err
		}
		out = append(out, ver)
	}
	return out, rows.Err()
}

// DeleteFunction removes a function, its versions and invocations.
func (s *Store) DeleteFunction(ctx context.Context, functionID string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM functions WHERE id = ?`, functionID)
	if err != nil {
		return fmt.Errorf("delete function %s: %w", functionID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("function %s not found", functionID)
	}
	return nil
}

const invocationColumns = `id, function_id, team_id, version, trigger, execution_id, status, result, error, logs, created_at, ended_at, duration_ms`

// PutInvocation inserts or replaces an invocation.
func (s *Store) PutInvocation(ctx context.Context, inv functions.Invocation) error {
	created, err := encodeTime("created_at", inv.CreatedAt)
	if err != nil {
		return err
	}
	ended, err := encodeOptTime("ended_at", inv.EndedAt)
	if err != nil {
		return err
	}
	var errText string
	if inv.Error != nil {
		b, _ := json.Marshal(inv.Error)
		errText = string(b)
	}
	_, err = s.w.ExecContext(ctx, `INSERT OR REPLACE INTO function_invocations (`+invocationColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		inv.ID, inv.FunctionID, inv.TeamID, inv.Version, inv.Trigger, inv.ExecutionID, inv.Status, string(inv.Result), errText, inv.Logs,
		created, ended, inv.DurationMs)
	if isForeignKeyViolation(err) {
		return notFound("function %s not found", inv.FunctionID)
	}
	if err != nil {
		return fmt.Errorf("record invocation %s: %w", inv.ID, err)
	}
	return nil
}

// GetInvocation returns a function's invocation by id.
func (s *Store) GetInvocation(ctx context.Context, functionID, id string) (functions.Invocation, error) {
	inv, err := scanInvocation(s.r.QueryRowContext(ctx, `SELECT `+invocationColumns+` FROM function_invocations WHERE id = ? AND function_id = ?`, id, functionID))
	if errors.Is(err, sql.ErrNoRows) {
		return inv, notFound("invocation %s not found", id)
	}
	return inv, err
}

// UnfinishedInvocations returns the queued or running invocations.
func (s *Store) UnfinishedInvocations(ctx context.Context) ([]functions.Invocation, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+invocationColumns+` FROM function_invocations WHERE status IN ('queued', 'running') ORDER BY created_at`)
	if err != nil {
		return nil, fmt.Errorf("list unfinished invocations: %w", err)
	}
	defer rows.Close()
	var out []functions.Invocation
	for rows.Next() {
		inv, err := scanInvocation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, inv)
	}
	return out, rows.Err()
}

func scanInvocation(row rowScanner) (functions.Invocation, error) {
	var inv functions.Invocation
	var result, errText, created string
	var ended sql.NullString
	if err := row.Scan(&inv.ID, &inv.FunctionID, &inv.TeamID, &inv.Version, &inv.Trigger, &inv.ExecutionID, &inv.Status,
		&result, &errText, &inv.Logs, &created, &ended, &inv.DurationMs); err != nil {
		return inv, err
	}
	if result != "" {
		inv.Result = json.RawMessage(result)
	}
	if errText != "" {
		inv.Error = &functions.FunctionError{}
		if err := json.Unmarshal([]byte(errText), inv.Error); err != nil {
			return inv, fmt.Errorf("decode invocation %s error: %w", inv.ID, err)
		}
	}
	var err error
	if inv.CreatedAt, err = decodeTime("created_at", created); err != nil {
		return inv, err
	}
	inv.EndedAt, err = decodeOptTime("ended_at", ended)
	return inv, err
}
