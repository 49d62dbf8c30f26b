package sqlite

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pandastack/pandastack"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// timeLayout is RFC 3339 in UTC with exactly nine fractional digits. Being
// fixed-width, its text order is time order, so ORDER BY created_at works.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// encodeTime renders t in UTC. Years outside 1..9999 (which the layout cannot
// represent) are rejected; the zero time (year 1) is fine.
func encodeTime(field string, t time.Time) (string, error) {
	t = t.UTC()
	if y := t.Year(); y < 1 || y > 9999 {
		return "", pandastack.Errorf(pandastack.EInvalid, "%s %v is out of range", field, t)
	}
	return t.Format(timeLayout), nil
}

func decodeTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("decode %s: %w", field, err)
	}
	return t.UTC(), nil
}

func encodeOptTime(field string, t *time.Time) (sql.NullString, error) {
	if t == nil {
		return sql.NullString{}, nil
	}
	s, err := encodeTime(field, *t)
	return sql.NullString{String: s, Valid: err == nil}, err
}

func decodeOptTime(field string, s sql.NullString) (*time.Time, error) {
	if !s.Valid {
		return nil, nil
	}
	t, err := decodeTime(field, s.String)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// encodeMap stores m as JSON; a nil map becomes "null" so it comes back nil.
func encodeMap(field string, m map[string]string) (string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", field, err)
	}
	return string(b), nil
}

func decodeMap(field, s string) (map[string]string, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("decode %s: %w", field, err)
	}
	return m, nil
}

// sqliteCode returns the extended result code of a driver error, or 0.
func sqliteCode(err error) int {
	var se *msqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

func isUniqueViolation(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

func isForeignKeyViolation(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

func notFound(format string, args ...any) error {
	return pandastack.Errorf(pandastack.ENotFound, format, args...)
}

func conflict(err error, format string, args ...any) error {
	return &pandastack.Error{Code: pandastack.EConflict, Message: fmt.Sprintf(format, args...), Err: err}
}

func requireKey(kind, field, v string) error {
	if v == "" {
		return pandastack.Errorf(pandastack.EInvalid, "%s %s is empty", kind, field)
	}
	return nil
}

// rowScanner is *sql.Row or *sql.Rows.
type rowScanner interface {
	Scan(dest ...any) error
}

// encodeDefaults stores a sandbox's command defaults as JSON; nil (not
// captured) is ”.
func encodeDefaults(d *pandastack.CommandDefaults) (string, error) {
	if d == nil {
		return "", nil
	}
	b, err := json.Marshal(d)
	if err != nil {
		return "", fmt.Errorf("encode defaults: %w", err)
	}
	return string(b), nil
}

func decodeDefaults(field, s string) (*pandastack.CommandDefaults, error) {
	if s == "" {
		return nil, nil
	}
	var d pandastack.CommandDefaults
	if err := json.Unmarshal([]byte(s), &d); err != nil {
		return nil, fmt.Errorf("decode %s: %w", field, err)
	}
	return &d, nil
}
