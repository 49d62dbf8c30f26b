-- Pull-request previews (internal/apps): a preview per app and pull
-- request number, served at pr-N--NAME.apps.DOMAIN. Its deploys and its
-- release are the app's rows marked with the number (0: the app's own),
-- so the app's rollback and pruning never see them, and deleting the app
-- or closing the pull request takes them all.

CREATE TABLE app_previews (
    app_id         TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    number         INTEGER NOT NULL,
    head_ref       TEXT NOT NULL DEFAULT '',
    head_sha       TEXT NOT NULL DEFAULT '',
    deploy_id      TEXT NOT NULL DEFAULT '',
    live_deploy_id TEXT NOT NULL DEFAULT '',
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    PRIMARY KEY (app_id, number)
);

ALTER TABLE app_deploys ADD COLUMN preview INTEGER NOT NULL DEFAULT 0;
ALTER TABLE app_releases ADD COLUMN preview INTEGER NOT NULL DEFAULT 0;

-- GitHub deliveries of pull_request events an app received: a replay of
-- one, even after its preview was closed and forgotten, does nothing.
CREATE TABLE app_hook_deliveries (
    app_id      TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    delivery_id TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (app_id, delivery_id)
);
