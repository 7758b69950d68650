/**
 * The proxy's cost accounting (docs/cost.md): counts requests and egress into the ledger,
 * samples the bytes each tier holds, answers `GET /v1/cost`, keeps the Prometheus gauges
 * of the bill, and logs and counts the garbage-collection decisions of the model.
 */
import type { Logger } from 'pino';
import type { RequestClass } from '@weft/providers';
import type { CostBill, CostResponse } from '@weft/wire';
import type { ProxyMetrics } from '../metrics.ts';
import { CostLedger, PROXY, type Backend } from './ledger.ts';
import type { CostStore } from './ledger-store.ts';
import { type Bill, computeBill, type Usage } from './model.ts';
import {
  fsCopyDecision,
  type FsCopyDecision,
  gcDecision,
  type GcDecision,
  type PackGcInput,
  packTargetSize,
} from './policy.ts';
import { type CostConfig, type PriceTable, resolvePrices } from './prices.ts';
import { CostMetrics } from './metrics.ts';

const DAY_MS = 24 * 3600 * 1000;

export class CostService {
  readonly ledger: CostLedger;
  readonly prices: { fs: PriceTable; objects: PriceTable };
  private readonly metrics: CostMetrics;
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> = Promise.resolve();

  constructor(
    store: CostStore,
    private readonly config: CostConfig,
    metrics: ProxyMetrics,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.ledger = new CostLedger(store);
    this.prices = resolvePrices(config);
    this.metrics = new CostMetrics(metrics.registry);
  }

  /** The sink a CountingProvider on `backend` reports to. */
  sink(backend: Backend): (kind: RequestClass, requests: number, bytes: number) => void {
    return (kind, requests, bytes) => {
      this.ledger.countRequests(backend, kind, requests, bytes);
      if (requests > 0) this.metrics.requests.inc({ backend, kind }, requests);
      if (bytes > 0) this.metrics.requestBytes.inc({ backend, kind }, bytes);
    };
  }

  countEgress(userId: string, bytes: number): void {
    this.ledger.countEgress(userId, bytes);
  }

  /** Sample now, then every `sampleIntervalMs` (0 disables the timer; tests call `sample`). */
  start(): void {
    void this.sample();
    if (this.config.sampleIntervalMs > 0) {
      this.timer = setInterval(() => void this.sample(), this.config.sampleIntervalMs);
      this.timer.unref();
    }
  }

  /** Flush counts, sample the bytes held, refresh the bill gauges (a failure is logged). */
  async sample(nowMs = this.now()): Promise<void> {
    // One sample at a time: a slow one (PostgreSQL) is not overtaken by the next timer tick.
    const run = this.sampling.then(async () => {
      try {
        await this.ledger.flush(nowMs);
        await this.ledger.sample(nowMs, await this.ledger.readStorage());
        await this.ledger.prune(nowMs - 31 * DAY_MS);
        this.metrics.setBill('proxy', await this.bill(PROXY, nowMs));
      } catch (e) {
        this.log.warn({ err: e }, 'cost sample failed');
      }
    });
    this.sampling = run;
    return run;
  }

  /** The month's bill of `userId` (`PROXY`: the whole proxy) at `nowMs`. */
  async bill(userId: string, nowMs = this.now()): Promise<Bill> {
    return computeBill(
      await this.usageOf(userId, nowMs),
      this.prices,
      nowMs,
      await this.planShare(userId, nowMs),
    );
  }

  /**
   * A user's usage: their own bytes held and egress; the proxy's requests apportioned by
   * their share of the proxy's object-tier byte-time (requests are not attributed to users).
   */
  private async usageOf(userId: string, nowMs: number): Promise<Usage> {
    const own = await this.ledger.usage(userId, nowMs);
    if (userId === PROXY) return own;
    const all = await this.ledger.usage(PROXY, nowMs);
    const share = (t: Backend): number => {
      const total = all.tiers[t].byteMs;
      return total > 0 ? Math.min(1, own.tiers[t].byteMs / total) : 0;
    };
    const scaled = (t: Backend) => {
      const s = share(t);
      const r = all.tiers[t].requests;
      return {
        ...own.tiers[t],
        requests: {
          put: { requests: r.put.requests * s, bytes: r.put.bytes * s },
          get: { requests: r.get.requests * s, bytes: r.get.bytes * s },
          delete: { requests: r.delete.requests * s, bytes: r.delete.bytes * s },
        },
      };
    };
    return { tiers: { fs: scaled('fs'), objects: scaled('objects') }, egressBytes: own.egressBytes };
  }

