package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// migrationFS holds the schema migrations, named NNNN_description.sql and
// numbered from 0001 upwards. Migration N moves the schema to user_version
// N; a gap in the numbers is a number another branch holds (each product
// is given its own) and is skipped. Never edit a released migration; add
// a new one.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations returns the embedded migrations in version order.
func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	// fs.Glob returns names sorted, and the zero-padded prefix sorts numerically.
	var ms []migration
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || len(num) != 4 || v < 1 || (len(ms) > 0 && v <= ms[len(ms)-1].version) {
			return nil, fmt.Errorf("migration %s: want name NNNN_description.sql, numbered above the one before", base)
		}
		body, err := migrationFS.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", base, err)
		}
		ms = append(ms, migration{version: v, name: base, sql: string(body)})
	}
	return ms, nil
}

// migrate brings the schema up to date in one transaction: either every
// pending migration applies, or none does.
func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", err)
	}
	defer tx.Rollback()

	var current int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return fmt.Errorf("migrate: read schema version: %w", err)
	}
	latest := ms[len(ms)-1].version
	if current > latest {
		return fmt.Errorf("migrate: database schema version %d is newer than this build knows (%d)", current, latest)
	}
	if current == latest {
		return nil
	}
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.name, err)
		}
	}
	// PRAGMA does not take parameters; latest is an int we computed.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", latest)); err != nil {
		return fmt.Errorf("migrate: set schema version %d: %w", latest, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}
