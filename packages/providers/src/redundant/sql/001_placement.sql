-- Placement store of the redundant object tier (issue #17): the namespace, where each
-- object's replicas or fragments are, and the outage log of what a down backend missed.

-- The namespace the tier presents as a Provider. A file points at one stored object;
-- copies share it (objects.refs counts the entries that point at it).
CREATE TABLE entries (
  path        TEXT PRIMARY KEY,
  parent      TEXT NOT NULL,
  kind        TEXT NOT NULL CHECK (kind IN ('file', 'dir')),
  size        INTEGER NOT NULL,
  modified_ms INTEGER NOT NULL,
  revision    TEXT NOT NULL,
  object_id   TEXT REFERENCES objects (id)
);
CREATE INDEX entries_parent ON entries (parent);

-- One stored object: replicated (raw bytes on each replica) or striped RS(k, m)
-- (fragment objects, docs/formats/fragment.md). shard_sha: for striped objects the
-- SHA-256 of every shard, stripe-major ((stripe × (k + m) + index) × 32).
CREATE TABLE objects (
  id          TEXT PRIMARY KEY,
  size        INTEGER NOT NULL,
  sha256      TEXT NOT NULL,
  layout      TEXT NOT NULL CHECK (layout IN ('replicated', 'striped')),
  k           INTEGER NOT NULL,
  m           INTEGER NOT NULL,
  shard_bytes INTEGER NOT NULL,
  shard_sha   BLOB,
  refs        INTEGER NOT NULL,
  created_ms  INTEGER NOT NULL
);

-- Where each replica (slot = replica number) or fragment (slot = fragment index) is.
-- state: 'ok' stored and believed good; 'owed' the backend was down at write time (an
-- outage-log entry will put it there); 'bad' found missing or corrupt, to be repaired.
CREATE TABLE locations (
  object_id   TEXT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
  slot        INTEGER NOT NULL,
  backend     TEXT NOT NULL,
  blob_sha256 TEXT NOT NULL,
  state       TEXT NOT NULL CHECK (state IN ('ok', 'owed', 'bad')),
  PRIMARY KEY (object_id, slot)
);
CREATE INDEX locations_backend ON locations (backend);

-- What a down backend should have received, replayed in seq order when it answers again.
CREATE TABLE outage_log (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  backend    TEXT NOT NULL,
  op         TEXT NOT NULL CHECK (op IN ('put', 'delete')),
  object_id  TEXT NOT NULL,
  slot       INTEGER NOT NULL,
  blob_key   TEXT NOT NULL,
  at_ms      INTEGER NOT NULL
);
CREATE INDEX outage_log_backend ON outage_log (backend, seq);

-- When each backend was first seen down (absent: up).
CREATE TABLE backend_state (
  backend    TEXT PRIMARY KEY,
  down_since INTEGER NOT NULL
);
