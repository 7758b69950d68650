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
import { encodeStripes, type ReedSolomon } from '@weft/reed-solomon-wasm';
import { rechunk, throwIfAborted } from '../body.ts';
import { abortError, TransientError } from '../errors.ts';
import type { Provider } from '../provider.ts';
import { encodeFragmentHeader, FRAGMENT_HEADER_BYTES, type FragmentHeader } from './fragment.ts';

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

/** Encode `source` (exactly what is to be stored) into fragment files under `dir`. */
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
  async function* counted(): AsyncIterable<Uint8Array> {
    for await (const chunk of source) {
      throwIfAborted(signal);
      whole.update(chunk);
      size += chunk.byteLength;
      yield chunk;
    }
  }
  const files = Array.from({ length: n }, (_, i) => nodePath.join(dir, `fragment.${i}`));
  const handles = await Promise.all(files.map((f) => fsp.open(f, 'w')));
  const hashes = files.map(() => createHash('sha256'));
  const shardSha: Buffer[] = [];
  let stripes = 0;
  try {
    for await (const stripe of encodeStripes(rs, counted(), shardBytes)) {
      stripes += 1;
      for (let i = 0; i < n; i++) {
        const shard = stripe.shards[i]!;
        hashes[i]!.update(shard);
        shardSha.push(createHash('sha256').update(shard).digest());
        await handles[i]!.write(shard);
      }
    }
    if (stripes === 0) {
      // An empty object still has one (all-zero) stripe, so every fragment has a payload.
      const zero = Buffer.alloc(shardBytes);
      const parity = rs.encode(Array.from({ length: k }, () => zero));
      for (let i = 0; i < n; i++) {
        const shard = i < k ? zero : parity[i - k]!;
        hashes[i]!.update(shard);
        shardSha.push(createHash('sha256').update(shard).digest());
        await handles[i]!.write(shard);
      }
    }
  } finally {
    await Promise.all(handles.map((h) => h.close()));
  }
  const m = n - k;
  const fragments = files.map((file, index) => {
    const digest = hashes[index]!.digest();
    const h: FragmentHeader = { k, m, index, shardBytes, objectSize: size, payloadSha256: digest };
    return { file, header: encodeFragmentHeader(h), sha256: digest.toString('hex') };
  });
  return {
    k,
    m,
    shardBytes,
    size,
    sha256: whole.digest('hex'),
    shardSha: Buffer.concat(shardSha),
    fragments,
  };
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

/** Shards each fragment reader keeps requested ahead of the stripe being decoded. */
export const READ_AHEAD_SHARDS = 2;

export class ShardMismatchError extends Error {
  override name = 'ShardMismatchError';
}

/** Reads shards of one fragment, stripe after stripe, from a range request; one shard read ahead. */
class FragmentCursor {
  private readonly ac = new AbortController();
  private it: AsyncIterator<Buffer> | undefined;
  /** Shards requested ahead, in stripe order; fetched one after another from the stream. */
  private readonly queue: Promise<Buffer>[] = [];
  private tail: Promise<unknown> = Promise.resolve();
  private queued: number;
  private cancelled = false;
  next: number;

  constructor(
    readonly src: FragmentSource,
    private readonly obj: StripedObject,
    from: number,
    private readonly to: number,
    private readonly hooks: StripeReadHooks,
    outer: AbortSignal | undefined,
    /** Shards read ahead of the one asked for (memory: this many shards per fragment). */
    private readonly depth = READ_AHEAD_SHARDS,
  ) {
    this.next = from;
    this.queued = from;
    outer?.addEventListener('abort', () => this.cancel(), { once: true });
  }

  private fill(): void {
    while (!this.cancelled && this.queued <= this.to && this.queue.length < this.depth) {
      const stripe = this.queued++;
      const p = this.tail.then(() => this.fetch(stripe));
      p.catch(() => undefined);
      this.tail = p.catch(() => undefined);
      this.queue.push(p);
    }
  }

  /** The shard of stripe `this.next`; keeps up to `depth` more being read behind it. */
  take(): Promise<Buffer> {
    this.fill();
    const p = this.queue.shift()!;
    return p.then((buf) => {
      this.next += 1;
      this.fill();
      return buf;
    });
  }

