package databases

import "fmt"

// A database's WAL lives on its volume beside its data. PostgreSQL's
// default max_wal_size (1 GB) lets WAL grow past a small volume's whole
// size between checkpoints, and WAL that needs a new segment file on a
// full volume stops PostgreSQL (a PANIC and crash recovery), where a
// table that cannot grow only fails its statement (SQLSTATE 53100).
// walSQL bounds the WAL to a sixteenth of the volume and keeps that much
// recycled (min_wal_size = max_wal_size): once the first checkpoints
// ran, new WAL goes into segment files that already hold their space,
// and a volume the tenant fills ends in PostgreSQL's own disk-full error
// with the database up.

// walBudgetMB is max_wal_size and min_wal_size for a volume of sizeMiB:
// a sixteenth of it in whole 16 MB segments, at least two (PostgreSQL's
// floor) and at most 1 GB (its default).
func walBudgetMB(sizeMiB int) int {
	mb := sizeMiB / 16 / 16 * 16
	return min(max(mb, 32), 1024)
}

// walSQL sets the WAL bounds for a volume of sizeMiB (ALTER SYSTEM: on the
// volume, so restarts, forks and restores keep them).
func walSQL(sizeMiB int) []string {
	return append(walBoundsSQL(sizeMiB), "SELECT pg_reload_conf()")
}

// walBoundsSQL is walSQL without the reload: the two settings, for a
// script that reloads itself (a restore's, whose volume may be bigger
// than its source's).
func walBoundsSQL(sizeMiB int) []string {
	mb := walBudgetMB(sizeMiB)
	return []string{
		fmt.Sprintf("ALTER SYSTEM SET max_wal_size = '%dMB'", mb),
		fmt.Sprintf("ALTER SYSTEM SET min_wal_size = '%dMB'", mb),
	}
}
