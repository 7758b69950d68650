/** Prometheus metrics of the cost model (docs/cost.md), on the server's registry. */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Bill } from './model.ts';

export class CostMetrics {
  readonly requests: Counter<'backend' | 'kind'>;
  readonly bill: Gauge<'scope' | 'basis' | 'part'>;
  readonly gcDecisions: Counter<'decision'>;
  readonly gcPredictedSaving: Counter;
  readonly gcFreedBytes: Counter;

  constructor(registry: Registry) {
    const registers = [registry];
    this.requests = new Counter({
      name: 'weft_backend_requests_total',
      help: 'Requests to a storage backend (fs, objects) by billing class (put, get, delete)',
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
