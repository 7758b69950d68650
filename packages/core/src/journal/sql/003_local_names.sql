-- Version 3: entries stored on this disk under another name than their remote one, because
-- the local filesystem cannot hold the remote name (see local-path.ts: `CON.txt` →
-- `CON＿.txt` on Windows, `a:b` → `a：b`, controls → ␁, over-long names → a hashed form).
--   path: the remote path; local_name: the name of its last segment on disk;
--   reason: why (reserved-name, reserved-char, trailing, control, bidi, quoted, too-long).
-- The status shows these as notices; a long name is mapped back through local_name.
CREATE TABLE local_names (
  path TEXT PRIMARY KEY,
  local_name TEXT NOT NULL,
  reason TEXT NOT NULL
) STRICT;

CREATE INDEX local_names_by_local ON local_names(local_name);
