-- Version 5: selective sync (selection.ts, selective-sync.ts). The folders this device leaves
-- out of the Weft storage, each with its state:
--   leaving:   unselected; still synced until its pending local changes are uploaded, then
--              its local copy is removed (nothing is deleted on the server);
--   excluded:  not on this disk; not downloaded, not scanned;
--   including: selected again; being downloaded.
-- A path is left out when it or an ancestor is listed (no listed path is inside another
-- listed path in the leaving/excluded states).
CREATE TABLE selection (
  path TEXT PRIMARY KEY,
  state TEXT NOT NULL CHECK (state IN ('leaving', 'excluded', 'including'))
) STRICT;
