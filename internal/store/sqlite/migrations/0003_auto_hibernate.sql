-- Seconds without activity after which a sandbox is hibernated; 0 is off.

ALTER TABLE sandboxes ADD COLUMN auto_hibernate_seconds INTEGER NOT NULL DEFAULT 0;
