// Package sqlite implements pandastack.Store on a single SQLite file, using
// the pure-Go driver modernc.org/sqlite (no cgo).
//
// The database runs in WAL mode with synchronous=NORMAL, foreign keys on and
// a 5 s busy timeout. Writes go through one connection (SQLite allows one
// writer at a time anyway, and serialising them in-process avoids busy
// errors); reads use a separate pool of read-only connections, which WAL lets
// run alongside the writer. The schema is embedded and migrated at Open,
// versioned by PRAGMA user_version.
//
// Times are stored as fixed-width RFC 3339 UTC text with nanoseconds and come
// back in UTC; maps are stored as JSON text and round trip exactly (a nil map
// stays nil, an empty one stays empty).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/pandastack/pandastack"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

var _ pandastack.Store = (*Store)(nil)

// Store is a pandastack.Store backed by SQLite. It is safe for concurrent use.
type Store struct {
	w *sql.DB // the single writer connection; also used for reads in memory mode
	r *sql.DB // read-only pool

	closeOnce sync.Once
	closeErr  error
}

// memoryPath opens a private in-memory database (useful in tests). It lives
// on one connection, so reads share the writer.
const memoryPath = ":memory:"

// Open opens (creating if needed) the database at path and migrates it to the
// current schema. The path ":memory:" gives a private in-memory database.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("open sqlite store: empty path")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open sqlite store %s: path must not contain '?' or '#'", path)
	}

	w, err := openDB(ctx, path+"?"+writerParams, 1)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	if path == memoryPath {
		return &Store{w: w, r: w}, nil
	}

	r, err := openDB(ctx, path+"?"+readerParams, max(4, runtime.GOMAXPROCS(0)))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: read pool: %w", path, err)
	}
	return &Store{w: w, r: r}, nil
}

// Connection parameters understood by modernc.org/sqlite. _txlock=immediate
// makes every transaction take the write lock up front, so a transaction
// never fails half-way trying to upgrade a read lock.
const (
	commonParams = "_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)"
	writerParams = commonParams + "&_pragma=journal_mode(WAL)&_txlock=immediate"
	readerParams = commonParams + "&_query_only=1"
)

func openDB(ctx context.Context, dsn string, conns int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Close closes the database. Calling it again returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.r != s.w {
			errs = append(errs, s.r.Close())
		}
		// The writer closes last so that, as the last connection, it
		// checkpoints the WAL into the main file.
		errs = append(errs, s.w.Close())
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("close sqlite store: %w", err)
		}
	})
	return s.closeErr
}
