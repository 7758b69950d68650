/**
 * Placement and read planning for the redundant object tier (issue #17; HyRD placement,
 * HyCloud §III-D Eq. 3–5 source choice). Pure functions: no I/O, so they are
 * property-tested on their own (test/redundant-planner.test.ts).
 *
 * Used by RedundantProvider (redundant-provider.ts) for placement and source choice.
 */

/** What the tier knows about one backend. */
export interface BackendStats {
  readonly id: string;
  /** Whether the backend answered its last probe. */
  readonly available: boolean;
  /** Recent request latencies, ms (probe samples). */
  readonly latencyMs: readonly number[];
  /** Recent transfer throughputs, bytes per second (probe samples). */
  readonly throughputBps: readonly number[];
  /** Price of storage, per GB-month, from config. */
  readonly pricePerGbMonth: number;
}

/** Harmonic mean of positive samples (Eq. 4): one slow sample pulls the estimate down. 0 when none. */
export function harmonicMean(samples: readonly number[]): number {
  const positive = samples.filter((s) => Number.isFinite(s) && s > 0);
  if (positive.length === 0) return 0;
  let inv = 0;
  for (const s of positive) inv += 1 / s;
  return positive.length / inv;
}

/** Estimated seconds to fetch `bytes` from a backend: mean latency plus bytes over the harmonic-mean bandwidth. */
export function estimateSeconds(b: BackendStats, bytes: number): number {
  const bw = harmonicMean(b.throughputBps);
  if (!b.available || bw <= 0) return Number.POSITIVE_INFINITY;
  const lat = b.latencyMs.length ? b.latencyMs.reduce((a, x) => a + x, 0) / b.latencyMs.length : 0;
  return lat / 1000 + bytes / bw;
}

export type BackendClass = 'performance' | 'cost';

/**
 * Classes each backend: 'performance' when its estimated time for a probe-sized object is
 * at or below the median of all backends, 'cost' otherwise; ties broken by price (cheaper = cost).
 */
export function classify(
  backends: readonly BackendStats[],
  probeBytes = 64 * 1024,
): Map<string, BackendClass> {
  const scored = backends.map((b) => ({ b, t: estimateSeconds(b, probeBytes) }));
  const sorted = [...scored].sort((x, y) => x.t - y.t || y.b.pricePerGbMonth - x.b.pricePerGbMonth);
  const half = Math.ceil(sorted.length / 2);
  const out = new Map<string, BackendClass>();
  sorted.forEach(({ b }, i) => out.set(b.id, i < half ? 'performance' : 'cost'));
  return out;
}

export type Placement =
  | { readonly kind: 'replicated'; readonly backends: readonly string[] }
  | {
      readonly kind: 'striped';
      readonly k: number;
      readonly m: number;
      readonly backends: readonly string[];
    };

export interface PlacementOptions {
  /** Objects smaller than this are replicated; others striped. */
  readonly thresholdBytes: number;
  /** Replicas of a small object (default 2). */
  readonly replicas?: number;
  readonly k: number;
  readonly m: number;
}

/**
 * Where an object of `size` bytes goes. Small: `replicas` distinct backends, performance
 * class first (fastest first). Large: k+m distinct backends, one fragment each, cost class
 * first. Throws when there are too few backends for the layout asked for.
 */
export function place(size: number, backends: readonly BackendStats[], options: PlacementOptions): Placement {
  const { thresholdBytes, k, m } = options;
  const replicas = options.replicas ?? 2;
  if (!Number.isInteger(k) || !Number.isInteger(m) || k < 1 || m < 0)
    throw new RangeError(`bad RS(${k}, ${m})`);
  if (!Number.isInteger(replicas) || replicas < 1) throw new RangeError(`bad replica count ${replicas}`);
  const cls = classify(backends);
  const byTime = [...backends].sort(
    (a, b) => estimateSeconds(a, 65536) - estimateSeconds(b, 65536) || cmp(a.id, b.id),
  );
  if (size < thresholdBytes) {
    if (backends.length < replicas)
      throw new RangeError(`${replicas} replicas need ${replicas} backends, have ${backends.length}`);
    const perf = byTime.filter((b) => cls.get(b.id) === 'performance');
    const rest = byTime.filter((b) => cls.get(b.id) !== 'performance');
    return { kind: 'replicated', backends: [...perf, ...rest].slice(0, replicas).map((b) => b.id) };
  }
  if (backends.length < k + m)
    throw new RangeError(`RS(${k}, ${m}) needs ${k + m} backends, have ${backends.length}`);
  const cost = byTime.filter((b) => cls.get(b.id) === 'cost');
  const perf = byTime.filter((b) => cls.get(b.id) !== 'cost');
  return { kind: 'striped', k, m, backends: [...cost, ...perf].slice(0, k + m).map((b) => b.id) };
}

export interface ReadPlan {
  /** Fragment indexes (positions in placement.backends) to start with, fastest first. */
  readonly primary: readonly number[];
  /** Further fragments to start when one of the primary is slow (hedging), fastest first. */
  readonly spares: readonly number[];
}

/**
 * Which fragments to read (Eq. 3–5): the `need` fastest available holders by estimated
 * time for `bytes` each (need = k for a stripe, 1 for replicas), the other available ones
 * as hedging spares. Throws when fewer than `need` are available (data unreadable now).
 */
export function planRead(holders: readonly BackendStats[], need: number, bytes: number): ReadPlan {
  const avail = holders
    .map((b, i) => ({ i, t: estimateSeconds(b, bytes), id: b.id }))
    .filter((x) => Number.isFinite(x.t))
    .sort((a, b) => a.t - b.t || a.i - b.i);
  if (avail.length < need)
    throw new RangeError(`need ${need} fragments, only ${avail.length} backends available`);
  return { primary: avail.slice(0, need).map((x) => x.i), spares: avail.slice(need).map((x) => x.i) };
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * A data fragment is "slow" for a read when its estimated time is more than this many times
 * that of the k-th fastest available fragment (the slowest one a fastest-k choice would take).
 */
export const SLOW_FACTOR = 1.25;

export interface StripedReadPlan extends ReadPlan {
  /** The primary are exactly the k data fragments: stripes need no decoding unless a spare steps in. */
  readonly dataFirst: boolean;
}

/**
 * Which fragments a striped read starts with (Eq. 3–5, data first). `slots[i]` is the shard
 * index holders[i] keeps (< k: data). When all k data fragments are available and none is
 * slow (SLOW_FACTOR against the k-th fastest available one), the primary are the k data
 * fragments, fastest first, and the parity ones are spares (for hedging and failures): the
 * stripes are their own data shards, no decoding. Otherwise — a data fragment down or slow —
 * every available fragment is primary, fastest first (the reader spreads stripes over them
 * by rate and decodes). Throws when fewer than k are available.
 */
export function planStripedRead(
  holders: readonly BackendStats[],
  slots: readonly number[],
  k: number,
  bytes: number,
): StripedReadPlan {
  if (slots.length !== holders.length) throw new RangeError('one slot per holder');
  const plan = planRead(holders, k, bytes);
  const order = [...plan.primary, ...plan.spares];
  const data = order.filter((i) => slots[i]! < k);
  if (data.length === k && new Set(data.map((i) => slots[i])).size === k) {
    const kth = estimateSeconds(holders[plan.primary[k - 1]!]!, bytes);
    if (data.every((i) => estimateSeconds(holders[i]!, bytes) <= SLOW_FACTOR * kth))
      return { primary: data, spares: order.filter((i) => slots[i]! >= k), dataFirst: true };
  }
  return { primary: order, spares: [], dataFirst: false };
}
