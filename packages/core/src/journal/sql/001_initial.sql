-- Version 1 of the client journal. One database per synced folder, in the agent's state
-- folder (never inside the synced folder). WAL mode; every multi-step change is one
-- transaction, so a crash at any instant leaves either the old or the new state.

-- Small facts: device id, remote cursor, schema notes.
CREATE TABLE meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;

-- The local index: one row per path the engine knows.
--   size/mtime_ns/inode/hash: what the disk held when last scanned (hash = SHA-256 hex);
--   synced_*: the base, i.e. the last version both sides agreed on (NULL = never synced);
--   signature: rsync signature of the synced version of a large file, for delta upload.
CREATE TABLE files (
  path TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('file', 'dir')),
  size INTEGER NOT NULL DEFAULT 0,
  mtime_ns INTEGER NOT NULL DEFAULT 0,
  inode INTEGER NOT NULL DEFAULT 0,
  hash TEXT,
  synced_rev TEXT,
  synced_hash TEXT,
  signature BLOB,
  signature_block INTEGER
) STRICT;

-- The durable operation queue (coalesced in place: see coalesce.ts).
CREATE TABLE ops (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL CHECK (kind IN ('put', 'mkdir', 'delete', 'move')),
  path TEXT NOT NULL,
  to_path TEXT,
  hash TEXT,
  size INTEGER,
  created INTEGER NOT NULL DEFAULT 0,
  replaces INTEGER NOT NULL DEFAULT 0,
  queued_at INTEGER NOT NULL
) STRICT;

-- Transfer state of a large upload: which blocks the server acknowledged, so a restart
-- re-sends only the others.
CREATE TABLE transfers (
  path TEXT PRIMARY KEY,
  transfer_id TEXT NOT NULL,
  hash TEXT NOT NULL,
  size INTEGER NOT NULL,
  acked TEXT NOT NULL DEFAULT '[]'
) STRICT;

-- Per-file delta history (HyCloud Eq. 1): probability vector over candidate block sizes
-- (JSON), the number of observations n (decay lambda = n/(n+1)), last compression ratio.
CREATE TABLE delta_history (
  path TEXT PRIMARY KEY,
  block_probs TEXT NOT NULL,
  n INTEGER NOT NULL DEFAULT 0,
  compression_ratio REAL
) STRICT;

-- Recent activity shown by the status model (last 200 kept).
CREATE TABLE activity (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  path TEXT NOT NULL,
  detail TEXT
) STRICT;
