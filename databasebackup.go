package pandastack

import "time"

// Base backup states (internal/databases backups).
const (
	// BackupRunning: pg_basebackup is streaming it to the object store.
	BackupRunning = "running"
	// BackupDone: stored whole; a restore may start from it.
	BackupDone = "done"
	// BackupFailed: it stopped half way; nothing of it is kept.
	BackupFailed = "failed"
)

// DatabaseBackup is one base backup of a database, kept in object storage
// under databases/<database>/base/<id>/. It outlives its database until
// retention ends.
type DatabaseBackup struct {
	ID         string
	DatabaseID string
	TeamID     string
	State      string
	StartedAt  time.Time
	FinishedAt time.Time // zero until it ends
	// StartLSN and EndLSN bound the WAL a restore from it must replay
	// first; StartWAL is the name of the WAL segment StartLSN is in.
	StartLSN string
	EndLSN   string
	StartWAL string
	// SizeBytes is the stored (compressed) size.
	SizeBytes int64
	// Verified: restored in a throwaway machine and found consistent.
	Verified bool
	// Error says why a failed backup failed.
	Error string
}

// DatabaseWAL is where a database's continuous WAL archive stands.
type DatabaseWAL struct {
	DatabaseID string
	// LastSegment is the newest complete WAL segment in the object store
	// ("" before the first); ArchivedAt when it got there.
	LastSegment string
	ArchivedAt  time.Time
	// MarkedAt is the latest moment every transaction before it is known
	// to be archived with a later commit after it: the end of the window
	// a restore can reach without the database running.
	MarkedAt time.Time
}
