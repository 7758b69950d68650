/**
 * Striped objects of the redundant tier: encoding a byte stream into k + m fragment files
 * (spooled on local disk, so memory holds one stripe), and reading stripes back from the
 * fragments on the backends — the k fastest in parallel, hedged: when a fragment is late a
 * spare starts, and once k shards of a stripe are in, the one still missing (the laggard)
 * is dropped. Every shard read is checked against its SHA-256 from the placement store; a
 * bad or broken fragment counts as failed and a spare takes its place.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { ReedSolomon } from '@weft/reed-solomon-wasm';
import { rechunk, throwIfAborted } from '../body.ts';
import { TransientError } from '../errors.ts';
import type { Provider } from '../provider.ts';
import {
  encodeFragmentHeader,
  FRAGMENT_HEADER_BYTES,
  type FragmentHeader,
  shardListSha256,
} from './fragment.ts';

export interface SpooledObject {
  readonly k: number;
  readonly m: number;
  readonly shardBytes: number;
  readonly size: number;
  readonly sha256: string;
  /** SHA-256 of every shard, stripe-major. */
  readonly shardSha: Buffer;
  /** Per fragment: its file on disk (payload only) and its header. */
  readonly fragments: readonly { file: string; header: Uint8Array; sha256: string }[];
}

/** Shard size for an object of `size` bytes: as few stripes as `maxShard` allows, least padding. */
export function shardBytesFor(size: number, k: number, maxShard: number): number {
  const stripes = Math.max(1, Math.ceil(size / (k * maxShard)));
  return Math.max(1, Math.ceil(size / (k * stripes)));
}

export function stripeCount(size: number, k: number, shardBytes: number): number {
  return Math.max(1, Math.ceil(size / (k * shardBytes)));
}

/**
 * Encode `source` (exactly what is to be stored) into fragment files under `dir`. One
 * stripe's buffers serve every stripe: each is hashed and written out before the next is
 * filled (fresh buffers per stripe cost page faults and garbage collection, issue #17).
 */
export async function encodeToSpool(
  rs: ReedSolomon,
  source: AsyncIterable<Uint8Array>,
  shardBytes: number,
  dir: string,
  signal?: AbortSignal,
): Promise<SpooledObject> {
  const k = rs.k;
  const n = rs.n;
  const whole = createHash('sha256');
  let size = 0;
  const files = Array.from({ length: n }, (_, i) => nodePath.join(dir, `fragment.${i}`));
  const handles = await Promise.all(files.map((f) => fsp.open(f, 'w')));
  const shardSha: Buffer[] = [];
  const data = Buffer.allocUnsafe(k * shardBytes);
  const shards = Array.from({ length: n }, (_, i) =>
    i < k ? data.subarray(i * shardBytes, (i + 1) * shardBytes) : Buffer.allocUnsafe(shardBytes),
  );
  let filled = 0;
  let stripes = 0;
  /** Encode, hash and write the stripe in `data` (zero-padded after `filled`). */
  const flush = async (): Promise<void> => {
    data.fill(0, filled);
    rs.encodeInto(shards.slice(0, k), shards.slice(k));
    for (let i = 0; i < n; i++) shardSha.push(createHash('sha256').update(shards[i]!).digest());
    await Promise.all(shards.map((shard, i) => writeAll(handles[i]!, shard)));
    stripes += 1;
    filled = 0;
  };
  try {
    for await (const chunk of source) {
      throwIfAborted(signal);
      whole.update(chunk);
      size += chunk.byteLength;
      for (let at = 0; at < chunk.byteLength;) {
        const take = Math.min(data.byteLength - filled, chunk.byteLength - at);
        data.set(chunk.subarray(at, at + take), filled);
        filled += take;
        at += take;
        if (filled === data.byteLength) await flush();
      }
    }
    // The last, padded stripe; an empty object still has one (all-zero) stripe, so every
    // fragment has a payload.
    if (filled > 0 || stripes === 0) await flush();
  } finally {
    await Promise.all(handles.map((h) => h.close()));
  }
  const m = n - k;
  const allShardSha = Buffer.concat(shardSha);
  // Version 2: a fragment's checksum is over its shards' checksums, not a pass of its own.
  const fragments = files.map((file, index) => {
    const digest = shardListSha256(allShardSha, n, index);
    const h: FragmentHeader = { k, m, index, shardBytes, objectSize: size, payloadSha256: digest };
    return { file, header: encodeFragmentHeader(h), sha256: digest.toString('hex') };
  });
  return {
    k,
    m,
    shardBytes,
    size,
    sha256: whole.digest('hex'),
    shardSha: allShardSha,
    fragments,
  };
}

async function writeAll(h: fsp.FileHandle, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.byteLength;) {
    const { bytesWritten } = await h.write(bytes, at, bytes.byteLength - at);
    at += bytesWritten;
  }
}

