-- Initial schema. Times are fixed-width RFC 3339 UTC text with nine
-- fractional digits (so text order is time order); maps are JSON text.

CREATE TABLE teams (
	id         TEXT NOT NULL PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	created_at TEXT NOT NULL
) STRICT;

CREATE TABLE api_keys (
	id         TEXT    NOT NULL PRIMARY KEY,
	team_id    TEXT    NOT NULL REFERENCES teams (id),
	name       TEXT    NOT NULL,
	prefix     TEXT    NOT NULL,
	hash       TEXT    NOT NULL UNIQUE,
	admin      INTEGER NOT NULL,
	created_at TEXT    NOT NULL,
	revoked_at TEXT
) STRICT;

CREATE INDEX api_keys_team ON api_keys (team_id);

CREATE TABLE sandboxes (
	id          TEXT    NOT NULL PRIMARY KEY,
	team_id     TEXT    NOT NULL,
	template    TEXT    NOT NULL,
	template_id TEXT    NOT NULL,
	state       TEXT    NOT NULL,
	host        TEXT    NOT NULL,
	accel       TEXT    NOT NULL,
	metadata    TEXT    NOT NULL,
	env         TEXT    NOT NULL,
	cpus        INTEGER NOT NULL,
	memory_mib  INTEGER NOT NULL,
	created_at  TEXT    NOT NULL,
	expires_at  TEXT    NOT NULL,
	ended_at    TEXT,
	end_reason  TEXT    NOT NULL
) STRICT;

CREATE INDEX sandboxes_order ON sandboxes (created_at, id);
CREATE INDEX sandboxes_team ON sandboxes (team_id, created_at, id);
CREATE INDEX sandboxes_live ON sandboxes (team_id) WHERE state IN ('starting', 'running');

CREATE TABLE templates (
	name       TEXT    NOT NULL PRIMARY KEY,
	id         TEXT    NOT NULL,
	cpus       INTEGER NOT NULL,
	memory_mib INTEGER NOT NULL,
	disk_mib   INTEGER NOT NULL,
	accel      TEXT    NOT NULL,
	dir        TEXT    NOT NULL,
	built_at   TEXT    NOT NULL,
	build_ms   INTEGER NOT NULL
) STRICT;
