/**
 * Merkle tree over a namespace (HyCloud Eq. 9–10; hashing defined in @weft/wire). Folder
 * hashes are cached and invalidated along the ancestors of every change, so a check after
 * a few edits recomputes only the touched branches.
 */
import { ancestors } from '@weft/providers/paths';
import { dirHash, fileLeafHash, orderChildren, type MerkleChildHash, type MerkleNode } from '@weft/wire';
import type { MetadataStore } from './store/metadata.ts';

export class MerkleIndex {
  private readonly cache = new Map<string, Map<string, Uint8Array>>();

  constructor(private readonly meta: MetadataStore) {}

  /** Forget cached hashes of every folder containing `path`. */
  invalidate(userId: string, path: string): void {
    const c = this.cache.get(userId);
    if (!c) return;
    c.delete('');
    for (const a of ancestors(path)) c.delete(a);
    for (const k of [...c.keys()]) if (k === path || k.startsWith(path + '/')) c.delete(k);
  }

  private dirHashOf(userId: string, dir: string): Uint8Array {
    let c = this.cache.get(userId);
    if (!c) this.cache.set(userId, (c = new Map()));
    const cached = c.get(dir);
    if (cached) return cached;
    const children = this.children(userId, dir);
    const h = dirHash(dir, children);
    c.set(dir, h);
    return h;
  }

  private children(userId: string, dir: string): MerkleChildHash[] {
    const prefix = dir === '' ? '' : dir + '/';
    return this.meta.listEntries(userId, dir, false).map((e) => ({
      name: e.path.slice(prefix.length),
      kind: e.kind,
      hash: e.kind === 'file' ? fileLeafHash(e.path, e.sha256 ?? '') : this.dirHashOf(userId, e.path),
    }));
  }

  node(userId: string, path: string): MerkleNode {
    if (path !== '') {
      const e = this.meta.getEntry(userId, path);
      if (!e) return { path };
      if (e.kind === 'file') return { path, kind: 'file', hash: hex(fileLeafHash(path, e.sha256 ?? '')) };
    }
    const children = orderChildren(this.children(userId, path)).map((c) => ({
      name: c.name,
      kind: c.kind,
      hash: hex(c.hash),
    }));
    return { path, kind: 'dir', hash: hex(this.dirHashOf(userId, path)), children };
  }
}

function hex(b: Uint8Array): string {
  return Buffer.from(b).toString('hex');
}
