package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pandastack/pandastack/internal/apps"
)

var _ apps.Store = (*Store)(nil)

const appColumns = `id, team_id, name, git_url, branch, env_sealed, webhook_secret_sealed, build_command,
	start_command, port, health_path, health_timeout_seconds, auto_hibernate_seconds, live_deploy_id, created_at`

// CreateApp records an app; a taken name in the team is a conflict.
func (s *Store) CreateApp(ctx context.Context, a apps.App) error {
	if err := requireKey("app", "id", a.ID); err != nil {
		return err
	}
	created, err := encodeTime("created_at", a.CreatedAt)
	if err != nil {
		return fmt.Errorf("create app %s: %w", a.Name, err)
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO apps (`+appColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.TeamID, a.Name, a.GitURL, a.Branch, a.EnvSealed, a.SecretSealed, a.BuildCommand,
		a.StartCommand, a.Port, a.HealthPath, a.HealthTimeoutSeconds, a.AutoHibernateSeconds, a.LiveDeployID, created)
	if isUniqueViolation(err) {
		return conflict(err, "an app named %q already exists", a.Name)
	}
	if err != nil {
		return fmt.Errorf("create app %s: %w", a.Name, err)
	}
	return nil
}

func scanApp(row interface{ Scan(...any) error }) (apps.App, error) {
	var a apps.App
	var created string
	err := row.Scan(&a.ID, &a.TeamID, &a.Name, &a.GitURL, &a.Branch, &a.EnvSealed, &a.SecretSealed, &a.BuildCommand,
		&a.StartCommand, &a.Port, &a.HealthPath, &a.HealthTimeoutSeconds, &a.AutoHibernateSeconds, &a.LiveDeployID, &created)
	if err != nil {
		return a, err
	}
	a.CreatedAt, err = decodeTime("created_at", created)
	return a, err
}

// GetApp returns a team's app by name.
func (s *Store) GetApp(ctx context.Context, teamID, name string) (apps.App, error) {
	a, err := scanApp(s.r.QueryRowContext(ctx, `SELECT `+appColumns+` FROM apps WHERE team_id = ? AND name = ?`, teamID, name))
	if errors.Is(err, sql.ErrNoRows) {
		return a, notFound("app %s not found", name)
	}
	if err != nil {
		return a, fmt.Errorf("get app %s: %w", name, err)
	}
	return a, nil
}

// GetAppByID returns an app by id.
func (s *Store) GetAppByID(ctx context.Context, id string) (apps.App, error) {
	a, err := scanApp(s.r.QueryRowContext(ctx, `SELECT `+appColumns+` FROM apps WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return a, notFound("app %s not found", id)
	}
	if err != nil {
		return a, fmt.Errorf("get app %s: %w", id, err)
	}
	return a, nil
}

// ListApps returns a team's apps (every team's for ""), oldest first.
func (s *Store) ListApps(ctx context.Context, teamID string) ([]apps.App, error) {
	q, args := `SELECT `+appColumns+` FROM apps ORDER BY created_at, id`, []any{}
	if teamID != "" {
		q, args = `SELECT `+appColumns+` FROM apps WHERE team_id = ? ORDER BY created_at, id`, []any{teamID}
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	defer rows.Close()
	out := []apps.App{}
	for rows.Next() {
		a, err := scanApp(rows)
		if err != nil {
			return nil, fmt.Errorf("list apps: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// SetLiveDeploy points an app at its live deploy.
func (s *Store) SetLiveDeploy(ctx context.Context, appID, deployID string) error {
	res, err := s.w.ExecContext(ctx, `UPDATE apps SET live_deploy_id = ? WHERE id = ?`, deployID, appID)
	if err != nil {
		return fmt.Errorf("set live deploy of app %s: %w", appID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("app %s not found", appID)
	}
	return nil
}

// DeleteApp removes an app with its deploys and releases.
func (s *Store) DeleteApp(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM apps WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete app %s: %w", id, err)
	}
	return nil
}

const deployColumns = `id, app_id, status, ref, commit_sha, framework, error, delivery_id, preview, created_at, updated_at`

// PutDeploy inserts or replaces a deploy.
func (s *Store) PutDeploy(ctx context.Context, d apps.Deploy) error {
	if err := requireKey("deploy", "id", d.ID); err != nil {
		return err
	}
	created, err := encodeTime("created_at", d.CreatedAt)
	if err != nil {
		return err
	}
	updated, err := encodeTime("updated_at", d.UpdatedAt)
	if err != nil {
		return err
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO app_deploys (`+deployColumns+`, log) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET status = excluded.status, ref = excluded.ref, commit_sha = excluded.commit_sha,
		framework = excluded.framework, error = excluded.error, log = excluded.log, updated_at = excluded.updated_at`,
		d.ID, d.AppID, d.Status, d.Ref, d.Commit, d.Framework, d.Error, d.DeliveryID, d.Preview, created, updated, d.Log)
	if isUniqueViolation(err) {
		return conflict(err, "delivery %s was already received", d.DeliveryID)
	}
	if err != nil {
		return fmt.Errorf("put deploy %s: %w", d.ID, err)
	}
	return nil
}

func scanDeploy(row interface{ Scan(...any) error }, withLog bool) (apps.Deploy, error) {
	var d apps.Deploy
	var created, updated string
	dst := []any{&d.ID, &d.AppID, &d.Status, &d.Ref, &d.Commit, &d.Framework, &d.Error, &d.DeliveryID, &d.Preview, &created, &updated}
	if withLog {
		dst = append(dst, &d.Log)
	}
	if err := row.Scan(dst...); err != nil {
		return d, err
	}
	var err error
	if d.CreatedAt, err = decodeTime("created_at", created); err != nil {
		return d, err
	}
	d.UpdatedAt, err = decodeTime("updated_at", updated)
	return d, err
}

// GetDeploy returns an app's deploy with its log.
func (s *Store) GetDeploy(ctx context.Context, appID, id string) (apps.Deploy, error) {
	d, err := scanDeploy(s.r.QueryRowContext(ctx, `SELECT `+deployColumns+`, log FROM app_deploys WHERE app_id = ? AND id = ?`, appID, id), true)
	if errors.Is(err, sql.ErrNoRows) {
		return d, notFound("deploy %s not found", id)
	}
	if err != nil {
		return d, fmt.Errorf("get deploy %s: %w", id, err)
	}
	return d, nil
}

// ListDeploys returns an app's deploys, newest first, without logs.
func (s *Store) ListDeploys(ctx context.Context, appID string) ([]apps.Deploy, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+deployColumns+` FROM app_deploys WHERE app_id = ? ORDER BY created_at DESC, id DESC`, appID)
	if err != nil {
		return nil, fmt.Errorf("list deploys: %w", err)
	}
	defer rows.Close()
	out := []apps.Deploy{}
	for rows.Next() {
		d, err := scanDeploy(rows, false)
		if err != nil {
			return nil, fmt.Errorf("list deploys: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

const releaseColumns = `id, app_id, deploy_id, snapshot_id, machine_id, port, preview, created_at`

// PutRelease records a release.
func (s *Store) PutRelease(ctx context.Context, r apps.Release) error {
	if err := requireKey("release", "id", r.ID); err != nil {
		return err
	}
	created, err := encodeTime("created_at", r.CreatedAt)
	if err != nil {
		return err
	}
	_, err = s.w.ExecContext(ctx, `INSERT OR REPLACE INTO app_releases (`+releaseColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.AppID, r.DeployID, r.SnapshotID, r.MachineID, r.Port, r.Preview, created)
	if err != nil {
		return fmt.Errorf("put release %s: %w", r.ID, err)
	}
	return nil
}

// ListReleases returns an app's own releases (not its previews'),
// newest first.
func (s *Store) ListReleases(ctx context.Context, appID string) ([]apps.Release, error) {
	return s.listReleases(ctx, `SELECT `+releaseColumns+` FROM app_releases WHERE app_id = ? AND preview = 0
		ORDER BY created_at DESC, id DESC`, appID)
}

func (s *Store) listReleases(ctx context.Context, q string, args ...any) ([]apps.Release, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list releases: %w", err)
	}
	defer rows.Close()
	out := []apps.Release{}
	for rows.Next() {
		var r apps.Release
		var created string
		if err := rows.Scan(&r.ID, &r.AppID, &r.DeployID, &r.SnapshotID, &r.MachineID, &r.Port, &r.Preview, &created); err != nil {
			return nil, fmt.Errorf("list releases: %w", err)
		}
		if r.CreatedAt, err = decodeTime("created_at", created); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// DeleteRelease removes a release record.
func (s *Store) DeleteRelease(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM app_releases WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete release %s: %w", id, err)
	}
	return nil
}
