package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/pandastack/pandastack/internal/apps"
)

const previewColumns = `app_id, number, head_ref, head_sha, deploy_id, live_deploy_id, created_at, updated_at`

// PutPreview inserts or replaces an app's preview.
func (s *Store) PutPreview(ctx context.Context, p apps.Preview) error {
	if err := requireKey("preview", "app_id", p.AppID); err != nil {
		return err
	}
	created, err := encodeTime("created_at", p.CreatedAt)
	if err != nil {
		return err
	}
	updated, err := encodeTime("updated_at", p.UpdatedAt)
	if err != nil {
		return err
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO app_previews (`+previewColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (app_id, number) DO UPDATE SET head_ref = excluded.head_ref, head_sha = excluded.head_sha,
		deploy_id = excluded.deploy_id, live_deploy_id = excluded.live_deploy_id, updated_at = excluded.updated_at`,
		p.AppID, p.Number, p.HeadRef, p.HeadSHA, p.DeployID, p.LiveDeployID, created, updated)
	if err != nil {
		return fmt.Errorf("put preview %d of app %s: %w", p.Number, p.AppID, err)
	}
	return nil
}

func scanPreview(row interface{ Scan(...any) error }) (apps.Preview, error) {
	var p apps.Preview
	var created, updated string
	if err := row.Scan(&p.AppID, &p.Number, &p.HeadRef, &p.HeadSHA, &p.DeployID, &p.LiveDeployID, &created, &updated); err != nil {
		return p, err
	}
	var err error
	if p.CreatedAt, err = decodeTime("created_at", created); err != nil {
		return p, err
	}
	p.UpdatedAt, err = decodeTime("updated_at", updated)
	return p, err
}

// GetPreview returns an app's preview by pull request number.
func (s *Store) GetPreview(ctx context.Context, appID string, number int) (apps.Preview, error) {
	p, err := scanPreview(s.r.QueryRowContext(ctx, `SELECT `+previewColumns+` FROM app_previews WHERE app_id = ? AND number = ?`, appID, number))
	if errors.Is(err, sql.ErrNoRows) {
		return p, notFound("preview %d not found", number)
	}
	if err != nil {
		return p, fmt.Errorf("get preview %d: %w", number, err)
	}
	return p, nil
}

// ListPreviews returns an app's previews (every app's for ""), by number.
func (s *Store) ListPreviews(ctx context.Context, appID string) ([]apps.Preview, error) {
	q, args := `SELECT `+previewColumns+` FROM app_previews ORDER BY app_id, number`, []any{}
	if appID != "" {
		q, args = `SELECT `+previewColumns+` FROM app_previews WHERE app_id = ? ORDER BY number`, []any{appID}
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list previews: %w", err)
	}
	defer rows.Close()
	out := []apps.Preview{}
	for rows.Next() {
		p, err := scanPreview(rows)
		if err != nil {
			return nil, fmt.Errorf("list previews: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// ListPreviewReleases returns the releases of an app's preview number
// (every preview's for 0), newest first.
func (s *Store) ListPreviewReleases(ctx context.Context, appID string, number int) ([]apps.Release, error) {
	if number == 0 {
		return s.listReleases(ctx, `SELECT `+releaseColumns+` FROM app_releases WHERE app_id = ? AND preview != 0
			ORDER BY created_at DESC, id DESC`, appID)
	}
	return s.listReleases(ctx, `SELECT `+releaseColumns+` FROM app_releases WHERE app_id = ? AND preview = ?
		ORDER BY created_at DESC, id DESC`, appID, number)
}

// DeletePreview removes a preview with its deploys and release records,
// in one transaction.
func (s *Store) DeletePreview(ctx context.Context, appID string, number int) error {
	if number == 0 {
		return fmt.Errorf("delete preview of app %s: no pull request number", appID)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete preview %d of app %s: %w", number, appID, err)
	}
	defer tx.Rollback()
	for _, q := range []string{
		`DELETE FROM app_releases WHERE app_id = ? AND preview = ?`,
		`DELETE FROM app_deploys WHERE app_id = ? AND preview = ?`,
		`DELETE FROM app_previews WHERE app_id = ? AND number = ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, appID, number); err != nil {
			return fmt.Errorf("delete preview %d of app %s: %w", number, appID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("delete preview %d of app %s: %w", number, appID, err)
	}
	return nil
}

// RecordDelivery remembers a webhook delivery of an app; a delivery
// recorded before is a conflict.
func (s *Store) RecordDelivery(ctx context.Context, appID, delivery string) error {
	if err := requireKey("delivery", "id", delivery); err != nil {
		return err
	}
	created, err := encodeTime("created_at", time.Now().UTC())
	if err != nil {
		return err
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO app_hook_deliveries (app_id, delivery_id, created_at) VALUES (?, ?, ?)`,
		appID, delivery, created)
	if isUniqueViolation(err) {
		return conflict(err, "delivery %s was already received", delivery)
	}
	if err != nil {
		return fmt.Errorf("record delivery %s of app %s: %w", delivery, appID, err)
	}
	return nil
}
