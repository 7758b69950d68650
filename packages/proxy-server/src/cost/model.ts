/**
 * The bill, from what the ledger counted and the price tables (docs/cost.md). Pure: the
 * same usage and prices give the same figures.
 */
import { GIB, type PriceTable, storagePerByteMs } from './prices.ts';

export type RequestKind = 'put' | 'get' | 'delete';
export type Tier = 'fs' | 'objects';

export interface TierUsage {
  /** Bytes × milliseconds held so far this month. */
  readonly byteMs: number;
  /** Bytes held now (the projection assumes they stay until the month ends). */
  readonly bytesNow: number;
  /** Requests so far this month, by billing class, and the bytes they moved. */
  readonly requests: Readonly<Record<RequestKind, { requests: number; bytes: number }>>;
}

export interface Usage {
  readonly tiers: Readonly<Record<Tier, TierUsage>>;
  /** Bytes sent to clients so far this month. */
  readonly egressBytes: number;
}

export interface BillParts {
  readonly storage: number;
  readonly requests: number;
  readonly transfer: number;
  readonly egress: number;
  readonly plan: number;
  readonly total: number;
}

export interface Bill {
  readonly month: string;
  /** Fraction of the month elapsed, (0, 1]. */
  readonly elapsed: number;
  readonly soFar: BillParts;
  readonly projected: BillParts;
  readonly tiers: Readonly<Record<Tier, { soFar: BillParts; projected: BillParts }>>;
}

export interface MonthSpan {
  readonly month: string;
  readonly startMs: number;
  readonly endMs: number;
}

/** The UTC calendar month holding `ms`. */
export function monthOf(ms: number): MonthSpan {
  const d = new Date(ms);
  const startMs = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  const endMs = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  const month = `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
  return { month, startMs, endMs };
}

function parts(p: Omit<BillParts, 'total'>): BillParts {
  return { ...p, total: p.storage + p.requests + p.transfer + p.egress + p.plan };
}

function add(a: BillParts, b: BillParts): BillParts {
  return parts({
    storage: a.storage + b.storage,
    requests: a.requests + b.requests,
    transfer: a.transfer + b.transfer,
    egress: a.egress + b.egress,
    plan: a.plan + b.plan,
  });
}

/** Request and transfer charges of `requests` at prices `p`. */
export function requestCost(p: PriceTable, r: TierUsage['requests']): { requests: number; transfer: number } {
  return {
    requests:
      (r.put.requests * p.putPer1000 + r.get.requests * p.getPer1000 + r.delete.requests * p.deletePer1000) /
      1000,
    transfer:
      ((r.get.bytes + r.put.bytes) * p.transferPerGb +
        r.get.bytes * p.readPerGb +
        r.put.bytes * p.writePerGb) /
      GIB,
  };
}

function tierBill(p: PriceTable, u: TierUsage, scale: number, remainingMs: number, planShare: number) {
  const rc = requestCost(p, u.requests);
  const soFar = parts({
    storage: u.byteMs * storagePerByteMs(p),
    requests: rc.requests,
    transfer: rc.transfer,
    egress: 0,
    plan: p.planPerMonth * planShare,
  });
  // Requests continue at this month's rate; storage at today's bytes for the rest of the month.
  const projected = parts({
    storage: soFar.storage + u.bytesNow * remainingMs * storagePerByteMs(p),
    requests: soFar.requests * scale,
    transfer: soFar.transfer * scale,
    egress: 0,
    plan: soFar.plan,
  });
  return { soFar, projected };
}

/**
 * The month's bill so far and projected to the month's end at `nowMs`. A consumer plan's
 * flat price is charged in full (`planShare` of it: a user's share of the proxy's bytes).
 */
export function computeBill(
  usage: Usage,
  prices: Readonly<Record<Tier, PriceTable>>,
  nowMs: number,
  planShare = 1,
): Bill {
  const span = monthOf(nowMs);
  const length = span.endMs - span.startMs;
  const elapsedMs = Math.max(1, nowMs - span.startMs);
  const scale = length / elapsedMs;
  const remainingMs = span.endMs - nowMs;
  const fs = tierBill(prices.fs, usage.tiers.fs, scale, remainingMs, planShare);
  const objects = tierBill(prices.objects, usage.tiers.objects, scale, remainingMs, planShare);
  // Egress is charged at the filesystem tier's rate: the proxy sends from where it runs.
  const egressSoFar = (usage.egressBytes * prices.fs.egressPerGb) / GIB;
  const egress = (x: number): BillParts =>
    parts({ storage: 0, requests: 0, transfer: 0, egress: x, plan: 0 });
  return {
    month: span.month,
    elapsed: elapsedMs / length,
    soFar: add(add(fs.soFar, objects.soFar), egress(egressSoFar)),
    projected: add(add(fs.projected, objects.projected), egress(egressSoFar * scale)),
    tiers: { fs, objects },
  };
}
