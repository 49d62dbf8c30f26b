package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/pandastack/pandastack/internal/cron"
)

var _ cron.Store = (*Store)(nil)

const scheduleColumns = `id, team_id, function, expr, tz, data, overlap, missed, next_fire_at, created_at`

// CreateSchedule records a schedule.
func (s *Store) CreateSchedule(ctx context.Context, c cron.Schedule) error {
	created, err := encodeTime("created_at", c.CreatedAt)
	if err != nil {
		return err
	}
	next, err := encodeOptTime("next_fire_at", c.NextFireAt)
	if err != nil {
		return err
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO cron_schedules (`+scheduleColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.TeamID, c.Function, c.Expr, c.TZ, string(c.Data), c.Overlap, c.Missed, next, created); err != nil {
		return fmt.Errorf("create schedule %s: %w", c.ID, err)
	}
	return nil
}

// GetSchedule returns a schedule by id.
func (s *Store) GetSchedule(ctx context.Context, id string) (cron.Schedule, error) {
	c, err := scanSchedule(s.r.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM cron_schedules WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, notFound("schedule %s not found", id)
	}
	return c, err
}

// ListSchedules returns team's schedules (every team's for ""), oldest
// first; never nil.
func (s *Store) ListSchedules(ctx context.Context, teamID string) ([]cron.Schedule, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM cron_schedules WHERE ? = '' OR team_id = ? ORDER BY created_at, id`, teamID, teamID)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	defer rows.Close()
	out := []cron.Schedule{}
	for rows.Next() {
		c, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// DeleteSchedule removes a schedule and its runs.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM cron_schedules WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("schedule %s not found", id)
	}
	return nil
}

// ClaimRuns moves next_fire_at from prev to next and records runs, in one
// transaction, only when next_fire_at still is prev.
func (s *Store) ClaimRuns(ctx context.Context, scheduleID string, prev, next *time.Time, runs []cron.Run) (bool, error) {
	p, err := encodeOptTime("next_fire_at", prev)
	if err != nil {
		return false, err
	}
	n, err := encodeOptTime("next_fire_at", next)
	if err != nil {
		return false, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("claim runs of %s: begin: %w", scheduleID, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE cron_schedules SET next_fire_at = ? WHERE id = ? AND next_fire_at IS ?`, n, scheduleID, p)
	if err != nil {
		return false, fmt.Errorf("claim runs of %s: %w", scheduleID, err)
	}
	if k, _ := res.RowsAffected(); k != 1 {
		return false, nil
	}
	for _, r := range runs {
		if err := insertRun(ctx, tx, r); err != nil {
			if isUniqueViolation(err) {
				return false, nil
			}
			return false, fmt.Errorf("claim runs of %s: %w", scheduleID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("claim runs of %s: commit: %w", scheduleID, err)
	}
	return true, nil
}

const runColumns = `id, schedule_id, fire_at, status, attempts, invocation_id, message, started_at, ended_at, duration_ms`

func insertRun(ctx context.Context, tx *sql.Tx, r cron.Run) error {
	fire, err := encodeTime("fire_at", r.FireAt)
	if err != nil {
		return err
	}
	started, err := encodeOptTime("started_at", r.StartedAt)
	if err != nil {
		return err
	}
	ended, err := encodeOptTime("ended_at", r.EndedAt)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO cron_runs (`+runColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.ScheduleID, fire, r.Status, r.Attempts, r.InvocationID, r.Message, started, ended, r.DurationMs)
	return err
}

// UpdateRun writes a run's progress (status, attempts, invocation, times).
func (s *Store) UpdateRun(ctx context.Context, r cron.Run) error {
	started, err := encodeOptTime("started_at", r.StartedAt)
	if err != nil {
		return err
	}
	ended, err := encodeOptTime("ended_at", r.EndedAt)
	if err != nil {
		return err
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE cron_runs SET status = ?, attempts = ?, invocation_id = ?, message = ?, started_at = ?, ended_at = ?, duration_ms = ? WHERE id = ?`,
		r.Status, r.Attempts, r.InvocationID, r.Message, started, ended, r.DurationMs, r.ID); err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, err)
	}
	return nil
}

// ListRuns returns a schedule's newest runs (at most limit), newest first.
func (s *Store) ListRuns(ctx context.Context, scheduleID string, limit int) ([]cron.Run, error) {
	return s.queryRuns(ctx, `SELECT `+runColumns+` FROM cron_runs WHERE schedule_id = ? ORDER BY fire_at DESC LIMIT ?`, scheduleID, limit)
}

// OpenRuns returns the runs claimed but not ended, oldest fire first.
func (s *Store) OpenRuns(ctx context.Context) ([]cron.Run, error) {
	return s.queryRuns(ctx, `SELECT `+runColumns+` FROM cron_runs WHERE status IN ('pending', 'queued', 'running') ORDER BY fire_at`)
}

func (s *Store) queryRuns(ctx context.Context, q string, args ...any) ([]cron.Run, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	out := []cron.Run{}
	for rows.Next() {
		var r cron.Run
		var fire string
		var started, ended sql.NullString
		if err := rows.Scan(&r.ID, &r.ScheduleID, &fire, &r.Status, &r.Attempts, &r.InvocationID, &r.Message, &started, &ended, &r.DurationMs); err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		if r.FireAt, err = decodeTime("fire_at", fire); err != nil {
			return nil, err
		}
		if r.StartedAt, err = decodeOptTime("started_at", started); err != nil {
			return nil, err
		}
		if r.EndedAt, err = decodeOptTime("ended_at", ended); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func scanSchedule(row rowScanner) (cron.Schedule, error) {
	var c cron.Schedule
	var data, created string
	var next sql.NullString
	if err := row.Scan(&c.ID, &c.TeamID, &c.Function, &c.Expr, &c.TZ, &data, &c.Overlap, &c.Missed, &next, &created); err != nil {
		return c, err
	}
	c.Data = []byte(data)
	var err error
	if c.NextFireAt, err = decodeOptTime("next_fire_at", next); err != nil {
		return c, err
	}
	c.CreatedAt, err = decodeTime("created_at", created)
	return c, err
}
