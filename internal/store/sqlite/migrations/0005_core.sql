-- A machine's lifetime class: 'sandbox' (ends with its TTL) or 'service'
-- (no TTL; its expires_at is the zero time). '' is a sandbox recorded
-- before the column existed.

ALTER TABLE sandboxes ADD COLUMN lifetime TEXT NOT NULL DEFAULT '';

CREATE INDEX sandboxes_team_lifetime ON sandboxes (team_id, lifetime);
