/**
 * The cost ledger (docs/cost.md; tables of SQLite migration 005 or pg-migrations/002, through
 * a CostStore: ledger-store.ts): requests to each backend by billing class, bytes held per
 * tier integrated over the month, and egress per user. Requests and egress are counted in
 * memory on the request path and added to the store in one transaction per `flush` (the cost
 * service flushes with each sample and on close), so a crash loses at most one sampling
 * interval of counts. Several processes on one PostgreSQL each add their own counts.
 */
import { type CostStore, PROXY, type RequestCount, type StorageReading } from './ledger-store.ts';
import type { RequestKind, Tier, TierUsage, Usage } from './model.ts';
import { monthOf } from './model.ts';

export type Backend = Tier;
export { PROXY, type StorageReading } from './ledger-store.ts';
const HOUR_MS = 3600 * 1000;

function emptyRequests(): Record<RequestKind, { requests: number; bytes: number }> {
  return {
    put: { requests: 0, bytes: 0 },
    get: { requests: 0, bytes: 0 },
    delete: { requests: 0, bytes: 0 },
  };
}

export class CostLedger {
  private pendingRequests = new Map<string, { requests: number; bytes: number }>();
  private pendingEgress = new Map<string, number>();

  constructor(readonly store: CostStore) {}

  /** Count requests to `backend` (cheap: in memory until the next flush). */
  countRequests(backend: Backend, kind: RequestKind, requests: number, bytes: number): void {
    const key = `${backend}\0${kind}`;
    const p = this.pendingRequests.get(key) ?? { requests: 0, bytes: 0 };
    p.requests += requests;
    p.bytes += bytes;
    this.pendingRequests.set(key, p);
  }

  countEgress(userId: string, bytes: number): void {
    this.pendingEgress.set(userId, (this.pendingEgress.get(userId) ?? 0) + bytes);
  }

  /** Write the pending counts into the month of `nowMs` (kept in memory if that fails). */
  async flush(nowMs: number): Promise<void> {
    const { month } = monthOf(nowMs);
    const requests = this.pendingRequests;
    const egress = this.pendingEgress;
    if (requests.size === 0 && egress.size === 0) return;
    this.pendingRequests = new Map();
    this.pendingEgress = new Map();
    const rows: RequestCount[] = [...requests].map(([key, p]) => {
      const [backend, kind] = key.split('\0') as [Backend, RequestKind];
      return { backend, kind, requests: p.requests, bytes: p.bytes };
    });
    try {
      await this.store.addCounts(month, rows, egress);
    } catch (e) {
      for (const r of rows) this.countRequests(r.backend, r.kind, r.requests, r.bytes);
      for (const [u, b] of egress) this.countEgress(u, b);
      throw e;
    }
  }

  /**
   * Record the bytes held now. The interval since the previous sample is charged at the
   * previous sample's bytes (split at a month boundary); the hour's chart point is updated.
   */
  sample(nowMs: number, readings: readonly StorageReading[]): Promise<void> {
    return this.store.sample(nowMs, monthOf(nowMs), Math.floor(nowMs / HOUR_MS) * HOUR_MS, readings);
  }

  /** The proxy's usage (`PROXY`) or one user's, this month up to `nowMs`. */
  async usage(userId: string, nowMs: number): Promise<Usage> {
    const { month } = monthOf(nowMs);
    const tier = async (t: Tier): Promise<TierUsage> => {
      const r = await this.store.storage(month, userId, t);
      const requests = emptyRequests();
      for (const row of await this.store.requests(month, t))
        requests[row.kind] = { requests: row.requests, bytes: row.bytes };
      for (const [key, p] of this.pendingRequests) {
        const [backend, kind] = key.split('\0') as [Backend, RequestKind];
        if (backend !== t) continue;
        requests[kind] = {
          requests: requests[kind].requests + p.requests,
          bytes: requests[kind].bytes + p.bytes,
        };
      }
      return {
        byteMs: r ? r.byte_ms + r.last_bytes * Math.max(0, nowMs - r.last_ms) : 0,
        bytesNow: r?.last_bytes ?? 0,
        requests,
      };
    };
    const [fs, objects] = [await tier('fs'), await tier('objects')];
    let egressBytes = await this.store.egress(month, userId);
    for (const [u, bytes] of this.pendingEgress) if (userId === PROXY || u === userId) egressBytes += bytes;
    return { tiers: { fs, objects }, egressBytes };
  }

  /** Hourly points of bytes held since `sinceMs`, oldest first. */
  async history(
    userId: string,
    sinceMs: number,
  ): Promise<{ timeMs: number; fsBytes: number; objectsBytes: number }[]> {
    const out: { timeMs: number; fsBytes: number; objectsBytes: number }[] = [];
    for (const r of await this.store.history(userId, sinceMs)) {
      let last = out[out.length - 1];
      if (!last || last.timeMs !== r.hour_ms) {
        last = { timeMs: r.hour_ms, fsBytes: 0, objectsBytes: 0 };
        out.push(last);
      }
      if (r.tier === 'fs') last.fsBytes = r.bytes;
      else last.objectsBytes = r.bytes;
    }
    return out;
  }

  /** Drop chart points older than `beforeMs` (the monthly rows are kept). */
  prune(beforeMs: number): Promise<void> {
    return this.store.prune(beforeMs);
  }

  /** The bytes each tier holds now, per user and for the proxy (CostStore.readStorage). */
  readStorage(): Promise<StorageReading[]> {
    return this.store.readStorage();
  }
}
