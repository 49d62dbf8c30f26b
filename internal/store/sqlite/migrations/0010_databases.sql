-- Managed PostgreSQL databases (internal/databases): one service machine
-- each. A name is unique within its team. password is sealed by
-- internal/secrets (never plain text); machine_id is '' until the machine
-- exists.

CREATE TABLE databases (
	id          TEXT NOT NULL PRIMARY KEY,
	team_id     TEXT NOT NULL,
	name        TEXT NOT NULL,
	state       TEXT NOT NULL,
	machine_id  TEXT NOT NULL DEFAULT '',
	db_user     TEXT NOT NULL,
	password    TEXT NOT NULL,
	db_name     TEXT NOT NULL,
	created_at  TEXT NOT NULL,
	UNIQUE (team_id, name)
) STRICT;
