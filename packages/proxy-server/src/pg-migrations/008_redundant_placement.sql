-- Version 8 of the proxy's schema on PostgreSQL: the redundant object tier's placement store
-- (issue #17 on several instances, issue #18; store/placement-postgres.ts), so every proxy
-- instance sharing this database serves one redundant tier. The same tables as the tier's
-- SQLite file (packages/providers/src/redundant/sql/), prefixed `redundant_`: the namespace
-- the tier presents, each object's layout and where its replicas or fragments are, the outage
-- log of what a down backend missed (shared: a write any instance took while a backend was
-- down is replayed once, by the controller), and which backends were seen down. Paths and
-- ids compare bytewise (COLLATE "C"), as SQLite's BINARY does.

-- A file points at one stored object; copies share it (refs counts the entries that do).
CREATE TABLE redundant_objects (
  id          TEXT COLLATE "C" PRIMARY KEY,
  size        BIGINT NOT NULL,
  sha256      TEXT NOT NULL,
  layout      TEXT NOT NULL CHECK (layout IN ('replicated', 'striped')),
  k           INTEGER NOT NULL,
  m           INTEGER NOT NULL,
  shard_bytes BIGINT NOT NULL,
  -- Striped: the SHA-256 of every shard, stripe-major ((stripe × (k + m) + index) × 32).
  shard_sha   BYTEA,
  refs        INTEGER NOT NULL,
  created_ms  BIGINT NOT NULL
);

CREATE TABLE redundant_entries (
  path        TEXT COLLATE "C" PRIMARY KEY,
  parent      TEXT COLLATE "C" NOT NULL,
  kind        TEXT NOT NULL CHECK (kind IN ('file', 'dir')),
  size        BIGINT NOT NULL,
  modified_ms BIGINT NOT NULL,
  revision    TEXT NOT NULL,
  object_id   TEXT COLLATE "C" REFERENCES redundant_objects (id)
);
CREATE INDEX redundant_entries_parent ON redundant_entries (parent);
CREATE INDEX redundant_entries_object ON redundant_entries (object_id);

-- slot: replica number or fragment index. state: 'ok' stored and believed good; 'owed' the
-- backend was down at write time (an outage-log entry puts it there); 'bad' found missing
-- or corrupt, to be repaired.
CREATE TABLE redundant_locations (
  object_id   TEXT COLLATE "C" NOT NULL REFERENCES redundant_objects (id) ON DELETE CASCADE,
  slot        INTEGER NOT NULL,
  backend     TEXT NOT NULL,
  blob_sha256 TEXT NOT NULL,
  state       TEXT NOT NULL CHECK (state IN ('ok', 'owed', 'bad')),
  PRIMARY KEY (object_id, slot)
);
CREATE INDEX redundant_locations_backend ON redundant_locations (backend);

-- What a down backend should have received, replayed in seq order when it answers again.
CREATE TABLE redundant_outage_log (
  seq        BIGSERIAL PRIMARY KEY,
  backend    TEXT NOT NULL,
  op         TEXT NOT NULL CHECK (op IN ('put', 'delete')),
  object_id  TEXT NOT NULL,
  slot       INTEGER NOT NULL,
  blob_key   TEXT NOT NULL,
  at_ms      BIGINT NOT NULL
);
CREATE INDEX redundant_outage_log_backend ON redundant_outage_log (backend, seq);

-- When each backend was first seen down, by any instance (absent: up).
CREATE TABLE redundant_backend_state (
  backend    TEXT PRIMARY KEY,
  down_since BIGINT NOT NULL
);
