-- Where a snapshot is exported in object storage, when, and why the last
-- export failed ('' when it did not).

ALTER TABLE snapshots ADD COLUMN object_key TEXT NOT NULL DEFAULT '';
ALTER TABLE snapshots ADD COLUMN exported_at TEXT;
ALTER TABLE snapshots ADD COLUMN export_error TEXT NOT NULL DEFAULT '';
