-- Version 9 (issue #18, src/cluster/admission.ts): the operations waiting, on every instance, for
-- one of the cluster's apply slots (cluster.applySlots) — HyCloud's Request Queue (§III-C) kept
-- in the database so that the FOP priority (Eq. 6) is taken over all instances' queues. A row
-- exists only while an operation waits: one that finds a slot free and no waiting operation
-- with a smaller FOP never writes here. `fop` is arrival + estimated transfer time, ms on the
-- database's clock; the smallest (fop, id) among the rows of live instances (a heartbeat in
-- proxy_instances within cluster.aliveMs) takes the next free slot. Rows of an instance that
-- died are ignored once its heartbeat is stale and deleted by whoever sees them.
CREATE TABLE op_queue (
  id BIGSERIAL PRIMARY KEY,
  instance_id TEXT NOT NULL,
  fop DOUBLE PRECISION NOT NULL,
  queued_ms BIGINT NOT NULL
);
CREATE INDEX op_queue_fop ON op_queue (fop, id);