  private async planShare(userId: string, nowMs: number): Promise<number> {
    if (userId === PROXY) return 1;
    const own = await this.ledger.usage(userId, nowMs);
    const all = await this.ledger.usage(PROXY, nowMs);
    const a = all.tiers.fs.bytesNow + all.tiers.objects.bytesNow;
    return a > 0 ? (own.tiers.fs.bytesNow + own.tiers.objects.bytesNow) / a : 0;
  }

  /** The `GET /v1/cost` answer for `userId`. */
  async report(userId: string, nowMs = this.now()): Promise<CostResponse> {
    const mine = await this.bill(userId, nowMs);
    const proxy = await this.bill(PROXY, nowMs);
    return {
      user: userId,
      month: mine.month,
      elapsed: mine.elapsed,
      currency: 'USD',
      tables: { fs: this.config.tiers.fs, objects: this.config.tiers.objects },
      mine: this.wireBill(mine, await this.usageOf(userId, nowMs)),
      proxy: this.wireBill(proxy, await this.ledger.usage(PROXY, nowMs)),
      history: await this.ledger.history(userId, nowMs - 30 * DAY_MS),
    };
  }

  private wireBill(b: Bill, u: Usage): CostBill {
    const r = (k: 'put' | 'get' | 'delete'): number =>
      Math.round(u.tiers.fs.requests[k].requests + u.tiers.objects.requests[k].requests);
    return {
      soFar: b.soFar,
      projected: b.projected,
      fsBytes: u.tiers.fs.bytesNow,
      objectsBytes: u.tiers.objects.bytesNow,
      requests: { put: r('put'), get: r('get'), delete: r('delete') },
      egressBytes: u.egressBytes,
    };
  }

  /**
   * Coral's GC rule for one pack at `nowMs` on the object tier's prices, logged with its
   * inputs and counted in `weft_pack_gc_decisions_total`. The packer repacks when `repack`.
   */
  decideGc(pack: PackGcInput, nowMs = this.now()): GcDecision {
    const d = gcDecision(this.prices.objects, pack, nowMs);
    this.metrics.gcDecisions.inc({ decision: d.repack ? 'repack' : 'keep' });
    if (d.repack) this.metrics.gcPredictedSaving.inc(Math.max(0, d.cStore - d.cClean));
    this.log.info(
      { gc: { ...pack, ...d } },
      d.repack ? 'pack garbage costs more than cleaning: repack' : 'pack kept',
    );
    return d;
  }

  /** The pack size this proxy's object-tier prices suggest (policy.packTargetSize). */
  packTargetSize(): number {
    return packTargetSize(this.prices.objects);
  }

  /** Whether a small file's filesystem-tier copy is worth keeping once its pack is flushed. */
  keepFsCopy(size: number, readsPerMonth: number): FsCopyDecision {
    return fsCopyDecision(this.prices.fs, this.prices.objects, { size, readsPerMonth });
  }

  /** Record the outcome of a repack the policy asked for (counted in the ledger by its requests). */
  gcDone(
    packId: string,
    outcome: { freedBytes: number; rewrittenBytes: number; into?: string; predictedCleanUsd?: number },
  ): void {
    this.metrics.gcFreedBytes.inc(Math.max(0, outcome.freedBytes));
    this.metrics.gcRewrittenBytes.inc(outcome.rewrittenBytes);
    this.metrics.gcRepacks.inc();
    this.log.info({ gc: { packId, ...outcome } }, 'pack repacked');
  }

  /** Dead bytes the packs hold now (the collector's last pass): `weft_pack_gc_dead_bytes`. */
  setPackDeadBytes(bytes: number): void {
    this.metrics.gcDeadBytes.set(bytes);
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.sample();
  }
}
