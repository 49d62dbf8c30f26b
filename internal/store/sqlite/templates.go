package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pandastack/pandastack"
)

// Templates: template_versions holds every build that was ever a template's
// newest, numbered per (team_id, name); template_tags names versions; the
// newest version is implicitly "latest". See migrations/0005.

const versionColumns = `team_id, name, version, id, cpus, memory_mib, disk_mib, accel, dir, built_at, build_ms, build_id`

// latestTag names the newest version; it is never stored.
const latestTag = "latest"

// AddTemplateVersion records build t as the newest version of its template
// (see pandastack.TemplateStore), in one transaction.
func (s *Store) AddTemplateVersion(ctx context.Context, t pandastack.Template, buildID, tag string) (pandastack.Template, error) {
	if err := requireKey("template", "name", t.Name); err != nil {
		return t, err
	}
	if err := requireKey("template "+t.Name, "build id", t.ID); err != nil {
		return t, err
	}
	built, err := encodeTime("built_at", t.BuiltAt)
	if err != nil {
		return t, fmt.Errorf("add version of template %s: %w", t.Name, err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return t, fmt.Errorf("add version of template %s: %w", t.Name, err)
	}
	defer tx.Rollback()
	var newest int
	var newestID sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT version, id FROM template_versions WHERE team_id = ? AND name = ?
		ORDER BY version DESC LIMIT 1`, t.TeamID, t.Name).Scan(&newest, &newestID)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("add version of template %s: %w", t.Name, err)
	}
	insert := true
	switch {
	case t.Version > 0:
		var id string
		err := tx.QueryRowContext(ctx, `SELECT id FROM template_versions WHERE team_id = ? AND name = ? AND version = ?`,
			t.TeamID, t.Name, t.Version).Scan(&id)
		switch {
		case err == nil && id != t.ID:
			return t, pandastack.Errorf(pandastack.EConflict, "template %s version %d is build %s, not %s", t.Name, t.Version, id, t.ID)
		case err == nil:
			insert = false
		case !errors.Is(err, sql.ErrNoRows):
			return t, fmt.Errorf("add version of template %s: %w", t.Name, err)
		}
	case newestID.Valid && newestID.String == t.ID:
		t.Version, insert = newest, false
	default:
		t.Version = newest + 1
	}
	if insert {
		_, err = tx.ExecContext(ctx, `INSERT INTO template_versions (`+versionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			t.TeamID, t.Name, t.Version, t.ID, t.CPUs, t.MemoryMiB, t.DiskMiB, string(t.Accel), t.Dir, built, t.BuildMs, buildID)
		if err != nil {
			return t, fmt.Errorf("add version of template %s: %w", t.Name, err)
		}
	}
	if tag != "" && tag != latestTag {
		_, err = tx.ExecContext(ctx, `INSERT INTO template_tags (team_id, name, tag, version) VALUES (?, ?, ?, ?)
			ON CONFLICT (team_id, name, tag) DO UPDATE SET version = excluded.version`, t.TeamID, t.Name, tag, t.Version)
		if err != nil {
			return t, fmt.Errorf("tag template %s version %d %s: %w", t.Name, t.Version, tag, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return t, fmt.Errorf("add version of template %s: %w", t.Name, err)
	}
	return s.templateVersion(ctx, t.TeamID, t.Name, t.Version)
}

// templateVersion reads one version as a template.
func (s *Store) templateVersion(ctx context.Context, teamID, name string, version int) (pandastack.Template, error) {
	row := s.w.QueryRowContext(ctx, `SELECT `+versionColumns+` FROM template_versions
		WHERE team_id = ? AND name = ? AND version = ?`, teamID, name, version)
	t, _, err := scanVersion(row)
	if err != nil {
		return t, fmt.Errorf("read template %s version %d: %w", name, version, err)
	}
	return t, nil
}

// GetTemplate returns the newest version of a team's template.
func (s *Store) GetTemplate(ctx context.Context, teamID, name string) (pandastack.Template, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+versionColumns+` FROM template_versions
		WHERE team_id = ? AND name = ? ORDER BY version DESC LIMIT 1`, teamID, name)
	t, _, err := scanVersion(row)
	if errors.Is(err, sql.ErrNoRows) {
		return pandastack.Template{}, notFound("template %s not found", name)
	}
	if err != nil {
		return pandastack.Template{}, fmt.Errorf("get template %s: %w", name, err)
	}
	return t, nil
}

// ListTemplates returns the newest version of each of the team's templates,
// by name. It never returns a nil slice.
func (s *Store) ListTemplates(ctx context.Context, teamID string) ([]pandastack.Template, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+versionColumns+` FROM template_versions AS v
		WHERE team_id = ? AND version = (SELECT max(version) FROM template_versions
			WHERE team_id = v.team_id AND name = v.name)
		ORDER BY name`, teamID)
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	defer rows.Close()
	out := []pandastack.Template{}
	for rows.Next() {
		t, _, err := scanVersion(rows)
		if err != nil {
			return nil, fmt.Errorf("list templates: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	return out, nil
}

// ListTemplateVersions lists a team's template's versions, oldest first,
// with their tags ("latest" on the newest).
func (s *Store) ListTemplateVersions(ctx context.Context, teamID, name string) ([]pandastack.TemplateVersion, error) {
	tags := map[int][]string{}
	trows, err := s.r.QueryContext(ctx, `SELECT tag, version FROM template_tags WHERE team_id = ? AND name = ? ORDER BY tag`, teamID, name)
	if err != nil {
		return nil, fmt.Errorf("list tags of template %s: %w", name, err)
	}
	for trows.Next() {
		var tag string
		var v int
		if err := trows.Scan(&tag, &v); err != nil {
			trows.Close()
			return nil, fmt.Errorf("list tags of template %s: %w", name, err)
		}
		tags[v] = append(tags[v], tag)
	}
	trows.Close()
	if err := trows.Err(); err != nil {
		return nil, fmt.Errorf("list tags of template %s: %w", name, err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+versionColumns+` FROM template_versions
		WHERE team_id = ? AND name = ? ORDER BY version`, teamID, name)
	if err != nil {
		return nil, fmt.Errorf("list versions of template %s: %w", name, err)
	}
	defer rows.Close()
	out := []pandastack.TemplateVersion{}
	for rows.Next() {
		t, buildID, err := scanVersion(rows)
		if err != nil {
			return nil, fmt.Errorf("list versions of template %s: %w", name, err)
		}
		out = append(out, pandastack.TemplateVersion{Name: t.Name, Version: t.Version, ID: t.ID, Tags: tags[t.Version],
			CPUs: t.CPUs, MemoryMiB: t.MemoryMiB, DiskMiB: t.DiskMiB, BuildID: buildID, BuiltAt: t.BuiltAt})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list versions of template %s: %w", name, err)
	}
	for i := range out {
		if i == len(out)-1 {
			out[i].Tags = append([]string{latestTag}, out[i].Tags...)
		}
		if out[i].Tags == nil {
			out[i].Tags = []string{}
		}
	}
	return out, nil
}

// DeleteTemplate removes a team's template's versions and tags.
func (s *Store) DeleteTemplate(ctx context.Context, teamID, name string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM template_versions WHERE team_id = ? AND name = ?`, teamID, name)
	if err != nil {
		return fmt.Errorf("delete template %s: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound("template %s not found", name)
	}
	return nil
}

func scanVersion(row rowScanner) (pandastack.Template, string, error) {
	var t pandastack.Template
	var built, buildID string
	if err := row.Scan(&t.TeamID, &t.Name, &t.Version, &t.ID, &t.CPUs, &t.MemoryMiB, &t.DiskMiB, &t.Accel, &t.Dir,
		&built, &t.BuildMs, &buildID); err != nil {
		return t, "", err
	}
	var err error
	t.BuiltAt, err = decodeTime("template "+t.Name+" built_at", built)
	return t, buildID, err
}

const buildColumns = `id, team_id, name, status, version, template_id, error, steps, started_at, ended_at`

// PutTemplateBuild inserts a build run or replaces the one with its id.
func (s *Store) PutTemplateBuild(ctx context.Context, b pandastack.TemplateBuild) error {
	if err := requireKey("template build", "id", b.ID); err != nil {
		return err
	}
	started, err := encodeTime("started_at", b.StartedAt)
	if err != nil {
		return fmt.Errorf("put build %s: %w", b.ID, err)
	}
	ended, err := encodeOptTime("ended_at", b.EndedAt)
	if err != nil {
		return fmt.Errorf("put build %s: %w", b.ID, err)
	}
	steps := b.Steps
	if steps == nil {
		steps = []pandastack.BuildStep{}
	}
	stepsJSON, err := json.Marshal(steps)
	if err != nil {
		return fmt.Errorf("put build %s: encode steps: %w", b.ID, err)
	}
	errJSON := ""
	if b.Error != nil {
		data, err := json.Marshal(b.Error)
		if err != nil {
			return fmt.Errorf("put build %s: encode error: %w", b.ID, err)
		}
		errJSON = string(data)
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO template_builds (`+buildColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET team_id = excluded.team_id, name = excluded.name, status = excluded.status,
			version = excluded.version, template_id = excluded.template_id, error = excluded.error,
			steps = excluded.steps, started_at = excluded.started_at, ended_at = excluded.ended_at`,
		b.ID, b.TeamID, b.Name, b.Status, b.Version, b.TemplateID, errJSON, string(stepsJSON), started, ended)
	if err != nil {
		return fmt.Errorf("put build %s: %w", b.ID, err)
	}
	return nil
}

// GetTemplateBuild returns a build run by id.
func (s *Store) GetTemplateBuild(ctx context.Context, id string) (pandastack.TemplateBuild, error) {
	b, err := scanBuild(s.r.QueryRowContext(ctx, `SELECT `+buildColumns+` FROM template_builds WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return b, notFound("build %s not found", id)
	}
	if err != nil {
		return b, fmt.Errorf("get build %s: %w", id, err)
	}
	return b, nil
}

// ListTemplateBuilds lists a team's template's build runs, newest first. It
// never returns a nil slice.
func (s *Store) ListTemplateBuilds(ctx context.Context, teamID, name string) ([]pandastack.TemplateBuild, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+buildColumns+` FROM template_builds
		WHERE team_id = ? AND name = ? ORDER BY started_at DESC, id DESC`, teamID, name)
	if err != nil {
		return nil, fmt.Errorf("list builds of template %s: %w", name, err)
	}
	defer rows.Close()
	out := []pandastack.TemplateBuild{}
	for rows.Next() {
		b, err := scanBuild(rows)
		if err != nil {
			return nil, fmt.Errorf("list builds of template %s: %w", name, err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list builds of template %s: %w", name, err)
	}
	return out, nil
}

func scanBuild(row rowScanner) (pandastack.TemplateBuild, error) {
	var b pandastack.TemplateBuild
	var errJSON, steps, started string
	var ended sql.NullString
	if err := row.Scan(&b.ID, &b.TeamID, &b.Name, &b.Status, &b.Version, &b.TemplateID, &errJSON, &steps, &started, &ended); err != nil {
		return b, err
	}
	if err := json.Unmarshal([]byte(steps), &b.Steps); err != nil {
		return b, fmt.Errorf("decode build %s steps: %w", b.ID, err)
	}
	if errJSON != "" {
		b.Error = &pandastack.Error{}
		if err := json.Unmarshal([]byte(errJSON), b.Error); err != nil {
			return b, fmt.Errorf("decode build %s error: %w", b.ID, err)
		}
	}
	var err error
	if b.StartedAt, err = decodeTime("build "+b.ID+" started_at", started); err != nil {
		return b, err
	}
	b.EndedAt, err = decodeOptTime("build "+b.ID+" ended_at", ended)
	return b, err
}

// TemplateDiskMiB is what team teamID's own template versions hold on the
// host's disk (RAM file and root disk, at their full sizes): counted
// against its max_disk_gib like its snapshots and volumes. The public
// catalog (an empty team id) is the server's, no team's.
func (s *Store) TemplateDiskMiB(ctx context.Context, teamID string) (int, error) {
	if teamID == "" {
		return 0, nil
	}
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COALESCE(SUM(memory_mib + disk_mib), 0) FROM template_versions WHERE team_id = ?`,
		teamID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count template disk of team %s: %w", teamID, err)
	}
	return n, nil
}
