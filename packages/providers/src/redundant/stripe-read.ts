/**
 * Reading stripes of a striped object back from its fragments on the backends — the k
 * fastest in parallel, hedged: when a fragment is late a spare starts, and once k shards of
 * a stripe are in, the one still missing (the laggard) is dropped. Every shard read is
 * checked against its SHA-256 from the placement store; a bad or broken fragment counts as
 * failed and a spare takes its place. (The writing side, encoding and spooling: striping.ts.)
 */
import { createHash } from 'node:crypto';
import type { ReedSolomon } from '@weft/reed-solomon-wasm';
import { throwIfAborted } from '../body.ts';
import { TransientError } from '../errors.ts';
import type { Provider } from '../provider.ts';
import { FRAGMENT_HEADER_BYTES } from './fragment.ts';

/** The stored shape of a striped object, as the reader needs it. */
export interface StripedObject {
  readonly k: number;
  readonly m: number;
  readonly shardBytes: number;
  readonly size: number;
  readonly shardSha: Buffer;
}

/**
 * One shard as read: its bytes in order, in the pieces the backend's stream delivered them
 * (no copy into a shard-sized buffer: that was a fresh 1 MiB allocation and a pass over
 * every byte per shard, issue #17). `joinShard` makes it one buffer when decoding needs one.
 */
export type Shard = readonly Uint8Array[];

/** The shard as one buffer of `size` bytes (its only piece when it arrived in one). */
export function joinShard(shard: Shard, size: number): Uint8Array {
  if (shard.length === 1 && shard[0]!.byteLength === size) return shard[0]!;
  return Buffer.concat(shard, size);
}

/** The pieces of `shard` covering bytes [from, to) of it, without copying. */
export function* shardRange(shard: Shard, from: number, to: number): Generator<Uint8Array> {
  let at = 0;
  for (const piece of shard) {
    const end = at + piece.byteLength;
    if (end > from && at < to)
      yield from <= at && end <= to ? piece : piece.subarray(Math.max(from, at) - at, Math.min(to, end) - at);
    at = end;
    if (at >= to) return;
  }
}

export interface FragmentSource {
  readonly index: number;
  readonly backend: string;
  readonly provider: Provider;
  readonly key: string;
}

export interface StripeReadHooks {
  /** A fragment failed (unreachable, truncated, or a shard did not match its checksum). */
  readonly onFailure?: (src: FragmentSource, error: unknown, corrupt: boolean) => void;
  /** Bytes received from a fragment and the time they took (for the bandwidth estimate). */
  readonly onSample?: (src: FragmentSource, bytes: number, ms: number) => void;
  /** A spare was started because a fragment was late (counts hedged reads). */
  readonly onHedge?: (src: FragmentSource) => void;
}

/**
 * Range requests each fragment source keeps in flight, and the consecutive shards one asks
 * for at most: enough to hide a source's per-request time (36 ms a GET from s3proxy on the
 * loaded bench machine; one 1 MiB GET at a time moved half of what the link carried), and
 * few requests per byte: the AWS SDK costs about 1 ms of CPU a request beside ≈ 1.5 ms per
 * MiB of body (four-shard runs read 15 % more per CPU-second than two-shard runs over S3,
 * eight no more than four; issue #17).
 */
export const READ_DEPTH = 2;
export const READ_RUN = 4;
/** Data bytes the stripes ahead of the one being decoded may hold at most (≥ 3 stripes). */
export const READ_WINDOW_BYTES = 32 * 1024 * 1024;
/** A laggard sits out this many windows of stripes, then takes part again. */
const BENCH_WINDOWS = 4;
/**
 * A data-first read (`active` = k) compares its data fragments' rates once each has sent
 * this many shards: when the slowest takes over SLOW_DATA times as long a shard as the
 * fastest (and SLOW_DATA_MS more), every fragment
 * takes part from then on (the estimates it started from were wrong: e.g. learnt from
 * unshaped uploads; a parity fragment's rate is not learnt while only data is read). Above
 * planner.ts's SLOW_FACTOR (against the k-th fastest): rates measured while requests
 * overlap are noisier than the estimates.
 */
