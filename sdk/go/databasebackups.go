package pandastack

import (
	"context"
	"net/url"
	"time"
)

// DatabaseBackup is one base backup of a database.
type DatabaseBackup struct {
	ID         string     `json:"id"`
	DatabaseID string     `json:"database_id"`
	State      string     `json:"state"` // running, done or failed
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	StartLSN   string     `json:"start_lsn,omitempty"`
	EndLSN     string     `json:"end_lsn,omitempty"`
	SizeBytes  int64      `json:"size_bytes"`
	Verified   bool       `json:"verified"`
	Error      string     `json:"error,omitempty"`
}

// DatabaseBackups is a database's base backups, oldest first, and where
// its continuous WAL archive stands.
type DatabaseBackups struct {
	Backups []DatabaseBackup `json:"backups"`
	WAL     struct {
		LastSegment string `json:"last_segment,omitempty"`
		// ArchivedThroughLSN: every change before it is in object
		// storage (compare pg_current_wal_lsn()).
		ArchivedThroughLSN string     `json:"archived_through_lsn,omitempty"`
		ArchivedAt         *time.Time `json:"archived_at,omitempty"`
	} `json:"wal"`
	// EarliestRestoreTime is the first moment RestoreDatabase reaches.
	EarliestRestoreTime *time.Time `json:"earliest_restore_time,omitempty"`
	// RestoreGaps are stretches after it no restore reaches: gaps in the
	// WAL archive (it stopped while the database's volume was full).
	RestoreGaps []RestoreGap `json:"restore_gaps,omitempty"`
}

// RestoreGap is a stretch of time no restore reaches: nothing written
// after From was archived until the base backup that ended at Until (nil
// while none has).
type RestoreGap struct {
	From  time.Time  `json:"from"`
	Until *time.Time `json:"until,omitempty"`
}

// ListDatabaseBackups lists a database's base backups and WAL archive.
func (c *Client) ListDatabaseBackups(ctx context.Context, idOrName string) (*DatabaseBackups, error) {
	out := &DatabaseBackups{}
	if err := c.do(ctx, request{method: "GET", path: "/v1/databases/" + url.PathEscape(idOrName) + "/backups"}, out); err != nil {
		return nil, err
	}
	return out, nil
}

// BackupDatabase takes a base backup of a running database now.
func (c *Client) BackupDatabase(ctx context.Context, idOrName string) (*DatabaseBackup, error) {
	out := &DatabaseBackup{}
	if err := c.do(ctx, request{method: "POST", path: "/v1/databases/" + url.PathEscape(idOrName) + "/backups"}, out); err != nil {
		return nil, err
	}
	return out, nil
}

// RestoreDatabase makes database name from idOrName's backups as it was
// at target; it answers like CreateDatabase.
func (c *Client) RestoreDatabase(ctx context.Context, idOrName, name string, target time.Time) (*Database, error) {
	return c.RestoreDatabaseWith(ctx, idOrName, RestoreDatabaseParams{Name: name, TargetTime: target})
}

// RestoreDatabaseParams asks for a database restored to a moment of
// another.
type RestoreDatabaseParams struct {
	// Name is the new database's, unique in the team.
	Name string `json:"name"`
	// TargetTime is the moment: the new database holds what the source
	// had committed by then.
	TargetTime time.Time `json:"target_time"`
	// SizeMiB is the new database's volume: 0 for the source's, else at
	// least that (a database whose volume filled is restored into a
	// bigger one).
	SizeMiB int `json:"size_mib,omitempty"`
}

// RestoreDatabaseWith is RestoreDatabase with every parameter.
func (c *Client) RestoreDatabaseWith(ctx context.Context, idOrName string, p RestoreDatabaseParams) (*Database, error) {
	d := &Database{}
	p.TargetTime = p.TargetTime.UTC()
	if err := c.do(ctx, request{method: "POST", path: "/v1/databases/" + url.PathEscape(idOrName) + "/restore", body: p}, d); err != nil {
		return nil, err
	}
	return d, nil
}
