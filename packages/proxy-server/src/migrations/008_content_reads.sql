-- Version 8: reads per content (docs/cost.md), for the cost model's keep-or-drop decision of a
-- small file's filesystem-tier copy (packs.fsCopy 'cost'): a content read often stays on the
-- filesystem tier. Counted in memory and written in batches (store/read-counts.ts); keyed by
-- content, like the pack index: every path holding the same bytes adds to one count.
CREATE TABLE content_reads (
  sha256 TEXT PRIMARY KEY,
  reads INTEGER NOT NULL,
  first_ms INTEGER NOT NULL,
  last_ms INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
