-- Version 7: versions and deleted files a user can restore (docs/proxy-server.md "Versions
-- and deleted files"). When a file is overwritten with other content, or deleted, the version
-- it held is kept here for the retention period (config `versions.retentionDays`). Content
-- stays content-addressed: a large version holds a reference on its object (objects.refcount
-- counts these rows too); a small version's bytes are kept on the filesystem tier under
-- `versions/<aa>/<sha256>`, shared by every row naming that hash, and swept by GC once no row
-- names it.
CREATE TABLE versions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  user_id TEXT NOT NULL,
  path TEXT NOT NULL,
  size INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  tier TEXT NOT NULL CHECK (tier IN ('small', 'large')),
  mtime_ms INTEGER NOT NULL,
  -- When this version was written and by which device (NULL: not known, e.g. written before
  -- this version of the schema or found by crash recovery).
  written_ms INTEGER,
  device TEXT,
  -- When it stopped being current, by which device, and whether the path was deleted (1) or
  -- overwritten (0).
  replaced_ms INTEGER NOT NULL,
  replaced_by TEXT,
  deleted INTEGER NOT NULL CHECK (deleted IN (0, 1))
) STRICT;

CREATE INDEX versions_path ON versions (user_id, path, replaced_ms);
CREATE INDEX versions_sha256 ON versions (sha256);
CREATE INDEX versions_age ON versions (replaced_ms);

-- Who wrote each entry's current version, and when (NULL for entries written before).
ALTER TABLE entries ADD COLUMN written_ms INTEGER;
ALTER TABLE entries ADD COLUMN device TEXT;
