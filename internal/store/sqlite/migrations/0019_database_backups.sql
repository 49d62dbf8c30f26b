-- Base backups of managed databases (internal/databases): one row each,
-- kept after the database is deleted until retention removes them; and
-- where each database's continuous WAL archive stands. Times are RFC 3339
-- UTC text; '' is none yet.

CREATE TABLE database_backups (
	id           TEXT NOT NULL PRIMARY KEY,
	database_id  TEXT NOT NULL,
	team_id      TEXT NOT NULL,
	state        TEXT NOT NULL,
	started_at   TEXT NOT NULL,
	finished_at  TEXT NOT NULL DEFAULT '',
	start_lsn    TEXT NOT NULL DEFAULT '',
	end_lsn      TEXT NOT NULL DEFAULT '',
	start_wal    TEXT NOT NULL DEFAULT '',
	size_bytes   INTEGER NOT NULL DEFAULT 0,
	verified     INTEGER NOT NULL DEFAULT 0,
	error        TEXT NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX database_backups_by_database ON database_backups (database_id, started_at);

CREATE TABLE database_wal (
	database_id   TEXT NOT NULL PRIMARY KEY,
	last_segment  TEXT NOT NULL DEFAULT '',
	archived_at   TEXT NOT NULL DEFAULT '',
	marked_at     TEXT NOT NULL DEFAULT ''
) STRICT;
