-- What a sandbox's TTL running out does: '' ends it (expired), 'hibernate'
-- hibernates it with no deadline until it is woken (E2B's autoPause).
ALTER TABLE sandboxes ADD COLUMN on_expiry TEXT NOT NULL DEFAULT '';
