-- The platform service that owns a machine (a database's, an app's, a
-- function's): the sandbox API lists such a machine but leaves changing it
-- to its service. '' is a team's own sandbox.
ALTER TABLE sandboxes ADD COLUMN managed_by TEXT NOT NULL DEFAULT '';
