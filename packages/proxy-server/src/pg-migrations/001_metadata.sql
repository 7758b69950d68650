-- Version 1 of the proxy's metadata schema on PostgreSQL (store/postgres.ts): the tables of
-- SQLite migrations 001, 002, 003 and 007 (src/migrations/) as they stand after them, so both
-- stores hold the same rows. Milliseconds and byte counts are BIGINT; paths compare by byte
-- (COLLATE "C"), as SQLite's BINARY does, so "everything below dir" is the key range
-- [dir || '/', dir || '0') and listings come in the same order from either store.

-- One row per namespace (a user): `seq` is the last change's sequence number. applyChanges
-- locks this row (SELECT ... FOR UPDATE) for its transaction, so the changes of one namespace
-- get consecutive seqs whichever process records them.
CREATE TABLE users (
  id TEXT PRIMARY KEY,
  seq BIGINT NOT NULL DEFAULT 0,
  created_ms BIGINT NOT NULL
);

CREATE TABLE devices (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users (id),
  name TEXT NOT NULL,
  token_sha256 TEXT NOT NULL UNIQUE,
  created_ms BIGINT NOT NULL,
  last_seen_ms BIGINT,
  revoked_ms BIGINT
);
CREATE INDEX devices_user ON devices (user_id);

-- One-time enrolment invites, by the SHA-256 of the invite (the invite itself is never stored).
CREATE TABLE invites (
  invite_sha256 TEXT PRIMARY KEY,
  user_id TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  used_ms BIGINT,
  expires_ms BIGINT NOT NULL
);

-- The namespace index: one row per file or folder.
CREATE TABLE entries (
  user_id TEXT NOT NULL,
  path TEXT COLLATE "C" NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('file', 'dir')),
  size BIGINT NOT NULL,
  mtime_ms BIGINT NOT NULL,
  revision TEXT NOT NULL,
  sha256 TEXT,
  tier TEXT CHECK (tier IN ('small', 'large')),
  fs_revision TEXT NOT NULL,
  written_ms BIGINT,
  device TEXT,
  PRIMARY KEY (user_id, path)
);
CREATE INDEX entries_large_sha256 ON entries (sha256) WHERE tier = 'large';

-- The change feed: per namespace, seq 1, 2, 3, ... with no gap (`entry` is the JSON EntryInfo).
CREATE TABLE changes (
  user_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  type TEXT NOT NULL CHECK (type IN ('upsert', 'delete', 'move')),
  path TEXT COLLATE "C" NOT NULL,
  from_path TEXT COLLATE "C",
  entry TEXT,
  device TEXT,
  PRIMARY KEY (user_id, seq)
);

-- Large content in the object tier, deduplicated across namespaces: `refcount` counts entries
-- and kept versions naming it; at 0 it is dated for GC after the grace period.
CREATE TABLE objects (
  sha256 TEXT PRIMARY KEY,
  size BIGINT NOT NULL,
  refcount BIGINT NOT NULL DEFAULT 0,
  unreferenced_since_ms BIGINT,
  created_ms BIGINT NOT NULL
);
CREATE INDEX objects_collectable ON objects (unreferenced_since_ms) WHERE refcount <= 0;

-- Large content each user has held (only that may be linked or used as a delta base).
CREATE TABLE user_objects (
  user_id TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  last_linked_ms BIGINT NOT NULL,
  PRIMARY KEY (user_id, sha256)
);
CREATE INDEX user_objects_sha256 ON user_objects (sha256);

-- Resumable large-file transfers and the ranges acknowledged so far.
CREATE TABLE transfers (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL,
  path TEXT NOT NULL,
  size BIGINT NOT NULL,
  sha256 TEXT NOT NULL,
  mtime_ms BIGINT NOT NULL,
  created_ms BIGINT NOT NULL
);
CREATE TABLE transfer_ranges (
  transfer_id TEXT NOT NULL,
  "offset" BIGINT NOT NULL,
  length BIGINT NOT NULL,
  PRIMARY KEY (transfer_id, "offset")
);

-- Kept versions (version-index.ts): file versions that stopped being current.
CREATE TABLE versions (
  id BIGSERIAL PRIMARY KEY,
  user_id TEXT NOT NULL,
  path TEXT COLLATE "C" NOT NULL,
  size BIGINT NOT NULL,
  sha256 TEXT NOT NULL,
  tier TEXT NOT NULL CHECK (tier IN ('small', 'large')),
  mtime_ms BIGINT NOT NULL,
  written_ms BIGINT,
  device TEXT,
  replaced_ms BIGINT NOT NULL,
  replaced_by TEXT,
  deleted BOOLEAN NOT NULL
);
CREATE INDEX versions_path ON versions (user_id, path, replaced_ms);
CREATE INDEX versions_sha256 ON versions (sha256);
CREATE INDEX versions_age ON versions (replaced_ms);
