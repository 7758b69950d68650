-- Version 2 of the proxy's schema on PostgreSQL: the tables of SQLite migrations 004 and 006
-- (packs), 008 (reads per content) and 005 (the cost ledger) as they stand after them, so
-- packing and per-user cost work with several proxy processes on one database
-- (store/pack-index-postgres.ts, store/read-counts.ts, cost/ledger-postgres.ts). Ids and
-- months compare by byte (COLLATE "C"), as SQLite's BINARY does: packs are listed oldest
-- first by id, a user's latest storage row is the greatest month.

-- One row per pack blob in the object tier (object key `packs/<pack_id>`), with the sums of
-- its dead entries for the cost-driven GC: Σ s_j and Σ s_j·t_j (a float: it exceeds 2^63).
CREATE TABLE packs (
  pack_id TEXT COLLATE "C" PRIMARY KEY,
  size BIGINT NOT NULL,
  entry_count BIGINT NOT NULL,
  created_ms BIGINT NOT NULL,
  dead_bytes BIGINT NOT NULL DEFAULT 0,
  dead_byte_since_ms DOUBLE PRECISION NOT NULL DEFAULT 0,
  gc_checked_ms BIGINT
);

-- The global index: content hash → where its bytes are (one location per hash).
CREATE TABLE pack_entries (
  sha256 TEXT PRIMARY KEY,
  pack_id TEXT COLLATE "C" NOT NULL,
  "offset" BIGINT NOT NULL,
  length BIGINT NOT NULL,
  raw_length BIGINT NOT NULL,
  compression SMALLINT NOT NULL,
  dead_since_ms BIGINT
);
CREATE INDEX pack_entries_pack ON pack_entries (pack_id, "offset");
CREATE INDEX pack_entries_dead ON pack_entries (pack_id) WHERE dead_since_ms IS NOT NULL;

-- The packer's queue is derived: small entries whose hash has no pack_entries row.
CREATE INDEX entries_small_sha256 ON entries (sha256) WHERE tier = 'small';

-- Contents whose filesystem-tier copy was dropped for its pack: read from the pack.
CREATE TABLE fs_dropped (
  sha256 TEXT PRIMARY KEY,
  dropped_ms BIGINT NOT NULL
);

-- What each proxy process is packing or repacking now ('c:<sha256>' a content being packed,
-- 'p:<pack id>' a pack being rewritten), so that no two processes do the same work; a claim
-- expires, so the work of a process that died is taken over.
CREATE TABLE pack_claims (
  key TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  expires_ms BIGINT NOT NULL
);

-- Reads per content (counted in memory by each process, added here in batches).
CREATE TABLE content_reads (
  sha256 TEXT PRIMARY KEY,
  reads BIGINT NOT NULL,
  first_ms BIGINT NOT NULL,
  last_ms BIGINT NOT NULL
);

-- The cost ledger: requests by backend and billing class, added by every process.
CREATE TABLE cost_requests (
  month TEXT COLLATE "C" NOT NULL,
  backend TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('put', 'get', 'delete')),
  requests BIGINT NOT NULL,
  bytes BIGINT NOT NULL,
  PRIMARY KEY (month, backend, kind)
);

-- Bytes held per tier and user ('' the whole proxy), integrated over the month.
CREATE TABLE cost_storage (
  month TEXT COLLATE "C" NOT NULL,
  user_id TEXT NOT NULL,
  tier TEXT NOT NULL,
  byte_ms DOUBLE PRECISION NOT NULL,
  last_bytes BIGINT NOT NULL,
  last_ms BIGINT NOT NULL,
  PRIMARY KEY (month, user_id, tier)
);
CREATE INDEX cost_storage_latest ON cost_storage (user_id, tier, month);

-- Bytes sent to clients, per user and month.
CREATE TABLE cost_egress (
  month TEXT COLLATE "C" NOT NULL,
  user_id TEXT NOT NULL,
  bytes BIGINT NOT NULL,
  PRIMARY KEY (month, user_id)
);

-- The chart's points: per hour, user ('' the proxy) and tier, the latest bytes held.
CREATE TABLE cost_history (
  hour_ms BIGINT NOT NULL,
  user_id TEXT NOT NULL,
  tier TEXT NOT NULL,
  bytes BIGINT NOT NULL,
  PRIMARY KEY (user_id, hour_ms, tier)
);

-- The key that signs pack stubs (store/pack-stub.ts), one for every process sharing the
-- database: a stub one process wrote is recognised by another's recovery (a single row).
CREATE TABLE pack_stub_key (
  id SMALLINT PRIMARY KEY CHECK (id = 1),
  key BYTEA NOT NULL
);
