/**
 * Merkle hashes over a namespace (HyCloud Eq. 9), computed identically on both sides.
 *
 *   H(f) = SHA-256("f" ‖ 0x00 ‖ path ‖ 0x00 ‖ content-SHA-256)          (file: content and path)
 *   H(d0) = SHA-256("d" ‖ 0x00 ‖ path)                                   (the folder's own path)
 *   H(d) = SHA-256(H(d0) ‖ H(f1) ‖ … ‖ H(fn) ‖ H(d1) ‖ … ‖ H(dm))        (Eq. 9)
 *   H(d) = H(d0) for an empty folder.
 *
 * Files come first, then folders, each group in ascending UTF-8 byte order of the name.
 * Paths are canonical provider paths, '' for the root; hashes are raw 32-byte digests.
 */
import { createHash } from 'node:crypto';

const utf8 = new TextEncoder();

export function fileLeafHash(path: string, contentSha256Hex: string): Uint8Array {
  return createHash('sha256')
    .update('f\0')
    .update(utf8.encode(path))
    .update('\0')
    .update(Buffer.from(contentSha256Hex, 'hex'))
    .digest();
}

export function dirSelfHash(path: string): Uint8Array {
  return createHash('sha256').update('d\0').update(utf8.encode(path)).digest();
}

export interface MerkleChildHash {
  readonly name: string;
  readonly kind: 'file' | 'dir';
  readonly hash: Uint8Array;
}

export function compareNames(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** Children in the order Eq. 9 concatenates them. */
export function orderChildren<T extends { name: string; kind: 'file' | 'dir' }>(children: readonly T[]): T[] {
  return [...children].sort((a, b) =>
    a.kind === b.kind ? compareNames(a.name, b.name) : a.kind === 'file' ? -1 : 1,
  );
}

export function dirHash(path: string, children: readonly MerkleChildHash[]): Uint8Array {
  const self = dirSelfHash(path);
  if (children.length === 0) return self;
  const h = createHash('sha256').update(self);
  for (const c of orderChildren(children)) h.update(c.hash);
  return h.digest();
}
