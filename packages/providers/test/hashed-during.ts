/**
 * Bytes given to SHA-256 (any node:crypto Hash) while `fn` runs: the tests of CPU per byte
 * (issue #17) count hashing instead of timing it.
 */
import crypto from 'node:crypto';
import { vi } from 'vitest';

export async function hashedDuring(fn: () => Promise<unknown>): Promise<number> {
  let hashed = 0;
  const proto = (crypto as unknown as { Hash: { prototype: { update: (d: unknown) => unknown } } }).Hash
    .prototype;
  const update = proto.update;
  vi.spyOn(proto, 'update').mockImplementation(function (this: unknown, d: unknown, ...rest: unknown[]) {
    hashed += typeof d === 'string' ? d.length : (d as Uint8Array).byteLength;
    return (update as (...a: unknown[]) => unknown).call(this, d, ...rest);
  });
  try {
    await fn();
  } finally {
    vi.restoreAllMocks();
  }
  return hashed;
}
