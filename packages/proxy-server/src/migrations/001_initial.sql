-- Version 1 of the proxy's metadata schema. The filesystem tier is the truth for the
-- namespace tree; `entries` is its index (with revisions and hashes) and is reconciled
-- against the tier at startup, so a crash between a tier write and the transaction that
-- records it is repaired, never lost.

-- One row per user; `seq` is the namespace's change sequence (last value used).
CREATE TABLE users (
  id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL DEFAULT 0,
  created_ms INTEGER NOT NULL
) STRICT;

-- Devices authenticate with a bearer token; only its SHA-256 is stored.
CREATE TABLE devices (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users (id),
  name TEXT NOT NULL,
  token_sha256 TEXT NOT NULL UNIQUE,
  created_ms INTEGER NOT NULL
) STRICT;

-- One-time enrolment invites (hashed like tokens).
CREATE TABLE invites (
  invite_sha256 TEXT PRIMARY KEY,
  user_id TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  used_ms INTEGER
) STRICT;

-- Index of every namespace entry. `revision` is the client-visible revision ("r<seq>");
-- `fs_revision` is the filesystem tier's revision of the file, link file or folder, used to
-- detect changes the index missed (a crash between the tier write and this row).
CREATE TABLE entries (
  user_id TEXT NOT NULL,
  path TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('file', 'dir')),
  size INTEGER NOT NULL,
  mtime_ms INTEGER NOT NULL,
  revision TEXT NOT NULL,
  sha256 TEXT,
  tier TEXT CHECK (tier IN ('small', 'large')),
  fs_revision TEXT NOT NULL,
  PRIMARY KEY (user_id, path)
) STRICT, WITHOUT ROWID;

CREATE INDEX entries_large_sha256 ON entries (sha256) WHERE tier = 'large';

-- The change feed: per-namespace, gap-free, persisted with the change it describes.
CREATE TABLE changes (
  user_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL CHECK (type IN ('upsert', 'delete', 'move')),
  path TEXT NOT NULL,
  from_path TEXT,
  entry TEXT,
  device TEXT,
  PRIMARY KEY (user_id, seq)
) STRICT, WITHOUT ROWID;

-- Content-addressed objects in the object tier. `refcount` counts large entries (link
-- files) naming the object, across all namespaces; an object is deleted only after it has
-- been unreferenced for the grace period.
CREATE TABLE objects (
  sha256 TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  refcount INTEGER NOT NULL DEFAULT 0,
  unreferenced_since_ms INTEGER,
  created_ms INTEGER NOT NULL
) STRICT;

-- Large-file uploads in progress; blocks land in a staging file, ranges record the acks.
CREATE TABLE transfers (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL,
  path TEXT NOT NULL,
  size INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  mtime_ms INTEGER NOT NULL,
  created_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE transfer_ranges (
  transfer_id TEXT NOT NULL,
  offset INTEGER NOT NULL,
  length INTEGER NOT NULL,
  PRIMARY KEY (transfer_id, offset)
) STRICT, WITHOUT ROWID;
