package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pandastack/pandastack"
)

const sandboxColumns = `id, team_id, template, template_id, state, host, accel, metadata, env,
	cpus, memory_mib, created_at, expires_at, ended_at, end_reason, auto_hibernate_seconds, lifetime,
	template_version, disk_mib, defaults, managed_by, on_expiry`

// PutSandbox inserts the sandbox or replaces every field of the one with the
// same id.
func (s *Store) PutSandbox(ctx context.Context, sb pandastack.Sandbox) error {
	if err := requireKey("sandbox", "id", sb.ID); err != nil {
		return err
	}
	args, err := sandboxArgs(sb)
	if err != nil {
		return fmt.Errorf("put sandbox %s: %w", sb.ID, err)
	}
	_, err = s.w.ExecContext(ctx,
		`INSERT INTO sandboxes (`+sandboxColumns+`)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		 ON CONFLICT (id) DO UPDATE SET
			team_id = excluded.team_id, template = excluded.template,
			template_id = excluded.template_id, state = excluded.state,
			host = excluded.host, accel = excluded.accel,
			metadata = excluded.metadata, env = excluded.env,
			cpus = excluded.cpus, memory_mib = excluded.memory_mib,
			created_at = excluded.created_at, expires_at = excluded.expires_at,
			ended_at = excluded.ended_at, end_reason = excluded.end_reason,
			auto_hibernate_seconds = excluded.auto_hibernate_seconds,
			lifetime = excluded.lifetime,
			template_version = excluded.template_version, disk_mib = excluded.disk_mib,
			defaults = excluded.defaults, managed_by = excluded.managed_by,
			on_expiry = excluded.on_expiry`,
		args...)
	if err != nil {
		return fmt.Errorf("put sandbox %s: %w", sb.ID, err)
	}
	return nil
}

func sandboxArgs(sb pandastack.Sandbox) ([]any, error) {
	meta, err := encodeMap("metadata", sb.Metadata)
	if err != nil {
		return nil, err
	}
	env, err := encodeMap("env", sb.Env)
	if err != nil {
		return nil, err
	}
	created, err := encodeTime("created_at", sb.CreatedAt)
	if err != nil {
		return nil, err
	}
	expires, err := encodeTime("expires_at", sb.ExpiresAt)
	if err != nil {
		return nil, err
	}
	ended, err := encodeOptTime("ended_at", sb.EndedAt)
	if err != nil {
		return nil, err
	}
	defaults, err := encodeDefaults(sb.Defaults)
	if err != nil {
		return nil, err
	}
	return []any{sb.ID, sb.TeamID, sb.Template, sb.TemplateID, string(sb.State), sb.Host,
		string(sb.Accel), meta, env, sb.CPUs, sb.MemoryMiB, created, expires, ended, sb.EndReason, sb.AutoHibernateSeconds,
		string(sb.Lifetime), sb.TemplateVersion, sb.DiskMiB, defaults, sb.ManagedBy, string(sb.OnExpiry)}, nil
}

// GetSandbox returns the sandbox with the given id.
func (s *Store) GetSandbox(ctx context.Context, id string) (pandastack.Sandbox, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE id = ?`, id)
	sb, err := scanSandbox(row)
	if errors.Is(err, sql.ErrNoRows) {
		return pandastack.Sandbox{}, notFound("sandbox %s not found", id)
	}
	if err != nil {
		return pandastack.Sandbox{}, fmt.Errorf("get sandbox %s: %w", id, err)
	}
	return sb, nil
}

// ListSandboxes returns the sandboxes matching every set field of f, oldest
// first (ties broken by id). It never returns a nil slice.
func (s *Store) ListSandboxes(ctx context.Context, f pandastack.SandboxFilter) ([]pandastack.Sandbox, error) {
	var q strings.Builder
	var args []any
	q.WriteString(`SELECT ` + sandboxColumns + ` FROM sandboxes WHERE 1 = 1`)
	if f.TeamID != "" {
		q.WriteString(` AND team_id = ?`)
		args = append(args, f.TeamID)
	}
	if f.Host != "" {
		q.WriteString(` AND host = ?`)
		args = append(args, f.Host)
	}
	switch f.Lifetime {
	case "":
	case pandastack.LifetimeSandbox: // and records made before lifetimes
		q.WriteString(` AND lifetime IN ('', ?)`)
		args = append(args, string(f.Lifetime))
	default:
		q.WriteString(` AND lifetime = ?`)
		args = append(args, string(f.Lifetime))
	}
	if f.LiveOnly {
		q.WriteString(` AND state IN (?, ?, ?)`)
		args = append(args, string(pandastack.StateStarting), string(pandastack.StateRunning), string(pandastack.StateHibernated))
	}
	// json_each rather than json_extract: keys are user data and may contain
	// characters ('.', '"', '[') that a JSON path would interpret.
	keys := make([]string, 0, len(f.Metadata))
	for k := range f.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		q.WriteString(` AND EXISTS (SELECT 1 FROM json_each(sandboxes.metadata) AS m
			WHERE m.key = ? AND m.type = 'text' AND m.value = ?)`)
		args = append(args, k, f.Metadata[k])
	}
	q.WriteString(` ORDER BY created_at, id`)

	rows, err := s.r.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	defer rows.Close()
	out := []pandastack.Sandbox{}
	for rows.Next() {
		sb, err := scanSandbox(rows)
		if err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		out = append(out, sb)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	return out, nil
}

// CountLiveSandboxes counts the team's sandboxes that have not ended.
func (s *Store) CountLiveSandboxes(ctx context.Context, teamID string) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx,
		`SELECT count(*) FROM sandboxes WHERE team_id = ? AND state IN (?, ?, ?)`,
		teamID, string(pandastack.StateStarting), string(pandastack.StateRunning), string(pandastack.StateHibernated)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count live sandboxes of team %s: %w", teamID, err)
	}
	return n, nil
}

func scanSandbox(row rowScanner) (pandastack.Sandbox, error) {
	var sb pandastack.Sandbox
	var meta, env, created, expires, defaults string
	var ended sql.NullString
	err := row.Scan(&sb.ID, &sb.TeamID, &sb.Template, &sb.TemplateID, &sb.State, &sb.Host,
		&sb.Accel, &meta, &env, &sb.CPUs, &sb.MemoryMiB, &created, &expires, &ended, &sb.EndReason, &sb.AutoHibernateSeconds, &sb.Lifetime,
		&sb.TemplateVersion, &sb.DiskMiB, &defaults, &sb.ManagedBy, &sb.OnExpiry)
	if err != nil {
		return sb, err
	}
	if sb.Defaults, err = decodeDefaults("sandbox "+sb.ID+" defaults", defaults); err != nil {
		return sb, err
	}
	if sb.Metadata, err = decodeMap("sandbox "+sb.ID+" metadata", meta); err != nil {
		return sb, err
	}
	if sb.Env, err = decodeMap("sandbox "+sb.ID+" env", env); err != nil {
		return sb, err
	}
	if sb.CreatedAt, err = decodeTime("sandbox "+sb.ID+" created_at", created); err != nil {
		return sb, err
	}
	if sb.ExpiresAt, err = decodeTime("sandbox "+sb.ID+" expires_at", expires); err != nil {
		return sb, err
	}
	sb.EndedAt, err = decodeOptTime("sandbox "+sb.ID+" ended_at", ended)
	return sb, err
}
