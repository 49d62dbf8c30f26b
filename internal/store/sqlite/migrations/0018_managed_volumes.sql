-- The platform service whose volume it is (a database's data); '' is a
-- team's own volume.
ALTER TABLE volumes ADD COLUMN managed_by TEXT NOT NULL DEFAULT '';
