-- Per-team disk quota (GiB of root disks, hibernated memory, volumes and
-- snapshots the team holds on the host). NULL follows the server's
-- default; 0 is no limit.

ALTER TABLE team_quotas ADD COLUMN max_disk_gib INTEGER;

-- The bootstrap admin team (named admin) has every limit lifted (0): so
-- it keeps no disk limit either, rather than getting the new default.
UPDATE team_quotas SET max_disk_gib = 0
 WHERE max_sandboxes = 0 AND max_memory_mib = 0
   AND team_id IN (SELECT id FROM teams WHERE name = 'admin');
