-- Version 3: the background jobs' records (the last scrub, the last orphan sweep, a backend
-- replacement's progress), kept with the placement rather than in files beside it, so a store
-- several processes share (the PostgreSQL one, pg-migrations/010) lets the next controller
-- continue a schedule or a replacement; `value` is the job's JSON.
CREATE TABLE job_records (
  name       TEXT PRIMARY KEY,
  value      TEXT NOT NULL,
  updated_ms INTEGER NOT NULL
) STRICT;
