-- Version 5: the cost ledger (docs/cost.md). Every request the proxy makes to a storage
-- backend is counted by billing class, and the bytes each tier holds are integrated over
-- time, per calendar month (UTC, 'YYYY-MM'), so the bill survives restarts.

-- Requests to a backend ('fs' or 'objects') by billing class: 'put' (PUT, COPY, POST, LIST
-- and folder creation), 'get' (GET, HEAD/stat) or 'delete'. `bytes` is the payload moved:
-- uploaded for 'put', downloaded for 'get'.
CREATE TABLE cost_requests (
  month TEXT NOT NULL,
  backend TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('put', 'get', 'delete')),
  requests INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (month, backend, kind)
) STRICT, WITHOUT ROWID;

-- Bytes held per tier ('fs', 'objects'), per user ('' is the whole proxy: physical bytes,
-- content shared by several users counted once), integrated over the month: `byte_ms` is the
-- sum of bytes × milliseconds held; `last_bytes` at `last_ms` is the latest sample.
CREATE TABLE cost_storage (
  month TEXT NOT NULL,
  user_id TEXT NOT NULL,
  tier TEXT NOT NULL,
  byte_ms REAL NOT NULL,
  last_bytes INTEGER NOT NULL,
  last_ms INTEGER NOT NULL,
  PRIMARY KEY (month, user_id, tier)
) STRICT, WITHOUT ROWID;

-- Bytes sent to clients (egress), per user and month.
CREATE TABLE cost_egress (
  month TEXT NOT NULL,
  user_id TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (month, user_id)
) STRICT, WITHOUT ROWID;

-- The chart's points: per hour (start of the hour, ms), user ('' for the proxy) and tier,
-- the latest bytes held that hour.
CREATE TABLE cost_history (
  hour_ms INTEGER NOT NULL,
  user_id TEXT NOT NULL,
  tier TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (user_id, hour_ms, tier)
) STRICT, WITHOUT ROWID;