/** A fragment object's body for upload: header, then its payload file (a factory: re-sendable). */
export function fragmentBody(header: Uint8Array, file: string): () => AsyncIterable<Uint8Array> {
  return async function* () {
    yield header;
    for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 })) yield chunk as Buffer;
  };
}

/** The stored shape of a striped object, as the reader needs it. */
export interface StripedObject {
  readonly k: number;
  readonly m: number;
  readonly shardBytes: number;
  readonly size: number;
  readonly shardSha: Buffer;
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
 * loaded bench machine; one 1 MiB GET at a time moved half of what the link carried).
 */
export const READ_DEPTH = 2;
export const READ_RUN = 2;
/** Data bytes the stripes ahead of the one being decoded may hold at most (≥ 3 stripes). */
export const READ_WINDOW_BYTES = 32 * 1024 * 1024;
/** A laggard sits out this many windows of stripes, then takes part again. */
const BENCH_WINDOWS = 4;

export class ShardMismatchError extends Error {
  override name = 'ShardMismatchError';
}

export interface StripeReadOptions {
  /** Let one more fragment take the stripe being decoded when it is not complete after this long. */
  readonly hedgeAfterMs: number;
  readonly signal?: AbortSignal;
  readonly hooks?: StripeReadHooks;
}

interface Source {
  readonly src: FragmentSource;
  readonly inflight: Set<Claim>;
  /** When its last shard arrived (its next sample starts there when requests overlap). */
  lastDone: number;
}
/** One range request: shards of consecutive stripes of one fragment. */
interface Claim {
  readonly w: Source;
  /** Stripes whose shard has not arrived yet. */
  readonly pending: Set<number>;
  readonly ac: AbortController;
}
interface Stripe {
  readonly got: Map<number, Buffer>;
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
): AsyncGenerator<(Buffer | null)[]> {
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
  const all: Source[] = sources.map((src) => ({ src, inflight: new Set(), lastDone: 0 }));
  const active = all.slice(0, k + m);
  const spares = all.slice(k + m);
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
    const it = rechunk(stream, shardBytes)[Symbol.asyncIterator]();
    try {
      for (let s = first; s < first + n; s++) {
        const r = await it.next();
        if (!c.w.inflight.has(c)) return;
        if (r.done || r.value.byteLength !== shardBytes)
          throw new ShardMismatchError(`${src.key}: fragment ends before stripe ${s}`);
        const at = (s * (k + m) + src.index) * 32;
        if (
          !createHash('sha256')
            .update(r.value)
            .digest()
            .equals(obj.shardSha.subarray(at, at + 32))
        )
          throw new ShardMismatchError(`${src.key}: shard of stripe ${s} does not match its checksum`);
        const now = performance.now();
        hooks.onSample?.(src, shardBytes, now - Math.max(started, c.w.lastDone));
        c.w.lastDone = now;
        c.pending.delete(s);
        const st = stripes.get(s);
        st?.claims.delete(c);
        st?.got.set(src.index, r.value);
        wake();
      }
      // Read on to the stream's end: returning early from an HTTP body that has not
      // signalled its end aborts the request and closes its connection (issue #17: every
      // range request paid a new connection — a TLS handshake on a real cloud).
      if (!(await it.next()).done) throw new ShardMismatchError(`${src.key}: range longer than asked`);
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
export function completeStripe(rs: ReedSolomon, slots: readonly (Buffer | null)[]): Uint8Array[] {
  if (slots.every((x) => x !== null)) return slots as Buffer[];
  return rs.reconstruct(slots);
}

/** Only the data shards of a stripe, reconstructing the missing ones when needed. */
export function dataOf(rs: ReedSolomon, slots: readonly (Buffer | null)[]): Uint8Array[] {
  const data = slots.slice(0, rs.k);
  if (data.every((x) => x !== null)) return data as Buffer[];
  return rs.reconstruct(slots).slice(0, rs.k);
}

/**
 * The fragment format version a location's recorded checksum belongs to: 2 when it is the
 * SHA-256 of the fragment's shard checksums, else 1 (the SHA-256 of its payload).
 */
export function fragmentVersion(obj: StripedObject, index: number, payloadSha256Hex: string): 1 | 2 {
  return shardListSha256(obj.shardSha, obj.k + obj.m, index).toString('hex') === payloadSha256Hex ? 2 : 1;
}

/**
 * The header a fragment must carry, from the placement store's record (of the version it
 * was written in: a rebuilt fragment keeps it, so its record stays true).
 */
export function expectedHeader(obj: StripedObject, index: number, payloadSha256Hex: string): Uint8Array {
  return encodeFragmentHeader({
    version: fragmentVersion(obj, index, payloadSha256Hex),
    k: obj.k,
    m: obj.m,
    index,
    shardBytes: obj.shardBytes,
    objectSize: obj.size,
    payloadSha256: Buffer.from(payloadSha256Hex, 'hex'),
  });
}
