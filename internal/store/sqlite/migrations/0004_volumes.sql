-- Durable volumes; a name is unique within its team. sandbox_id is the live
-- sandbox the volume is attached to, '' when free: attaching is a
-- conditional update on it, so one volume never has two sandboxes.

CREATE TABLE volumes (
	id          TEXT    NOT NULL PRIMARY KEY,
	team_id     TEXT    NOT NULL,
	name        TEXT    NOT NULL,
	size_mib    INTEGER NOT NULL,
	host        TEXT    NOT NULL,
	created_at  TEXT    NOT NULL,
	sandbox_id  TEXT    NOT NULL DEFAULT '',
	mount_path  TEXT    NOT NULL DEFAULT '',
	slot        INTEGER NOT NULL DEFAULT 0,
	UNIQUE (team_id, name)
) STRICT;

CREATE INDEX volumes_sandbox ON volumes (sandbox_id) WHERE sandbox_id != '';
