/**
 * Striped objects of the redundant tier: their geometry (shard size, stripes) and what a
 * fragment's header must say. Encoding and streaming fragments to the backends:
 * stripe-write.ts; reading stripes back: stripe-read.ts.
 */
import { encodeFragmentHeader, type FragmentVersion, shardListSha256 } from './fragment.ts';
import type { StripedObject } from './stripe-read.ts';

/** Shard size for an object of `size` bytes: as few stripes as `maxShard` allows, least padding. */
export function shardBytesFor(size: number, k: number, maxShard: number): number {
  const stripes = Math.max(1, Math.ceil(size / (k * maxShard)));
  return Math.max(1, Math.ceil(size / (k * stripes)));
}

export function stripeCount(size: number, k: number, shardBytes: number): number {
  return Math.max(1, Math.ceil(size / (k * shardBytes)));
}

/**
 * What a fragment's recorded checksum is over: 1 when it is the SHA-256 of its payload
 * (version 1 fragments), 2 when it is the SHA-256 of its shards' SHA-256s (versions 2 and 3,
 * which differ only in whether the header repeats it).
 */
export function fragmentChecksumKind(obj: StripedObject, index: number, payloadSha256Hex: string): 1 | 2 {
  return shardListSha256(obj.shardSha, obj.k + obj.m, index).toString('hex') === payloadSha256Hex ? 2 : 1;
}

/**
 * The headers a stored fragment may carry, given the placement store's record: the first is
 * the one a rebuild writes. A version 1 record: the version 1 header only (a rebuilt fragment
 * keeps version 1, so its record stays true). A shard-list record: version 3 (written now)
 * or version 2 (written before); a rebuild writes version 3, whose record is the same.
 */
export function acceptedHeaders(obj: StripedObject, index: number, payloadSha256Hex: string): Uint8Array[] {
  const base = { k: obj.k, m: obj.m, index, shardBytes: obj.shardBytes, objectSize: obj.size };
  const sha = Buffer.from(payloadSha256Hex, 'hex');
  const header = (version: FragmentVersion): Uint8Array =>
    encodeFragmentHeader(version === 3 ? { ...base, version } : { ...base, version, payloadSha256: sha });
  return fragmentChecksumKind(obj, index, payloadSha256Hex) === 1 ? [header(1)] : [header(3), header(2)];
}
