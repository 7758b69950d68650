-- Version 6: dead bytes in packs, for the cost-driven garbage collection (docs/cost.md,
-- docs/formats/pack.md). A pack entry is dead once no small file of any namespace holds its
-- content; `dead_since_ms` is when the packer first saw it dead (NULL: live). A content
-- uploaded again before the pack is collected is live again (the column goes back to NULL).
ALTER TABLE pack_entries ADD COLUMN dead_since_ms INTEGER;

-- Per pack, kept by the same transaction that marks entries: Σ s_j (bytes of dead entries)
-- and Σ s_j · t_j (each dead entry's bytes times the ms it died), Coral's C_store inputs.
-- `gc_checked_ms` is the last time the collector asked the cost model about the pack.
ALTER TABLE packs ADD COLUMN dead_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE packs ADD COLUMN dead_byte_since_ms REAL NOT NULL DEFAULT 0;
ALTER TABLE packs ADD COLUMN gc_checked_ms INTEGER;

CREATE INDEX pack_entries_dead ON pack_entries (pack_id) WHERE dead_since_ms IS NOT NULL;

-- A small file whose filesystem-tier copy was dropped after its pack was flushed (policy
-- fsCopyDecision): its namespace file is a stub and its reads are served from the pack.
-- Keyed by content: every small file with this hash is read from the pack.
CREATE TABLE fs_dropped (
  sha256 TEXT PRIMARY KEY,
  dropped_ms INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
