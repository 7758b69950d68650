-- The log's last seq when the engine itself last changed a path on a replica (write,
-- remove, move). A feed entry from that replica ingested at or before that seq describes
-- a state the engine has knowingly replaced since, and is not propagated.
CREATE TABLE touched (
  share_id   TEXT NOT NULL,
  replica_id TEXT NOT NULL,
  path       TEXT NOT NULL,
  seq        INTEGER NOT NULL,
  PRIMARY KEY (share_id, replica_id, path)
);
