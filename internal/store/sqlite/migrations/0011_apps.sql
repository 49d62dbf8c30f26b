-- Git-driven apps (internal/apps): an app per team and name, its deploys
-- (each a build with its log) and releases (a deploy's baked snapshot and
-- the service machine serving it). env and webhook_secret are sealed with
-- internal/secrets; the store never sees them in the clear.

CREATE TABLE apps (
    id                     TEXT PRIMARY KEY,
    team_id                TEXT NOT NULL,
    name                   TEXT NOT NULL,
    git_url                TEXT NOT NULL,
    branch                 TEXT NOT NULL,
    env_sealed             TEXT NOT NULL DEFAULT '',
    webhook_secret_sealed  TEXT NOT NULL DEFAULT '',
    build_command          TEXT NOT NULL DEFAULT '',
    start_command          TEXT NOT NULL DEFAULT '',
    port                   INTEGER NOT NULL DEFAULT 0,
    health_path            TEXT NOT NULL DEFAULT '',
    health_timeout_seconds INTEGER NOT NULL DEFAULT 0,
    auto_hibernate_seconds INTEGER NOT NULL DEFAULT 0,
    live_deploy_id         TEXT NOT NULL DEFAULT '',
    created_at             TEXT NOT NULL,
    UNIQUE (team_id, name)
);

CREATE TABLE app_deploys (
    id          TEXT PRIMARY KEY,
    app_id      TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    status      TEXT NOT NULL,
    ref         TEXT NOT NULL DEFAULT '',
    commit_sha  TEXT NOT NULL DEFAULT '',
    framework   TEXT NOT NULL DEFAULT '',
    error       TEXT NOT NULL DEFAULT '',
    delivery_id TEXT NOT NULL DEFAULT '',
    log         TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX app_deploys_by_app ON app_deploys (app_id, created_at);
-- A GitHub delivery builds once per app.
CREATE UNIQUE INDEX app_deploys_delivery ON app_deploys (app_id, delivery_id) WHERE delivery_id != '';

CREATE TABLE app_releases (
    id          TEXT PRIMARY KEY,
    app_id      TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    deploy_id   TEXT NOT NULL,
    snapshot_id TEXT NOT NULL,
    machine_id  TEXT NOT NULL,
    port        INTEGER NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX app_releases_by_app ON app_releases (app_id, created_at);
