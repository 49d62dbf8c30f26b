-- The template registry moves from host files into the store, per team.
-- team_id '' is the public catalog. A template's versions are numbered from
-- 1 within (team_id, name); tag 'latest' is not stored (the newest version
-- carries it). Build runs are records here; their logs stay files.
-- The old one-row-per-name table becomes each template's version 1 (a data
-- dir's versions.json, if any, replaces that at the server's first start).

CREATE TABLE template_versions (
	team_id    TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	version    INTEGER NOT NULL,
	id         TEXT    NOT NULL,
	cpus       INTEGER NOT NULL,
	memory_mib INTEGER NOT NULL,
	disk_mib   INTEGER NOT NULL,
	accel      TEXT    NOT NULL,
	dir        TEXT    NOT NULL,
	built_at   TEXT    NOT NULL,
	build_ms   INTEGER NOT NULL,
	build_id   TEXT    NOT NULL,
	PRIMARY KEY (team_id, name, version)
) STRICT;

CREATE TABLE template_tags (
	team_id TEXT    NOT NULL,
	name    TEXT    NOT NULL,
	tag     TEXT    NOT NULL,
	version INTEGER NOT NULL,
	PRIMARY KEY (team_id, name, tag),
	FOREIGN KEY (team_id, name, version) REFERENCES template_versions (team_id, name, version) ON DELETE CASCADE
) STRICT;

CREATE TABLE template_builds (
	id          TEXT    NOT NULL PRIMARY KEY,
	team_id     TEXT    NOT NULL,
	name        TEXT    NOT NULL,
	status      TEXT    NOT NULL,
	version     INTEGER NOT NULL,
	template_id TEXT    NOT NULL,
	error       TEXT    NOT NULL, -- JSON {"code","message"}, or '' when none
	steps       TEXT    NOT NULL, -- JSON array
	started_at  TEXT    NOT NULL,
	ended_at    TEXT
) STRICT;

CREATE INDEX template_builds_by_name ON template_builds (team_id, name, started_at);

INSERT INTO template_versions (team_id, name, version, id, cpus, memory_mib, disk_mib, accel, dir, built_at, build_ms, build_id)
	SELECT '', name, 1, id, cpus, memory_mib, disk_mib, accel, dir, built_at, build_ms, '' FROM templates;

DROP TABLE templates;

-- What a sandbox keeps of its template: the version it resolved to, its disk
-- size, and the command defaults (JSON; '' on records made before).
ALTER TABLE sandboxes ADD COLUMN template_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN disk_mib INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN defaults TEXT NOT NULL DEFAULT '';
