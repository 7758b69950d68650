-- Version 2: every table STRICT (issue #15: all of Weft's SQLite tables are), so SQLite
-- refuses a value of the wrong type (a text in an INTEGER column) instead of keeping it.
-- Each table of 001 is rebuilt the usual way — create the STRICT table under a new name,
-- copy every row by named columns, drop the old, rename — and its indexes are made again.
-- Rows keep their values, the outage log's AUTOINCREMENT counter included: it is carried
-- to the new table's name before the old one is dropped (an emptied log keeps counting on),
-- and sqlite_sequence follows the rename. The runner turns foreign keys off around this
-- file, so dropping `objects` cascades nothing; the references name the final tables.

CREATE TABLE objects_v2 (
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
) STRICT;
INSERT INTO objects_v2 (id, size, sha256, layout, k, m, shard_bytes, shard_sha, refs, created_ms)
  SELECT id, size, sha256, layout, k, m, shard_bytes, shard_sha, refs, created_ms FROM objects;
DROP TABLE objects;
ALTER TABLE objects_v2 RENAME TO objects;

CREATE TABLE entries_v2 (
  path        TEXT PRIMARY KEY,
  parent      TEXT NOT NULL,
  kind        TEXT NOT NULL CHECK (kind IN ('file', 'dir')),
  size        INTEGER NOT NULL,
  modified_ms INTEGER NOT NULL,
  revision    TEXT NOT NULL,
  object_id   TEXT REFERENCES objects (id)
) STRICT;
INSERT INTO entries_v2 (path, parent, kind, size, modified_ms, revision, object_id)
  SELECT path, parent, kind, size, modified_ms, revision, object_id FROM entries;
DROP TABLE entries;
ALTER TABLE entries_v2 RENAME TO entries;
CREATE INDEX entries_parent ON entries (parent);

CREATE TABLE locations_v2 (
  object_id   TEXT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
  slot        INTEGER NOT NULL,
  backend     TEXT NOT NULL,
  blob_sha256 TEXT NOT NULL,
  state       TEXT NOT NULL CHECK (state IN ('ok', 'owed', 'bad')),
  PRIMARY KEY (object_id, slot)
) STRICT;
INSERT INTO locations_v2 (object_id, slot, backend, blob_sha256, state)
  SELECT object_id, slot, backend, blob_sha256, state FROM locations;
DROP TABLE locations;
ALTER TABLE locations_v2 RENAME TO locations;
CREATE INDEX locations_backend ON locations (backend);

CREATE TABLE outage_log_v2 (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  backend    TEXT NOT NULL,
  op         TEXT NOT NULL CHECK (op IN ('put', 'delete')),
  object_id  TEXT NOT NULL,
  slot       INTEGER NOT NULL,
  blob_key   TEXT NOT NULL,
  at_ms      INTEGER NOT NULL
) STRICT;
INSERT INTO outage_log_v2 (seq, backend, op, object_id, slot, blob_key, at_ms)
  SELECT seq, backend, op, object_id, slot, blob_key, at_ms FROM outage_log;
INSERT INTO sqlite_sequence (name, seq)
  SELECT 'outage_log_v2', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'outage_log_v2');
UPDATE sqlite_sequence
  SET seq = MAX(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'outage_log'), 0))
  WHERE name = 'outage_log_v2';
DROP TABLE outage_log;
ALTER TABLE outage_log_v2 RENAME TO outage_log;
CREATE INDEX outage_log_backend ON outage_log (backend, seq);

CREATE TABLE backend_state_v2 (
  backend    TEXT PRIMARY KEY,
  down_since INTEGER NOT NULL
) STRICT;
INSERT INTO backend_state_v2 (backend, down_since) SELECT backend, down_since FROM backend_state;
DROP TABLE backend_state;
ALTER TABLE backend_state_v2 RENAME TO backend_state;
