-- Mirror engine state, one database for any number of shares.

-- Where each replica's change feed was last read up to (committed with the ops it produced).
CREATE TABLE replica_cursor (
  share_id   TEXT NOT NULL,
  replica_id TEXT NOT NULL,
  cursor     TEXT NOT NULL,
  PRIMARY KEY (share_id, replica_id)
);

-- What each replica holds at each path as far as the processed log is concerned: the base
-- of every conditional write to that replica.
CREATE TABLE known (
  share_id   TEXT NOT NULL,
  replica_id TEXT NOT NULL,
  path       TEXT NOT NULL,
  kind       TEXT NOT NULL CHECK (kind IN ('file', 'dir')),
  revision   TEXT NOT NULL,
  sha256     TEXT NOT NULL,
  PRIMARY KEY (share_id, replica_id, path)
);

-- The share's current version of each path (after the last processed op on it).
CREATE TABLE head (
  share_id TEXT NOT NULL,
  path     TEXT NOT NULL,
  kind     TEXT NOT NULL CHECK (kind IN ('file', 'dir')),
  sha256   TEXT NOT NULL,
  PRIMARY KEY (share_id, path)
);

-- The ordered log of the share. `op` is JSON (see ops.ts); `data` the content of a file
-- upsert until the op is done; `done_targets` a JSON array of replica ids already applied.
CREATE TABLE log (
  seq          INTEGER PRIMARY KEY AUTOINCREMENT,
  share_id     TEXT NOT NULL,
  origin       TEXT NOT NULL,
  op           TEXT NOT NULL,
  data         BLOB,
  done_targets TEXT NOT NULL DEFAULT '[]',
  done         INTEGER NOT NULL DEFAULT 0,
  created_ms   INTEGER NOT NULL
);
CREATE INDEX log_pending ON log (share_id, done, seq);