const SLOW_DATA_AFTER = 16;
const SLOW_DATA = 1.5;
/** …and at least this much slower per shard (ms): sub-millisecond timings are noise. */
const SLOW_DATA_MS = 5;

export class ShardMismatchError extends Error {
  override name = 'ShardMismatchError';
}

export interface StripeReadOptions {
  /** Let one more fragment take the stripe being decoded when it is not complete after this long. */
  readonly hedgeAfterMs: number;
  /**
   * How many of the sources (the first) read from the start; the rest are spares, started
   * for a hedge or in place of one that fails. Default k + m (every source reads, by rate);
   * k when the first k are the data fragments (planner.ts `planStripedRead`).
   */
  readonly active?: number;
  readonly signal?: AbortSignal;
  readonly hooks?: StripeReadHooks;
}

interface Source {
  readonly src: FragmentSource;
  readonly inflight: Set<Claim>;
  /** When its last shard arrived (its next sample starts there when requests overlap). */
  lastDone: number;
  /** Shards it has sent in this read, and the time they took (its samples summed). */
  shards: number;
  busyMs: number;
}
/** One range request: shards of consecutive stripes of one fragment. */
interface Claim {
  readonly w: Source;
  /** Stripes whose shard has not arrived yet. */
  readonly pending: Set<number>;
  readonly ac: AbortController;
}
interface Stripe {
  readonly got: Map<number, Shard>;
  readonly claims: Set<Claim>;
  /** Shards it may have read or asked for at once: k, one more per hedge. */
  allowance: number;
}

/**
 * Yields, for each stripe in [from, to], k + m slots holding at least k verified shards
 * (null for the ones not read). `sources` are the available fragments, fastest first.
 *
 * Every source takes part (HyCloud Eq. 3–5: work in proportion to bandwidth): each keeps
 * READ_DEPTH range requests in flight, each for up to READ_RUN consecutive stripes from the
 * lowest one of the window ahead that still needs a shard (a stripe is never asked for more
 * than k at once), so a fast source reads more stripes than a slow one and the read moves
 * at about the sum of their rates rather than k times the slowest of k chosen. When the
 * stripe being decoded is not complete after `hedgeAfterMs`, one more source may take it
 * (a hedged read); once it is complete, a source still reading it (the laggard) is dropped
 * for the next few windows of stripes (BENCH_WINDOWS), then takes part again; sources
 * beyond the first k + m are spares. A source that fails or
 * sends a bad shard is dropped and a spare takes its place.
 */
