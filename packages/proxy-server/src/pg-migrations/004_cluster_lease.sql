-- Version 4 (issue #18, src/cluster/lease.ts): leases held by one proxy instance at a time,
-- the controller's among them (name 'controller'). `holder` is the instance id, `expires_ms`
-- the database's clock (not the instance's) after which another instance may take it, and
-- `fencing_token` grows by one at every acquisition: work done for the controller checks,
-- in its own transaction, that the row still names its holder and token (a stale holder,
-- paused past its lease, is refused). A graceful release clears holder and expiry but keeps
-- the token, so tokens never repeat.
CREATE TABLE cluster_lease (
  name TEXT PRIMARY KEY,
  holder TEXT,
  fencing_token BIGINT NOT NULL,
  acquired_ms BIGINT,
  expires_ms BIGINT NOT NULL
);
