/**
 * Striped objects of the redundant tier: encoding a byte stream into k + m fragment files
 * (spooled on local disk, so memory holds one stripe), and what a fragment's header must
 * say. Reading stripes back from the fragments: stripe-read.ts.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { ReedSolomon } from '@weft/reed-solomon-wasm';
import { throwIfAborted } from '../body.ts';
import { encodeFragmentHeader, type FragmentHeader, shardListSha256 } from './fragment.ts';
import type { StripedObject } from './stripe-read.ts';

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
