-- Snapshots of sandboxes; a name is unique within its team.

CREATE TABLE snapshots (
	id          TEXT    NOT NULL PRIMARY KEY,
	team_id     TEXT    NOT NULL,
	name        TEXT    NOT NULL,
	sandbox_id  TEXT    NOT NULL,
	template    TEXT    NOT NULL,
	template_id TEXT    NOT NULL,
	host        TEXT    NOT NULL,
	size_bytes  INTEGER NOT NULL,
	created_at  TEXT    NOT NULL,
	UNIQUE (team_id, name)
) STRICT;
