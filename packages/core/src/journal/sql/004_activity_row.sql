-- Version 4: the activity table is written (it survives a restart, the status shows its last
-- 200 items) and each item names the decision-table row that produced it, if one did
-- (docs/sync-decisions.md).
ALTER TABLE activity ADD COLUMN row_id TEXT;
