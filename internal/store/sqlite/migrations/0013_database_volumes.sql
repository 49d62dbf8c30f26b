-- A managed database's PGDATA lives on a durable volume of its own
-- (internal/databases): volume_id is that volume ('' until it exists).
-- A machine that dies is restarted on it.

ALTER TABLE databases ADD COLUMN volume_id TEXT NOT NULL DEFAULT '';
