/**
 * Writing a striped object of the redundant tier straight to its backends (issue #17).
 * Stripe by stripe, the k data shards are filled from the source, encoded RS(k, m), every
 * shard hashed, and shard i handed to fragment i's body: a stream its backend's write
 * consumes as it goes (header first — fragment format version 3 has no checksum in the
 * header, so nothing waits for the end). No spool on local disk, no part buffers: each
 * shard is produced once and sent from where it was produced.
 *
 * Memory is bounded: the stripe being filled (k × S) plus, per fragment, at most QUEUE
 * shards its backend has not taken yet; the slowest backend paces the write (it waited
 * for every backend before, too). A backend may keep a shard after asking for the next one
 * (an HTTP request queues what its socket has not sent), so a stripe's buffers are never
 * reused: each stripe is one fresh allocation, freed when its shards are sent.
 *
 * The last stripe is held back until the source has ended and its size and checksum were
 * accepted, so a backend can never receive a whole fragment of a write that is refused.
 */
import { createHash } from 'node:crypto';
import type { ReedSolomon } from '@weft/reed-solomon-wasm';
import { throwIfAborted } from '../body.ts';
import { abortError, InvalidArgumentError, TransientError } from '../errors.ts';
import { encodeFragmentHeader, FRAGMENT_HEADER_BYTES, shardListSha256 } from './fragment.ts';

/** Shards a fragment's body may hold that its backend has not taken yet. */
export const FRAGMENT_QUEUE = 2;

export interface EncodedObject {
  readonly k: number;
  readonly m: number;
  readonly shardBytes: number;
  readonly size: number;
  /** SHA-256 (hex) of the object. */
  readonly sha256: string;
  /** SHA-256 of every shard, stripe-major. */
  readonly shardSha: Buffer;
  /** Per fragment: its checksum as the placement store records it (SHA-256 of its shard SHA-256s, hex). */
  readonly fragmentSha: readonly string[];
}

interface Channel {
  readonly queue: Uint8Array[];
  /** Every shard is queued (the consumer ends when the queue is empty). */
  ended: boolean;
  /** Its write is over (taken all, failed or never started): nothing more is queued for it. */
  closed: boolean;
  failure?: unknown;
  wake?: () => void;
}

/**
 * One striped write: `body(i)` is fragment i's body for its backend's write, `run` encodes
 * the source into them. Give the writes `signal`: it fires when the write is refused or
 * fails (bad size or checksum, the source failed, too few fragments still being written),
 * so a backend's failed write can tell an abandoned write from its own failure.
 */
export class StripeWriter {
  readonly k: number;
  readonly m: number;
  private readonly n: number;
  private readonly channels: Channel[];
  private readonly ac = new AbortController();
  private readonly onOuterAbort: () => void;
  private space?: () => void;

  constructor(
    private readonly rs: ReedSolomon,
    readonly shardBytes: number,
    /** The object's declared size (headers carry it; the source must match). */
    readonly size: number,
    private readonly outer?: AbortSignal,
  ) {
    this.k = rs.k;
    this.n = rs.n;
    this.m = this.n - this.k;
    this.channels = Array.from({ length: this.n }, () => ({ queue: [], ended: false, closed: false }));
    for (let i = 0; i < this.n; i++) {
      this.channels[i]!.queue.push(
        encodeFragmentHeader({ k: this.k, m: this.m, index: i, shardBytes, objectSize: size }),
      );
    }
    this.onOuterAbort = () => this.fail(abortError(outer!));
    outer?.addEventListener('abort', this.onOuterAbort, { once: true });
  }

  get signal(): AbortSignal {
    return this.ac.signal;
  }

  /** Bytes of every fragment object: header and one shard per stripe. */
  get fragmentBytes(): number {
    return (
      FRAGMENT_HEADER_BYTES + Math.max(1, Math.ceil(this.size / (this.k * this.shardBytes))) * this.shardBytes
    );
  }

  /** Fragment `index`'s body (one consumer). */
  async *body(index: number): AsyncGenerator<Uint8Array> {
    const ch = this.channels[index]!;
    for (;;) {
      if (ch.failure !== undefined) throw ch.failure;
      const chunk = ch.queue.shift();
      if (chunk) {
        this.space?.();
        yield chunk;
        continue;
      }
      if (ch.ended) return;
      await new Promise<void>((resolve) => (ch.wake = resolve));
      ch.wake = undefined;
    }
  }

