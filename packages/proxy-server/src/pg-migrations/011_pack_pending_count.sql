-- Version 11: the number of small files waiting for a pack (the metrics' weft_pack_pending_files,
-- store/pack-index-postgres.ts pendingCount), kept by triggers in the same transaction as
-- every change of a small entry or of the global index, so a scrape sums 16 rows instead of
-- counting every small file (issue #16; as SQLite migration 010). Pending: an entry with tier
-- 'small' and a content hash that has no pack_entries row. The count is spread over 16 rows,
-- each connection adding to the one of its backend's pid, so concurrent writers do not queue
-- on one row lock. Counted once here from the tables as they are.
CREATE TABLE pack_pending (
  slot SMALLINT PRIMARY KEY CHECK (slot >= 0 AND slot < 16),
  n BIGINT NOT NULL
);

INSERT INTO pack_pending (slot, n) SELECT s, 0 FROM generate_series(0, 15) AS s;
UPDATE pack_pending SET n = (
  SELECT COUNT(*) FROM entries e
   WHERE tier = 'small' AND sha256 IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = e.sha256))
 WHERE slot = 0;

-- Whether an entry (tier, content hash) is pending now: 1 or 0.
CREATE FUNCTION pack_pending_of(t TEXT, h TEXT) RETURNS BIGINT LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN t = 'small' AND h IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = h) THEN 1 ELSE 0 END::bigint
$$;

CREATE FUNCTION pack_pending_add(d BIGINT) RETURNS void LANGUAGE sql AS $$
  UPDATE pack_pending SET n = n + d WHERE slot = pg_backend_pid() % 16 AND d <> 0
$$;

-- Entries: an upsert (INSERT … ON CONFLICT DO UPDATE, store/postgres.ts) fires the UPDATE
-- triggers on its conflict path and the INSERT ones otherwise, so each case is counted once.
CREATE FUNCTION entries_pack_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM pack_pending_add(pack_pending_of(NEW.tier, NEW.sha256));
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM pack_pending_add(-pack_pending_of(OLD.tier, OLD.sha256));
  ELSIF OLD.tier IS DISTINCT FROM NEW.tier OR OLD.sha256 IS DISTINCT FROM NEW.sha256 THEN
    PERFORM pack_pending_add(pack_pending_of(NEW.tier, NEW.sha256) - pack_pending_of(OLD.tier, OLD.sha256));
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER entries_pack_pending AFTER INSERT OR UPDATE OR DELETE ON entries
  FOR EACH ROW EXECUTE FUNCTION entries_pack_pending();

-- The global index: a content packed takes all its small files off the count; a pack entry
-- removed (GC, the rebuild from footers) puts back those still there. ON CONFLICT DO NOTHING
-- fires no trigger; DO UPDATE does not change the hash.
CREATE FUNCTION pack_entries_pack_pending() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  d BIGINT := 0;
BEGIN
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    d := d - (SELECT COUNT(*) FROM entries WHERE tier = 'small' AND sha256 = NEW.sha256);
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    d := d + (SELECT COUNT(*) FROM entries WHERE tier = 'small' AND sha256 = OLD.sha256);
  END IF;
  PERFORM pack_pending_add(d);
  RETURN NULL;
END $$;

CREATE TRIGGER pack_entries_pack_pending AFTER INSERT OR DELETE OR UPDATE OF sha256 ON pack_entries
  FOR EACH ROW EXECUTE FUNCTION pack_entries_pack_pending();
