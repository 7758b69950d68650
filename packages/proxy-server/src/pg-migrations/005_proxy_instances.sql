-- The proxy instances sharing this database (issue #18, HyCloud §III-C; src/cluster/registry.ts).
-- Each running instance upserts its row every second (cluster.heartbeatMs): where clients reach
-- it, whether it takes new transfers ('active') or is being retired ('draining': no new
-- transfers steered to it, stopped once its transfers end), and its bandwidth — measured_bps is
-- BW_o (its capacity, declared or the most it has moved), available_bps is BW_a (BW_o minus what
-- it moves now, over a sliding window). heartbeat_ms is PostgreSQL's clock, so instances on
-- machines whose clocks disagree still agree on who is alive (heartbeat within cluster.aliveMs).
-- An instance that stops cleanly deletes its row; a crashed one's row ages out.
CREATE TABLE proxy_instances (
  id TEXT PRIMARY KEY,
  url TEXT NOT NULL,
  started_ms BIGINT NOT NULL,
  heartbeat_ms BIGINT NOT NULL,
  state TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'draining')),
  available_bps BIGINT NOT NULL DEFAULT 0,
  measured_bps BIGINT NOT NULL DEFAULT 0,
  active_transfers INTEGER NOT NULL DEFAULT 0
);
