-- Version 1 of the destination proxy's cache index (cache.sqlite). IF NOT EXISTS: caches
-- made before the index had numbered migrations hold these tables at user_version 0.
CREATE TABLE IF NOT EXISTS cached (
  path TEXT PRIMARY KEY,
  sha256 TEXT NOT NULL,
  size INTEGER NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS cached_sha ON cached(sha256);
-- CoCloud Eq. 1-2: the block-size selection probabilities of a path after n adjustments.
CREATE TABLE IF NOT EXISTS block_history (
  path TEXT PRIMARY KEY,
  probs TEXT NOT NULL,
  n INTEGER NOT NULL
) STRICT;
