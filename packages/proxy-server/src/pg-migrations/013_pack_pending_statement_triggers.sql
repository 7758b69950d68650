-- Version 13: the pack pending counter's triggers (version 11) once per statement instead of
-- once per row, and each change appended as a row of pack_pending_delta instead of an update
-- of a pack_pending row. Each row's trigger updated the same pack_pending row again, and every
-- update of one row in a transaction adds a version the next one steps over: a 1,000-row
-- insert cost ~170-240 µs a row against ~7-9 without the triggers, 8,000 rows ~350-470 µs a
-- row, 100,000 rows more than 5 minutes (load 10); a bundle's one-row statements in one
-- transaction paid the same. Now a statement adds its rows' part once, from its transition
-- tables (the same sums: a row counts 1 when it is a small file whose content is in no pack),
-- as one inserted row: no row updated, no lock shared with other writers. The count is the sum
-- of pack_pending and pack_pending_delta; pendingCount and the reconcile fold the deltas into
-- slot 0 (store/pack-index-postgres.ts, store/pack-pending-reconcile.ts). An UPDATE looks only
-- at rows whose (tier, content) or, for the global index, content changed: the others cancel.
CREATE TABLE pack_pending_delta (n BIGINT NOT NULL);

CREATE OR REPLACE FUNCTION pack_pending_add(d BIGINT) RETURNS void LANGUAGE sql AS $$
  INSERT INTO pack_pending_delta (n) SELECT d WHERE d <> 0
$$;

DROP TRIGGER entries_pack_pending ON entries;
DROP TRIGGER pack_entries_pack_pending ON pack_entries;
DROP FUNCTION entries_pack_pending();
DROP FUNCTION pack_entries_pack_pending();

-- Pending files among some entries (user_id, path, tier, sha256).
CREATE FUNCTION entries_pack_pending_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  d BIGINT := 0;
BEGIN
  IF TG_OP = 'INSERT' THEN
    d := (SELECT COUNT(*) FROM new_rows n WHERE n.tier = 'small' AND n.sha256 IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = n.sha256));
  ELSIF TG_OP = 'DELETE' THEN
    d := -(SELECT COUNT(*) FROM old_rows o WHERE o.tier = 'small' AND o.sha256 IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = o.sha256));
  ELSE
    d := (SELECT COUNT(*) FROM (SELECT user_id, path, tier, sha256 FROM new_rows
                                EXCEPT ALL SELECT user_id, path, tier, sha256 FROM old_rows) n
           WHERE n.tier = 'small' AND n.sha256 IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = n.sha256))
       - (SELECT COUNT(*) FROM (SELECT user_id, path, tier, sha256 FROM old_rows
                                EXCEPT ALL SELECT user_id, path, tier, sha256 FROM new_rows) o
           WHERE o.tier = 'small' AND o.sha256 IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = o.sha256));
  END IF;
  PERFORM pack_pending_add(d);
  RETURN NULL;
END $$;

CREATE TRIGGER entries_pack_pending_insert AFTER INSERT ON entries
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION entries_pack_pending_stmt();
CREATE TRIGGER entries_pack_pending_update AFTER UPDATE ON entries
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION entries_pack_pending_stmt();
CREATE TRIGGER entries_pack_pending_delete AFTER DELETE ON entries
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION entries_pack_pending_stmt();

-- The global index: a content indexed takes its small files off the count; a content's row
-- removed puts back those still there. sha256 is the key: an UPDATE that keeps it counts 0.
CREATE FUNCTION pack_entries_pack_pending_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  d BIGINT := 0;
BEGIN
  IF TG_OP = 'INSERT' THEN
    d := -(SELECT COUNT(*) FROM new_rows n JOIN entries e ON e.sha256 = n.sha256 AND e.tier = 'small');
  ELSIF TG_OP = 'DELETE' THEN
    d := (SELECT COUNT(*) FROM old_rows o JOIN entries e ON e.sha256 = o.sha256 AND e.tier = 'small');
  ELSE
    d := (SELECT COUNT(*) FROM (SELECT sha256 FROM old_rows EXCEPT SELECT sha256 FROM new_rows) o
           JOIN entries e ON e.sha256 = o.sha256 AND e.tier = 'small')
       - (SELECT COUNT(*) FROM (SELECT sha256 FROM new_rows EXCEPT SELECT sha256 FROM old_rows) n
           JOIN entries e ON e.sha256 = n.sha256 AND e.tier = 'small');
  END IF;
  PERFORM pack_pending_add(d);
  RETURN NULL;
END $$;

CREATE TRIGGER pack_entries_pack_pending_insert AFTER INSERT ON pack_entries
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pack_entries_pack_pending_stmt();
CREATE TRIGGER pack_entries_pack_pending_update AFTER UPDATE ON pack_entries
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION pack_entries_pack_pending_stmt();
CREATE TRIGGER pack_entries_pack_pending_delete AFTER DELETE ON pack_entries
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION pack_entries_pack_pending_stmt();
