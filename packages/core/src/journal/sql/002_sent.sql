-- Version 2: contents sent to the server whose acknowledgement may have been lost.
-- A row is written (in its own transaction) before a file's content is sent and removed
-- when the outcome is recorded. If the agent dies in between, the change feed later shows
-- the server holding one of these hashes: that is our own write, not someone else's, so
-- it becomes the new base instead of a conflict.
CREATE TABLE sent (
  path TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY (path, sha256)
) STRICT;
