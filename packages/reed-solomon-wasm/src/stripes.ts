import { InvalidParametersError, ShardSizeMismatchError } from './errors.ts';
import type { ReedSolomon } from './reed-solomon.ts';

/** Bytes in any of the shapes Node and browsers hand out: a buffer, or (async) chunks of one. */
export type ByteSource = Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>;

/** Cuts a buffer into k equal data shards of ceil(length / k) bytes, zero-padding the last. */
export function splitIntoShards(data: Uint8Array, k: number): Uint8Array[] {
  if (!Number.isInteger(k) || k < 1)
    throw new InvalidParametersError(`k must be a positive integer, got ${k}`);
  const shardSize = Math.ceil(data.length / k);
  return Array.from({ length: k }, (_, i) => {
    const shard = new Uint8Array(shardSize);
    shard.set(data.subarray(i * shardSize, Math.min(data.length, (i + 1) * shardSize)));
    return shard;
  });
}

/** Inverse of splitIntoShards: concatenates data shards and drops the padding. */
export function joinShards(dataShards: readonly Uint8Array[], length: number): Uint8Array {
  const total = dataShards.reduce((n, s) => n + s.length, 0);
  if (!Number.isInteger(length) || length < 0 || length > total) {
    throw new ShardSizeMismatchError(`cannot take ${length} bytes from ${total} bytes of shards`);
  }
  const out = new Uint8Array(length);
  let offset = 0;
  for (const shard of dataShards) {
    if (offset >= length) break;
    const take = Math.min(shard.length, length - offset);
    out.set(shard.subarray(0, take), offset);
    offset += take;
  }
  return out;
}

export interface Stripe {
  /** 0-based position of the stripe in the stream. */
  readonly index: number;
  /** Real (unpadded) data bytes in this stripe, ≤ k × shardSize. */
  readonly dataLength: number;
  /** k data shards of shardSize bytes (the last stripe zero-padded), then parity if encoded. */
  readonly shards: Uint8Array[];
}

export interface StripeOptions {
  readonly k: number;
  readonly shardSize: number;
}

async function* chunksOf(source: ByteSource): AsyncGenerator<Uint8Array, void, undefined> {
  if (source instanceof Uint8Array) {
    yield source;
    return;
  }
  if (Symbol.asyncIterator in source) {
    for await (const chunk of source) yield chunk;
    return;
  }
  for (const chunk of source) yield chunk;
}

/**
 * Streams a source as stripes of k data shards of shardSize bytes each; holds one stripe in
 * memory. An empty source yields no stripes.
 */
export async function* stripes(
  source: ByteSource,
  options: StripeOptions,
): AsyncGenerator<Stripe, void, undefined> {
  const { k, shardSize } = options;
  if (!Number.isInteger(k) || k < 1)
    throw new InvalidParametersError(`k must be a positive integer, got ${k}`);
  if (!Number.isInteger(shardSize) || shardSize < 1) {
    throw new InvalidParametersError(`shardSize must be a positive integer, got ${shardSize}`);
  }
  const stripeSize = k * shardSize;
  let buffer = new Uint8Array(stripeSize);
  let filled = 0;
  let index = 0;
  const cut = (length: number): Stripe => {
    const shards = Array.from({ length: k }, (_, i) => buffer.subarray(i * shardSize, (i + 1) * shardSize));
    const stripe = { index: index++, dataLength: length, shards };
    buffer = new Uint8Array(stripeSize);
    filled = 0;
    return stripe;
  };
  for await (const chunk of chunksOf(source)) {
    for (let offset = 0; offset < chunk.length;) {
      const take = Math.min(stripeSize - filled, chunk.length - offset);
      buffer.set(chunk.subarray(offset, offset + take), filled);
      filled += take;
      offset += take;
      if (filled === stripeSize) yield cut(stripeSize);
    }
  }
  if (filled > 0) yield cut(filled);
}

/** Streams stripes with their n − k parity shards appended (n shards per stripe). */
export async function* encodeStripes(
  rs: ReedSolomon,
  source: ByteSource,
  shardSize: number,
): AsyncGenerator<Stripe, void, undefined> {
  for await (const stripe of stripes(source, { k: rs.k, shardSize })) {
    yield { ...stripe, shards: [...stripe.shards, ...rs.encode(stripe.shards)] };
  }
}