  private async fetch(stripe: number): Promise<Buffer> {
    const { shardBytes: s, k, m } = this.obj;
    const started = Date.now();
    if (!this.it) {
      const stream = await this.src.provider.read(this.src.key, {
        offset: FRAGMENT_HEADER_BYTES + stripe * s,
        length: (this.to - stripe + 1) * s,
        signal: this.ac.signal,
      });
      this.it = rechunk(stream, s)[Symbol.asyncIterator]();
    }
    const r = await this.it.next();
    if (this.cancelled) throw new Error('fragment read dropped');
    if (r.done || r.value.byteLength !== s)
      throw new ShardMismatchError(`${this.src.key}: fragment ends before stripe ${stripe}`);
    const want = this.obj.shardSha.subarray(
      (stripe * (k + m) + this.src.index) * 32,
      (stripe * (k + m) + this.src.index + 1) * 32,
    );
    const got = createHash('sha256').update(r.value).digest();
    if (!got.equals(want))
      throw new ShardMismatchError(`${this.src.key}: shard of stripe ${stripe} does not match its checksum`);
    this.hooks.onSample?.(this.src, s, Date.now() - started);
    return r.value;
  }

  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.ac.abort(new Error('fragment read dropped'));
    const it = this.it;
    if (it?.return) void Promise.resolve(it.return()).catch(() => undefined);
  }
}

export interface StripeReadOptions {
  /** Start a spare when a stripe's k shards are not all in after this long. */
  readonly hedgeAfterMs: number;
  readonly signal?: AbortSignal;
  readonly hooks?: StripeReadHooks;
}

/**
 * Yields, for each stripe in [from, to], k + m slots holding at least k verified shards
 * (null for the ones not read). `sources` are the available fragments, fastest first:
 * the first k start, the rest are spares.
 */
export async function* readStripes(
  obj: StripedObject,
  sources: readonly FragmentSource[],
  from: number,
  to: number,
  options: StripeReadOptions,
): AsyncGenerator<(Buffer | null)[]> {
  const { k, m } = obj;
  const hooks = options.hooks ?? {};
  const spares = [...sources];
  const active: FragmentCursor[] = [];
  const start = (at: number): boolean => {
    const src = spares.shift();
    if (!src) return false;
    active.push(new FragmentCursor(src, obj, at, to, hooks, options.signal));
    return true;
  };
  if (sources.length < k)
    throw new TransientError(`redundant: ${sources.length} of the ${k} fragments needed are available`);
  for (let i = 0; i < k; i++) start(from);
  try {
    for (let s = from; s <= to; s++) {
      throwIfAborted(options.signal);
      const got = new Map<number, Buffer>();
      type Outcome = { c: FragmentCursor; buf?: Buffer; err?: unknown } | { timeout: true };
      const inflight = new Map<FragmentCursor, Promise<Outcome>>();
      const launch = (c: FragmentCursor): void => {
        inflight.set(
          c,
          c.take().then(
            (buf) => ({ c, buf }),
            (err: unknown) => ({ c, err }),
          ),
        );
      };
      for (const c of active) launch(c);
      let hedged = false;
      while (got.size < k) {
        let timer: NodeJS.Timeout | undefined;
        const waits: Promise<Outcome>[] = [...inflight.values()];
        if (!hedged && spares.length > 0)
          waits.push(
            new Promise((r) => (timer = setTimeout(() => r({ timeout: true }), options.hedgeAfterMs))),
          );
        if (waits.length === 0)
          throw new TransientError(`redundant: fewer than ${k} fragments of stripe ${s} could be read`);
        const out = await Promise.race(waits);
        clearTimeout(timer);
        if ('timeout' in out) {
          hedged = true;
          if (start(s)) {
            hooks.onHedge?.(active.at(-1)!.src);
            launch(active.at(-1)!);
          }
          continue;
        }
        inflight.delete(out.c);
        if (out.buf) {
          got.set(out.c.src.index, out.buf);
          continue;
        }
        if (options.signal?.aborted) throw abortError(options.signal);
        out.c.cancel();
        active.splice(active.indexOf(out.c), 1);
        hooks.onFailure?.(out.c.src, out.err, out.err instanceof ShardMismatchError);
        if (start(s)) launch(active.at(-1)!);
      }
      // The laggards: still reading this stripe when k shards were in. Drop them; their
      // backends go to the back of the spares.
      for (const c of inflight.keys()) {
        c.cancel();
        active.splice(active.indexOf(c), 1);
        spares.push(c.src);
      }
      const slots: (Buffer | null)[] = Array.from({ length: k + m }, (_, i) => got.get(i) ?? null);
      yield slots;
    }
  } finally {
    for (const c of active) c.cancel();
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

/** The header a fragment must carry, from the placement store's record. */
export function expectedHeader(obj: StripedObject, index: number, payloadSha256Hex: string): Uint8Array {
  return encodeFragmentHeader({
    k: obj.k,
    m: obj.m,
    index,
    shardBytes: obj.shardBytes,
    objectSize: obj.size,
    payloadSha256: Buffer.from(payloadSha256Hex, 'hex'),
  });
}
