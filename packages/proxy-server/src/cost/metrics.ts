/** Prometheus metrics of the cost model (docs/cost.md), on the server's registry. */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Bill } from './model.ts';

export class CostMetrics {
  readonly requests: Counter<'backend' | 'kind'>;
  readonly requestBytes: Counter<'backend' | 'kind'>;
  readonly bill: Gauge<'scope' | 'basis' | 'part'>;
  readonly gcDecisions: Counter<'decision'>;
  readonly gcPredictedSaving: Counter;
  readonly gcFreedBytes: Counter;
  readonly gcRewrittenBytes: Counter;
  readonly gcRepacks: Counter;
  readonly gcDeadBytes: Gauge;

  constructor(registry: Registry) {
    const registers = [registry];
    this.requests = new Counter({
      name: 'weft_backend_requests_total',
      help: 'Requests to a storage backend (fs, objects) by billing class (put, get, delete)',
      labelNames: ['backend', 'kind'] as const,
      registers,
    });
    this.requestBytes = new Counter({
      name: 'weft_backend_request_bytes_total',
      help: 'Bytes those requests carried (written by put, read by get), by backend and billing class',
      labelNames: ['backend', 'kind'] as const,
      registers,
    });
    this.bill = new Gauge({
      name: 'weft_cost_usd',
      help: "This month's bill in USD: basis so_far or projected, part storage/requests/transfer/egress/plan/total",
      labelNames: ['scope', 'basis', 'part'] as const,
      registers,
    });
    this.gcDecisions = new Counter({
      name: 'weft_pack_gc_decisions_total',
      help: 'Garbage-collection decisions of the cost model per pack (repack, keep)',
      labelNames: ['decision'] as const,
      registers,
    });
    this.gcPredictedSaving = new Counter({
      name: 'weft_pack_gc_dead_cost_usd_total',
      help: 'C_store - C_clean of the packs the model chose to repack (USD)',
      registers,
    });
    this.gcFreedBytes = new Counter({
      name: 'weft_pack_gc_freed_bytes_total',
      help: 'Dead bytes removed from the object tier by repacking',
      registers,
    });
    this.gcRewrittenBytes = new Counter({
      name: 'weft_pack_gc_rewritten_bytes_total',
      help: 'Live bytes read and written again by repacking',
      registers,
    });
    this.gcRepacks = new Counter({
      name: 'weft_pack_gc_repacks_total',
      help: 'Packs repacked because the cost model said so',
      registers,
    });
    this.gcDeadBytes = new Gauge({
      name: 'weft_pack_gc_dead_bytes',
      help: 'Bytes of dead entries the packs hold (at the last collector pass)',
      registers,
    });
  }

  setBill(scope: string, b: Bill): void {
    for (const [basis, parts] of [
      ['so_far', b.soFar],
      ['projected', b.projected],
    ] as const) {
      for (const [part, usd] of Object.entries(parts)) this.bill.set({ scope, basis, part }, usd);
    }
  }
}
