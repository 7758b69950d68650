/**
 * The header of a fragment object of the redundant tier (issue #17). Layout and versioning:
 * docs/formats/fragment.md. All integers little-endian, unsigned.
 */
import { createHash } from 'node:crypto';

export const FRAGMENT_MAGIC = 'WFTF';
/**
 * Written now: the header carries no payload checksum (zeros), so it can be sent before the
 * payload is encoded — a fragment streams to its backend as it is encoded, without a spool
 * (issue #17). Versions 1 (checksum over the payload bytes) and 2 (over the shard
 * checksums) are still read.
 */
export const FRAGMENT_VERSION = 3;
export type FragmentVersion = 1 | 2 | 3;
export const FRAGMENT_HEADER_BYTES = 64;

export interface FragmentHeader {
  /** 3 (written now; default), 2 or 1 (older fragments). What `payloadSha256` holds differs. */
  readonly version?: FragmentVersion;
  /** Data shards per stripe (1..255). */
  readonly k: number;
  /** Parity shards per stripe (0..255, k + m ≤ 255). */
  readonly m: number;
  /** This fragment's shard index, 0..k+m−1 (< k: data, ≥ k: parity). */
  readonly index: number;
  /** Bytes of each shard in a stripe. */
  readonly shardBytes: number;
  /** Length of the whole object (before striping). */
  readonly objectSize: number;
  /**
   * The fragment's payload checksum, 32 bytes. Version 3: none in the header (32 zero bytes;
   * omit it) — the placement store keeps it, the SHA-256 of the SHA-256s of its shards as in
   * version 2. Version 2: that checksum. Version 1: SHA-256 of the payload (every shard of
   * this index, stripe after stripe).
   */
  readonly payloadSha256?: Uint8Array;
}

export class FragmentFormatError extends Error {
  override name = 'FragmentFormatError';
}

export function encodeFragmentHeader(h: FragmentHeader): Uint8Array {
  check(h);
  const out = new Uint8Array(FRAGMENT_HEADER_BYTES);
  const v = new DataView(out.buffer);
  out.set(new TextEncoder().encode(FRAGMENT_MAGIC), 0);
  out[4] = h.version ?? FRAGMENT_VERSION;
  out[5] = h.k;
  out[6] = h.m;
  out[7] = h.index;
  v.setUint32(8, h.shardBytes, true);
  v.setBigUint64(12, BigInt(h.objectSize), true);
  if ((h.version ?? FRAGMENT_VERSION) !== 3) out.set(h.payloadSha256!, 20);
  // version 3: bytes 20..51 zero; bytes 52..59 reserved, zero
  const check4 = createHash('sha256').update(out.subarray(0, 60)).digest();
  out.set(check4.subarray(0, 4), 60);
  return out;
}

export function decodeFragmentHeader(bytes: Uint8Array): FragmentHeader {
  if (bytes.length < FRAGMENT_HEADER_BYTES)
    throw new FragmentFormatError(`fragment header: ${bytes.length} bytes, need 64`);
  const b = bytes.subarray(0, FRAGMENT_HEADER_BYTES);
  if (new TextDecoder().decode(b.subarray(0, 4)) !== FRAGMENT_MAGIC)
    throw new FragmentFormatError('fragment header: bad magic');
  const version = b[4];
  if (version !== 1 && version !== 2 && version !== 3)
    throw new FragmentFormatError(`fragment header: unknown version ${version}`);
  const sum = createHash('sha256').update(b.subarray(0, 60)).digest();
  for (let i = 0; i < 4; i++)
    if (sum[i] !== b[60 + i]) throw new FragmentFormatError('fragment header: checksum mismatch');
  for (let i = version === 3 ? 20 : 52; i < 60; i++)
    if (b[i] !== 0) throw new FragmentFormatError('fragment header: reserved bytes not zero');
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const objectSize = v.getBigUint64(12, true);
  if (objectSize > BigInt(Number.MAX_SAFE_INTEGER))
    throw new FragmentFormatError('fragment header: object size too large');
  const h: FragmentHeader = {
    version,
    k: b[5]!,
    m: b[6]!,
    index: b[7]!,
    shardBytes: v.getUint32(8, true),
    objectSize: Number(objectSize),
    ...(version === 3 ? {} : { payloadSha256: b.slice(20, 52) }),
  };
  check(h);
  return h;
}

/**
 * A version 2 fragment's payload checksum: SHA-256 of the checksums of its shards, taken
 * from `shardSha` (every shard's SHA-256, stripe-major, `n` = k + m per stripe).
 */
export function shardListSha256(shardSha: Uint8Array, n: number, index: number): Buffer {
  const h = createHash('sha256');
  for (let at = index * 32; at < shardSha.byteLength; at += n * 32) h.update(shardSha.subarray(at, at + 32));
  return h.digest();
}

function check(h: FragmentHeader): void {
  const version = h.version ?? FRAGMENT_VERSION;
  if (version !== 1 && version !== 2 && version !== 3)
    throw new FragmentFormatError(`fragment header: unknown version ${String(h.version)}`);
  if (!Number.isInteger(h.k) || h.k < 1 || !Number.isInteger(h.m) || h.m < 0 || h.k + h.m > 255)
    throw new FragmentFormatError(`fragment header: bad RS(${h.k}, ${h.m})`);
  if (!Number.isInteger(h.index) || h.index < 0 || h.index >= h.k + h.m)
    throw new FragmentFormatError(`fragment header: index ${h.index} outside 0..${h.k + h.m - 1}`);
  if (!Number.isInteger(h.shardBytes) || h.shardBytes < 1 || h.shardBytes > 0xffffffff)
    throw new FragmentFormatError(`fragment header: bad shard size ${h.shardBytes}`);
  if (!Number.isSafeInteger(h.objectSize) || h.objectSize < 0)
    throw new FragmentFormatError('fragment header: bad object size');
  if (version === 3 ? h.payloadSha256 !== undefined : h.payloadSha256?.length !== 32)
    throw new FragmentFormatError(
      version === 3
        ? 'fragment header: version 3 carries no payload checksum'
        : 'fragment header: sha256 must be 32 bytes',
    );
}
