-- Version 7 of the proxy's schema on PostgreSQL: the share mirror engines' books, the tables of
-- the mirror's SQLite schema (packages/mirror/src/sql 001–007) with a `mirror_` prefix beside
-- the metadata store's own tables (shares/mirror-books-postgres.ts). Every proxy instance on the
-- database reads them; only the controller's engines write them, each write fenced by the
-- controller lease (004): a deposed controller's late write is refused.

-- Where each replica's change feed was last read up to (committed with the ops it produced).
CREATE TABLE mirror_replica_cursor (
  share_id   TEXT NOT NULL,
  replica_id TEXT NOT NULL,
  cursor     TEXT NOT NULL,
  PRIMARY KEY (share_id, replica_id)
);

-- What each replica holds at each path as far as the processed log is concerned: the base of
-- every conditional write to that replica. Paths compare in code-point order (COLLATE "C"),
-- as in SQLite.
CREATE TABLE mirror_known (
  share_id   TEXT NOT NULL,
  replica_id TEXT NOT NULL,
  path       TEXT COLLATE "C" NOT NULL,
  kind       TEXT NOT NULL CHECK (kind IN ('file', 'dir')),
  revision   TEXT NOT NULL,
  sha256     TEXT NOT NULL,
  PRIMARY KEY (share_id, replica_id, path)
);

-- The share's current version of each path (after the last processed op on it).
CREATE TABLE mirror_head (
  share_id TEXT NOT NULL,
  path     TEXT COLLATE "C" NOT NULL,
  kind     TEXT NOT NULL CHECK (kind IN ('file', 'dir')),
  sha256   TEXT NOT NULL,
  PRIMARY KEY (share_id, path)
);

-- Every file version that has been the share's head at a path (see SQLite 006).
CREATE TABLE mirror_head_history (
  share_id TEXT NOT NULL,
  path     TEXT COLLATE "C" NOT NULL,
  sha256   TEXT NOT NULL,
  PRIMARY KEY (share_id, path, sha256)
);

-- The ordered log of every share: `seq` one order for all instances. `op` is JSON (ops.ts);
-- `data` a file upsert's content until the op is done; `done_targets` a JSON array of the
-- replica ids already applied.
CREATE TABLE mirror_log (
  seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  share_id     TEXT NOT NULL,
  origin       TEXT NOT NULL,
  op           TEXT NOT NULL,
  data         BYTEA,
  done_targets TEXT NOT NULL DEFAULT '[]',
  done         BOOLEAN NOT NULL DEFAULT FALSE,
  created_ms   BIGINT NOT NULL
);
CREATE INDEX mirror_log_pending ON mirror_log (share_id, done, seq);

-- The log's last seq when the engine itself last changed a path on a replica (SQLite 002).
CREATE TABLE mirror_touched (
  share_id   TEXT NOT NULL,
  replica_id TEXT NOT NULL,
  path       TEXT COLLATE "C" NOT NULL,
  seq        BIGINT NOT NULL,
  PRIMARY KEY (share_id, replica_id, path)
);

-- The conflicted-copy name given to each log entry's version (SQLite 004).
CREATE TABLE mirror_conflict_copies (
  share_id TEXT NOT NULL,
  copy     TEXT COLLATE "C" NOT NULL,
  seq      BIGINT NOT NULL,
  PRIMARY KEY (share_id, copy)
);
CREATE INDEX mirror_conflict_copies_seq ON mirror_conflict_copies (share_id, seq);

-- A replica that cannot take writes: one row while it is unavailable (SQLite 006).
CREATE TABLE mirror_replica_outage (
  share_id      TEXT NOT NULL,
  replica_id    TEXT NOT NULL,
  cause         TEXT NOT NULL CHECK (cause IN ('full', 'unauthorised', 'failing')),
  since_ms      BIGINT NOT NULL,
  failures      INTEGER NOT NULL,
  next_probe_ms BIGINT NOT NULL,
  error         TEXT NOT NULL,
  PRIMARY KEY (share_id, replica_id)
);
