-- Serverless functions (internal/functions) and their cron schedules
-- (internal/cron). A function is a team's name; each deploy is a version
-- whose snapshot (the runtime with the handler imported) every invocation
-- restores. env_sealed is the function's environment sealed with
-- internal/secrets (bound to "fn:FUNCTION_ID:vVERSION:env"), never plain.

CREATE TABLE functions (
    id             TEXT PRIMARY KEY,
    team_id        TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    latest_version INTEGER NOT NULL DEFAULT 0,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    UNIQUE (team_id, name)
);

CREATE TABLE function_versions (
    function_id     TEXT NOT NULL REFERENCES functions(id) ON DELETE CASCADE,
    version         INTEGER NOT NULL,
    runtime         TEXT NOT NULL,
    handler         TEXT NOT NULL,
    env_sealed      TEXT NOT NULL DEFAULT '',
    timeout_ms      INTEGER NOT NULL,
    memory_mib      INTEGER NOT NULL,
    max_concurrency INTEGER NOT NULL,
    http_public     INTEGER NOT NULL DEFAULT 0,
    isolation       TEXT NOT NULL DEFAULT 'fresh',
    snapshot_id     TEXT NOT NULL,
    bundle_sha256   TEXT NOT NULL,
    bundle_bytes    INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (function_id, version)
);

CREATE TABLE function_invocations (
    id           TEXT PRIMARY KEY,
    function_id  TEXT NOT NULL REFERENCES functions(id) ON DELETE CASCADE,
    team_id      TEXT NOT NULL,
    version      INTEGER NOT NULL,
    trigger      TEXT NOT NULL,
    execution_id TEXT NOT NULL DEFAULT '',
    status       TEXT NOT NULL,
    result       TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT '',
    logs         TEXT NOT NULL DEFAULT '',
    created_at   TEXT NOT NULL,
    ended_at     TEXT,
    duration_ms  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX function_invocations_by_function ON function_invocations (function_id, created_at);

CREATE TABLE cron_schedules (
    id           TEXT PRIMARY KEY,
    team_id      TEXT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    function     TEXT NOT NULL,
    expr         TEXT NOT NULL,
    tz           TEXT NOT NULL,
    data         TEXT NOT NULL,
    overlap      TEXT NOT NULL,
    missed       TEXT NOT NULL,
    next_fire_at TEXT,
    created_at   TEXT NOT NULL
);

-- One row per occurrence, written (claimed) before it fires: id is the
-- stable execution id handed to the handler; (schedule_id, fire_at) is
-- unique, so an occurrence is claimed once.
CREATE TABLE cron_runs (
    id            TEXT PRIMARY KEY,
    schedule_id   TEXT NOT NULL REFERENCES cron_schedules(id) ON DELETE CASCADE,
    fire_at       TEXT NOT NULL,
    status        TEXT NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    invocation_id TEXT NOT NULL DEFAULT '',
    message       TEXT NOT NULL DEFAULT '',
    started_at    TEXT,
    ended_at      TEXT,
    duration_ms   INTEGER NOT NULL DEFAULT 0,
    UNIQUE (schedule_id, fire_at)
);
CREATE INDEX cron_runs_by_status ON cron_runs (status);
