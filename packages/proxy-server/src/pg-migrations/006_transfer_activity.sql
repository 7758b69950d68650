-- A transfer's last activity (a block received, a commit attempted). GC removes a transfer
-- idle for the grace period, not one opened longer ago than it: a slow upload of a large file
-- may take longer than the grace period (issue #18; SQLite: migrations/009).
ALTER TABLE transfers ADD COLUMN active_ms BIGINT NOT NULL DEFAULT 0;
UPDATE transfers SET active_ms = created_ms;
