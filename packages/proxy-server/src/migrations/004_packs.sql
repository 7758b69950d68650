-- Version 4: packs (docs/formats/pack.md). Small files, durable first on the filesystem tier,
-- are appended by the packer to pack blobs in the object tier. Every pack carries its own
-- footer index, so these tables are a redundant copy (the Packing paper's global index) and
-- can be dropped and rebuilt from the footers.

-- One row per pack blob in the object tier (object key `packs/<pack_id>`).
CREATE TABLE packs (
  pack_id TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  entry_count INTEGER NOT NULL,
  created_ms INTEGER NOT NULL
) STRICT;

-- The global index: content hash → where its bytes are. One location per hash (content is
-- deduplicated across packs and namespaces); a repack moves the row to the new pack.
CREATE TABLE pack_entries (
  sha256 TEXT PRIMARY KEY,
  pack_id TEXT NOT NULL,
  offset INTEGER NOT NULL,
  length INTEGER NOT NULL,
  raw_length INTEGER NOT NULL,
  compression INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX pack_entries_pack ON pack_entries (pack_id, offset);

-- The packer's queue is derived: small entries whose hash has no pack_entries row.
CREATE INDEX entries_small_sha256 ON entries (sha256) WHERE tier = 'small';
