-- Per-team quota overrides. A NULL column follows the server's default; 0
-- is no limit. One row per team that has any override.

CREATE TABLE team_quotas (
	team_id               TEXT    NOT NULL PRIMARY KEY REFERENCES teams (id),
	max_sandboxes         INTEGER,
	max_service_machines  INTEGER,
	max_snapshots         INTEGER,
	max_volumes           INTEGER,
	max_concurrent_builds INTEGER,
	max_vcpus             INTEGER,
	max_memory_mib        INTEGER,
	requests_per_second   REAL,
	burst                 INTEGER,
	updated_at            TEXT    NOT NULL
) STRICT;
