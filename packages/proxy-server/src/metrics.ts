/** Prometheus metrics of one server instance (its own registry, so tests can run several). */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export class ProxyMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'weft_http_requests_total',
    help: 'HTTP requests by route and status code',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly bytes = new Counter({
    name: 'weft_bytes_total',
    help: 'Bytes moved, by tier (client, fs, object) and direction (in, out)',
    labelNames: ['tier', 'direction'] as const,
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({
    name: 'weft_op_queue_depth',
    help: 'Operations waiting or running in the ordered-apply scheduler',
    registers: [this.registry],
  });
  readonly transferSeconds = new Histogram({
    name: 'weft_transfer_seconds',
    help: 'Latency of object-tier transfers (upload on ingest, staging into the relay cache)',
    labelNames: ['kind'] as const,
    buckets: [0.005, 0.02, 0.1, 0.5, 1, 2, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly relayLookups = new Counter({
    name: 'weft_relay_cache_lookups_total',
    help: 'Relay cache lookups by result (hit, miss)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly relayHitRatio = new Gauge({
    name: 'weft_relay_cache_hit_ratio',
    help: 'Relay cache hits / lookups since start',
    registers: [this.registry],
  });
  readonly relayBytes = new Gauge({
    name: 'weft_relay_cache_bytes',
    help: 'Bytes held in the relay cache',
    registers: [this.registry],
  });
  readonly feedClients = new Gauge({
    name: 'weft_feed_connections',
    help: 'Open change-feed WebSockets',
    registers: [this.registry],
  });

  readonly packPendingCorrections = new Counter({
    name: 'weft_pack_pending_corrections_total',
    help: 'Corrections of the kept pack pending count by a recount (PostgreSQL: concurrent commits can leave it off)',
    registers: [this.registry],
  });
  readonly packPendingDrift = new Counter({
    name: 'weft_pack_pending_drift_files_total',
    help: 'Files by which the kept pack pending count was found off and corrected (sum of |recount - counter|)',
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'weft_proxy_' });
  }

  /** A correction of the kept pack pending count by `delta` files (store/pack-pending-reconcile.ts). */
  packPendingCorrected(delta: number): void {
    this.packPendingCorrections.inc();
    this.packPendingDrift.inc(Math.abs(delta));
  }

  /** `weft_pack_pending_files`: small files not yet in a pack (a counter the database keeps: a few rows read a scrape). */
  packPending(count: () => Promise<number>): void {
    new Gauge({
      name: 'weft_pack_pending_files',
      help: 'Small files durable on the filesystem tier whose content is in no pack yet (0: all in the object tier)',
      registers: [this.registry],
      async collect() {
        this.set(await count());
      },
    });
  }
}
