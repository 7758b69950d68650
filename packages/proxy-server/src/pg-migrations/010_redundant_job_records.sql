-- Version 10 (issues #17, #18; store/placement-postgres.ts): the redundant tier's background
-- jobs' records — the last scrub, the last orphan sweep, a backend replacement's progress —
-- beside its placement (the SQLite store's job_records), so the next controller continues the
-- scrub schedule and resumes a replacement from where the last one left it. `value` is JSON.
CREATE TABLE redundant_job_records (
  name       TEXT PRIMARY KEY,
  value      TEXT NOT NULL,
  updated_ms BIGINT NOT NULL
);
