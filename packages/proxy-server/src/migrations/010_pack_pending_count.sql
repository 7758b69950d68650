-- Version 10: the number of small files waiting for a pack (the metrics' weft_pack_pending_files,
-- store/pack-index-sqlite.ts pendingCount), kept by triggers in the same statement as every
-- change of a small entry or of the global index, so a scrape reads one row instead of
-- counting every small file (issue #16). Pending: an entry with tier 'small' and a content
-- hash that has no pack_entries row. Counted once here from the tables as they are.
CREATE TABLE pack_pending (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  n INTEGER NOT NULL
) STRICT;

INSERT INTO pack_pending (id, n)
SELECT 1, COUNT(*) FROM entries e
 WHERE tier = 'small' AND sha256 IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = e.sha256);

-- Entries are written with INSERT or INSERT OR REPLACE (store/sqlite.ts). REPLACE deletes the
-- old row without firing DELETE triggers (recursive_triggers is off), so the INSERT trigger
-- runs BEFORE the row goes in and takes the old row's part off itself. A failed INSERT (a
-- constraint) rolls the statement back, this trigger's change with it. An upsert
-- (ON CONFLICT DO …) or INSERT OR IGNORE on entries would count wrongly: not used.
CREATE TRIGGER entries_pack_pending_insert BEFORE INSERT ON entries
BEGIN
  UPDATE pack_pending SET n = n
    - (SELECT COUNT(*) FROM entries o
        WHERE o.user_id = NEW.user_id AND o.path = NEW.path
          AND o.tier = 'small' AND o.sha256 IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = o.sha256))
    + (NEW.tier IS 'small' AND NEW.sha256 IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = NEW.sha256))
  WHERE id = 1;
END;

CREATE TRIGGER entries_pack_pending_delete AFTER DELETE ON entries
  WHEN OLD.tier = 'small' AND OLD.sha256 IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = OLD.sha256)
BEGIN
  UPDATE pack_pending SET n = n - 1 WHERE id = 1;
END;

CREATE TRIGGER entries_pack_pending_update AFTER UPDATE OF tier, sha256 ON entries
BEGIN
  UPDATE pack_pending SET n = n
    - (OLD.tier IS 'small' AND OLD.sha256 IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = OLD.sha256))
    + (NEW.tier IS 'small' AND NEW.sha256 IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = NEW.sha256))
  WHERE id = 1;
END;

-- The global index is written with INSERT … ON CONFLICT (sha256) DO NOTHING / DO UPDATE: an
-- AFTER INSERT trigger fires only for a row really inserted. A content packed takes all its
-- small files off the count; a pack entry removed (GC, the rebuild from footers) puts back
-- those still there.
CREATE TRIGGER pack_entries_pack_pending_insert AFTER INSERT ON pack_entries
BEGIN
  UPDATE pack_pending SET n = n
    - (SELECT COUNT(*) FROM entries INDEXED BY entries_small_sha256
        WHERE tier = 'small' AND sha256 = NEW.sha256)
  WHERE id = 1;
END;

CREATE TRIGGER pack_entries_pack_pending_delete AFTER DELETE ON pack_entries
BEGIN
  UPDATE pack_pending SET n = n
    + (SELECT COUNT(*) FROM entries INDEXED BY entries_small_sha256
        WHERE tier = 'small' AND sha256 = OLD.sha256)
  WHERE id = 1;
END;

CREATE TRIGGER pack_entries_pack_pending_update AFTER UPDATE OF sha256 ON pack_entries
BEGIN
  UPDATE pack_pending SET n = n
    + (SELECT COUNT(*) FROM entries INDEXED BY entries_small_sha256
        WHERE tier = 'small' AND sha256 = OLD.sha256)
    - (SELECT COUNT(*) FROM entries INDEXED BY entries_small_sha256
        WHERE tier = 'small' AND sha256 = NEW.sha256)
  WHERE id = 1;
END;
