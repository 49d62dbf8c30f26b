package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pandastack/pandastack"
)

const templateColumns = `name, id, cpus, memory_mib, disk_mib, accel, dir, built_at, build_ms`

// PutTemplate inserts the template or replaces every field of the one with
// the same name.
func (s *Store) PutTemplate(ctx context.Context, t pandastack.Template) error {
	if err := requireKey("template", "name", t.Name); err != nil {
		return err
	}
	built, err := encodeTime("built_at", t.BuiltAt)
	if err != nil {
		return fmt.Errorf("put template %s: %w", t.Name, err)
	}
	_, err = s.w.ExecContext(ctx,
		`INSERT INTO templates (`+templateColumns+`)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		 ON CONFLICT (name) DO UPDATE SET
			id = excluded.id, cpus = excluded.cpus, memory_mib = excluded.memory_mib,
			disk_mib = excluded.disk_mib, accel = excluded.accel, dir = excluded.dir,
			built_at = excluded.built_at, build_ms = excluded.build_ms`,
		t.Name, t.ID, t.CPUs, t.MemoryMiB, t.DiskMiB, string(t.Accel), t.Dir, built, t.BuildMs)
	if err != nil {
		return fmt.Errorf("put template %s: %w", t.Name, err)
	}
	return nil
}

// GetTemplate returns the template with the given name.
func (s *Store) GetTemplate(ctx context.Context, name string) (pandastack.Template, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+templateColumns+` FROM templates WHERE name = ?`, name)
	t, err := scanTemplate(row)
	if errors.Is(err, sql.ErrNoRows) {
		return pandastack.Template{}, notFound("template %s not found", name)
	}
	if err != nil {
		return pandastack.Template{}, fmt.Errorf("get template %s: %w", name, err)
	}
	return t, nil
}

// ListTemplates returns every template ordered by name. It never returns a
// nil slice.
func (s *Store) ListTemplates(ctx context.Context) ([]pandastack.Template, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+templateColumns+` FROM templates ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	defer rows.Close()
	out := []pandastack.Template{}
	for rows.Next() {
		t, err := scanTemplate(rows)
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

func scanTemplate(row rowScanner) (pandastack.Template, error) {
	var t pandastack.Template
	var built string
	if err := row.Scan(&t.Name, &t.ID, &t.CPUs, &t.MemoryMiB, &t.DiskMiB, &t.Accel, &t.Dir, &built, &t.BuildMs); err != nil {
		return t, err
	}
	var err error
	t.BuiltAt, err = decodeTime("template "+t.Name+" built_at", built)
	return t, err
}