  /** Fragment `index`'s write is over, whatever its outcome: nothing more is kept for it. */
  close(index: number): void {
    const ch = this.channels[index]!;
    ch.closed = true;
    ch.queue.length = 0;
    if (!ch.ended) ch.failure ??= new Error('fragment write ended');
    ch.wake?.();
    this.space?.();
  }

  private fail(e: unknown): void {
    if (!this.ac.signal.aborted) this.ac.abort(e);
    for (const ch of this.channels) {
      if (ch.ended) continue;
      ch.failure ??= e;
      ch.queue.length = 0;
      ch.wake?.();
    }
    this.space?.();
  }

  /**
   * Encode `source` into the fragments' bodies. `check(size, sha256Hex)` runs once the
   * source has ended, before the last stripe is released; it throws to refuse the write.
   */
  async run(
    source: AsyncIterable<Uint8Array>,
    check: (size: number, sha256Hex: string) => void,
  ): Promise<EncodedObject> {
    const { k, n, shardBytes } = this;
    const whole = createHash('sha256');
    const shardSha: Buffer[] = [];
    const cap = k * shardBytes;
    let stripe = Buffer.allocUnsafe(n * shardBytes);
    let filled = 0;
    let size = 0;
    let stripes = 0;
    const flush = async (): Promise<void> => {
      stripe.fill(0, filled, cap);
      const shards = Array.from({ length: n }, (_, i) =>
        stripe.subarray(i * shardBytes, (i + 1) * shardBytes),
      );
      this.rs.encodeInto(shards.slice(0, k), shards.slice(k));
      for (let i = 0; i < n; i++) shardSha.push(createHash('sha256').update(shards[i]!).digest());
      stripes += 1;
      for (let i = 0; i < n; i++) {
        const ch = this.channels[i]!;
        if (ch.closed || ch.failure !== undefined) continue;
        ch.queue.push(shards[i]!);
        ch.wake?.();
      }
      stripe = Buffer.allocUnsafe(n * shardBytes);
      filled = 0;
      await this.roomOrFail();
    };
    try {
      for await (const chunk of source) {
        throwIfAborted(this.ac.signal);
        whole.update(chunk);
        size += chunk.byteLength;
        if (size > this.size) throw new InvalidArgumentError(`expected ${this.size} bytes, received more`);
        for (let at = 0; at < chunk.byteLength;) {
          // A full stripe is sent only once more bytes come: the last one waits for check().
          if (filled === cap) await flush();
          const take = Math.min(cap - filled, chunk.byteLength - at);
          stripe.set(chunk.subarray(at, at + take), filled);
          filled += take;
          at += take;
        }
      }
      throwIfAborted(this.ac.signal);
      const sha256 = whole.digest('hex');
      check(size, sha256);
      // The last, padded stripe; an empty object still has one (all-zero) stripe.
      if (filled > 0 || stripes === 0) await flush();
      for (const ch of this.channels) {
        ch.ended = true;
        ch.wake?.();
      }
      const all = Buffer.concat(shardSha);
      return {
        k,
        m: this.m,
        shardBytes,
        size,
        sha256,
        shardSha: all,
        fragmentSha: Array.from({ length: n }, (_, i) => shardListSha256(all, n, i).toString('hex')),
      };
    } catch (e) {
      this.fail(e);
      throw e;
    } finally {
      this.outer?.removeEventListener('abort', this.onOuterAbort);
    }
  }

  /** Wait until no fragment still being written holds QUEUE shards; fail when fewer than k are. */
  private async roomOrFail(): Promise<void> {
    for (;;) {
      throwIfAborted(this.ac.signal);
      const open = this.channels.filter((ch) => !ch.closed && ch.failure === undefined);
      if (open.length < this.k)
        throw new TransientError(
          `redundant: only ${open.length} of the ${this.k} fragments needed are being written`,
        );
      if (open.every((ch) => ch.queue.length < FRAGMENT_QUEUE)) return;
      await new Promise<void>((resolve) => (this.space = resolve));
      this.space = undefined;
    }
  }
}