export async function* readStripes(
  obj: StripedObject,
  sources: readonly FragmentSource[],
  from: number,
  to: number,
  options: StripeReadOptions,
): AsyncGenerator<(Shard | null)[]> {
  const { k, m, shardBytes } = obj;
  const hooks = options.hooks ?? {};
  if (sources.length < k)
    throw new TransientError(`redundant: ${sources.length} of the ${k} fragments needed are available`);
  // Room for every source's requests, within the byte bound.
  const window = Math.max(
    3,
    Math.min(
      Math.ceil(((k + m) * READ_DEPTH * READ_RUN) / k) + 2,
      Math.floor(READ_WINDOW_BYTES / (k * shardBytes)),
    ),
  );
  const all: Source[] = sources.map((src) => ({
    src,
    inflight: new Set(),
    lastDone: 0,
    shards: 0,
    busyMs: 0,
  }));
  const first = Math.max(k, Math.min(k + m, options.active ?? k + m));
  const active = all.slice(0, first);
  const spares = all.slice(first);
  let dataFirst = first === k && spares.length > 0 && active.every((w) => w.src.index < k);
  /** Laggards: out until the read reaches stripe `until` (a slow start, not a dead source). */
  const benched: { w: Source; until: number }[] = [];
  const stripes = new Map<number, Stripe>();
  let head = from;
  let wake: () => void = () => undefined;
  const stripeAt = (s: number): Stripe => {
    let st = stripes.get(s);
    if (!st) stripes.set(s, (st = { got: new Map(), claims: new Set(), allowance: k }));
    return st;
  };
  const release = (c: Claim): void => {
    c.w.inflight.delete(c);
    for (const s of c.pending) stripes.get(s)?.claims.delete(c);
    c.ac.abort(new Error('fragment read dropped'));
  };
  const retire = (w: Source): void => {
    for (const c of [...w.inflight]) release(c);
    const i = active.indexOf(w);
    if (i >= 0) active.splice(i, 1);
  };
  const fetchRun = async (c: Claim, first: number, n: number, signal: AbortSignal): Promise<void> => {
    const { src } = c.w;
    const started = performance.now();
    const stream = await src.provider.read(src.key, {
      offset: FRAGMENT_HEADER_BYTES + first * shardBytes,
      length: n * shardBytes,
      signal,
    });
    const it = stream[Symbol.asyncIterator]();
    let s = first;
    let pieces: Uint8Array[] = [];
    let held = 0;
    let hash = createHash('sha256');
    try {
      // Read on to the stream's end: returning early from an HTTP body that has not
      // signalled its end aborts the request and closes its connection (issue #17: every
      // range request paid a new connection — a TLS handshake on a real cloud).
      for (let r = await it.next(); !r.done; r = await it.next()) {
        if (!c.w.inflight.has(c)) return;
        const chunk = r.value;
        for (let at = 0; at < chunk.byteLength;) {
          if (s === first + n) throw new ShardMismatchError(`${src.key}: range longer than asked`);
          const take = Math.min(shardBytes - held, chunk.byteLength - at);
          const piece = take === chunk.byteLength ? chunk : chunk.subarray(at, at + take);
          hash.update(piece);
          pieces.push(piece);
          held += take;
          at += take;
          if (held < shardBytes) continue;
          const sum = (s * (k + m) + src.index) * 32;
          if (!hash.digest().equals(obj.shardSha.subarray(sum, sum + 32)))
            throw new ShardMismatchError(`${src.key}: shard of stripe ${s} does not match its checksum`);
          const now = performance.now();
          const ms = now - Math.max(started, c.w.lastDone);
          hooks.onSample?.(src, shardBytes, ms);
          c.w.lastDone = now;
          c.w.shards += 1;
          c.w.busyMs += ms;
          c.pending.delete(s);
          const st = stripes.get(s);
          st?.claims.delete(c);
          st?.got.set(src.index, pieces);
          wake();
          s += 1;
          pieces = [];
          held = 0;
          hash = createHash('sha256');
        }
      }
      if (s < first + n) throw new ShardMismatchError(`${src.key}: fragment ends before stripe ${s}`);
    } finally {
      if (it.return) void Promise.resolve(it.return()).catch(() => undefined);
    }
  };
  const claim = (w: Source, first: number, n: number): void => {
    const c: Claim = { w, pending: new Set(), ac: new AbortController() };
    for (let s = first; s < first + n; s++) {
      const st = stripeAt(s);
      if (st.got.size + st.claims.size >= k) hooks.onHedge?.(w.src); // beyond k: a hedge
      st.claims.add(c);
      c.pending.add(s);
    }
    w.inflight.add(c);
    const signal = options.signal ? AbortSignal.any([c.ac.signal, options.signal]) : c.ac.signal;
    fetchRun(c, first, n, signal).then(
      () => {
        if (w.inflight.delete(c)) wake();
      },
      (err: unknown) => {
        if (!w.inflight.has(c)) return;
        release(c);
        if (!options.signal?.aborted) {
          retire(w);
          hooks.onFailure?.(w.src, err, err instanceof ShardMismatchError);
          const spare = spares.shift();
          if (spare) active.push(spare);
        }
        wake();
      },
    );
  };
  const holds = (st: Stripe, w: Source): boolean =>
    st.got.has(w.src.index) || [...st.claims].some((c) => c.w === w);
  const needs = (s: number, w: Source): boolean => {
    const st = stripeAt(s);
    return st.got.size + st.claims.size < st.allowance && !holds(st, w);
  };
  /** Let every source with room take a run from the lowest stripe of the window it can help. */
  const pump = (): void => {
    const last = Math.min(to, head + window - 1);
    for (const w of active) {
      for (let s = head; s <= last && w.inflight.size < READ_DEPTH; s++) {
        if (!needs(s, w)) continue;
        let n = 1;
        while (n < READ_RUN && s + n <= last && needs(s + n, w)) n++;
        claim(w, s, n);
        s += n - 1;
      }
    }
    // The stripe being decoded still short (a hedge, or a failed source): beyond the depth.
    const st = stripeAt(head);
    if (st.got.size + st.claims.size < st.allowance) {
      const w = active.find((x) => !holds(st, x)) ?? spares.shift();
      if (w) {
        if (!active.includes(w)) active.push(w);
        claim(w, head, 1);
      }
    }
  };
  try {
    let headSince = performance.now();
    while (head <= to) {
      throwIfAborted(options.signal);
      const st = stripeAt(head);
      if (st.got.size >= k) {
        for (const c of [...st.claims]) {
          // The laggard: still reading a stripe that is complete. Dropped for a while.
          if (active.length > k) {
            retire(c.w);
            benched.push({ w: c.w, until: head + BENCH_WINDOWS * window });
          } else release(c);
        }
        for (const b of benched.filter((x) => x.until <= head + 1)) {
          benched.splice(benched.indexOf(b), 1);
          if (active.length < k + m) active.push(b.w);
          else spares.push(b.w);
        }
        if (dataFirst && active.every((w) => w.shards >= SLOW_DATA_AFTER)) {
          const perShard = active.map((w) => w.busyMs / w.shards);
          const slowest = Math.max(...perShard);
          const fastest = Math.min(...perShard);
          if (slowest > SLOW_DATA * fastest && slowest - fastest >= SLOW_DATA_MS) {
            dataFirst = false;
            active.push(...spares.splice(0));
          }
        }
        stripes.delete(head);
        yield Array.from({ length: k + m }, (_, i) => st.got.get(i) ?? null);
        head += 1;
        headSince = performance.now();
        continue;
      }
      pump();
      if (!active.some((w) => w.inflight.size > 0)) {
        // Nothing in flight and the stripe not complete: only a spare can still help.
        const spare = spares.shift() ?? benched.shift()?.w;
        if (!spare)
          throw new TransientError(`redundant: fewer than ${k} fragments of stripe ${head} could be read`);
        active.push(spare);
        continue;
      }
      const hedgeIn = st.allowance < k + m ? headSince + options.hedgeAfterMs - performance.now() : Infinity;
      if (hedgeIn <= 0) {
        st.allowance += 1;
        headSince = performance.now();
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = Number.isFinite(hedgeIn) ? setTimeout(done, hedgeIn) : undefined;
        const onAbort = (): void => done();
        options.signal?.addEventListener('abort', onAbort, { once: true });
        function done(): void {
          clearTimeout(timer);
          options.signal?.removeEventListener('abort', onAbort);
          wake = () => undefined;
          resolve();
        }
        wake = done;
      });
    }
  } finally {
    for (const w of all) for (const c of [...w.inflight]) release(c);
  }
}

/** Rebuild every slot of a stripe from at least k of them (data shards first, then parity). */
export function completeStripe(rs: ReedSolomon, slots: readonly (Shard | null)[]): Uint8Array[] {
  const size = shardSize(slots);
  const joined = slots.map((x) => (x === null ? null : joinShard(x, size)));
  if (joined.every((x) => x !== null)) return joined;
  return rs.reconstruct(joined);
}

/** Only the data shards of a stripe, reconstructing the missing ones when needed. */
export function dataOf(rs: ReedSolomon, slots: readonly (Shard | null)[]): Shard[] {
  const data = slots.slice(0, rs.k);
  if (data.every((x) => x !== null)) return data;
  const size = shardSize(slots);
  const rebuilt = rs.reconstruct(slots.map((x) => (x === null ? null : joinShard(x, size))));
  return data.map((x, i) => x ?? [rebuilt[i]!]);
}

function shardSize(slots: readonly (Shard | null)[]): number {
  const one = slots.find((x) => x !== null);
  return one ? one.reduce((n, piece) => n + piece.byteLength, 0) : 0;
}
