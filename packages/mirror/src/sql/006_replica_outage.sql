-- A replica that cannot take writes (or be read) is *unavailable*: one row here while it
-- is. Its outage log is the log entries not yet done for it (done_targets lacks it); they
-- are replayed in order when a probe succeeds, and the row is then removed. Kept across
-- restarts so that the state, its cause and its age are shown the same by a new engine.
--   cause         'full' (QuotaExceeded), 'unauthorised' (Auth), 'failing' (anything else:
--                 5xx, network, an unexpected error)
--   since_ms      when it became unavailable (Date.now())
--   failures      failed attempts since (the probe backoff grows with it)
--   next_probe_ms when it is tried again
--   error         the last error's message, for the operator
CREATE TABLE replica_outage (
  share_id      TEXT NOT NULL,
  replica_id    TEXT NOT NULL,
  cause         TEXT NOT NULL CHECK (cause IN ('full', 'unauthorised', 'failing')),
  since_ms      INTEGER NOT NULL,
  failures      INTEGER NOT NULL,
  next_probe_ms INTEGER NOT NULL,
  error         TEXT NOT NULL,
  PRIMARY KEY (share_id, replica_id)
) STRICT;

-- Every file version (SHA-256) that has been the share's head at a path. A replica whose
-- books hold one of these at a path whose head is now another is behind, never ahead: the
-- reconciliation sends it the head instead of taking its copy for a new version.
CREATE TABLE head_history (
  share_id TEXT NOT NULL,
  path     TEXT NOT NULL,
  sha256   TEXT NOT NULL,
  PRIMARY KEY (share_id, path, sha256)
) STRICT, WITHOUT ROWID;
INSERT INTO head_history (share_id, path, sha256) SELECT share_id, path, sha256 FROM head WHERE kind = 'file';
