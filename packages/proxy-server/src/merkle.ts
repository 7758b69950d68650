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
  /**
   * Bumped per user by every invalidation: a hash computed from reads that an invalidation
   * overlapped is returned but not cached (it may predate the change).
   */
  private readonly generation = new Map<string, number>();

  constructor(private readonly meta: MetadataStore) {}

  /** Forget every cached hash of a namespace (another process changed it). */
  forget(userId: string): void {
    this.generation.set(userId, (this.generation.get(userId) ?? 0) + 1);
    this.cache.delete(userId);
  }

  /** Forget cached hashes of every folder containing `path`. */
  invalidate(userId: string, path: string): void {
    this.generation.set(userId, (this.generation.get(userId) ?? 0) + 1);
    const c = this.cache.get(userId);
    if (!c) return;
    c.delete('');
    for (const a of ancestors(path)) c.delete(a);
    for (const k of [...c.keys()]) if (k === path || k.startsWith(path + '/')) c.delete(k);
  }

  private async dirHashOf(userId: string, dir: string): Promise<Uint8Array> {
    const cached = this.cache.get(userId)?.get(dir);
    if (cached) return cached;
    const gen = this.generation.get(userId) ?? 0;
    const children = await this.children(userId, dir);
    const h = dirHash(dir, children);
    if ((this.generation.get(userId) ?? 0) === gen) {
      let c = this.cache.get(userId);
      if (!c) this.cache.set(userId, (c = new Map()));
      c.set(dir, h);
    }
    return h;
  }

  private async children(userId: string, dir: string): Promise<MerkleChildHash[]> {
    const prefix = dir === '' ? '' : dir + '/';
    const out: MerkleChildHash[] = [];
    for (const e of await this.meta.listEntries(userId, dir, false))
      out.push({
        name: e.path.slice(prefix.length),
        kind: e.kind,
        hash: e.kind === 'file' ? fileLeafHash(e.path, e.sha256 ?? '') : await this.dirHashOf(userId, e.path),
      });
    return out;
  }

  async node(userId: string, path: string): Promise<MerkleNode> {
    if (path !== '') {
      const e = await this.meta.getEntry(userId, path);
      if (!e) return { path };
      if (e.kind === 'file') return { path, kind: 'file', hash: hex(fileLeafHash(path, e.sha256 ?? '')) };
    }
    const children = orderChildren(await this.children(userId, path)).map((c) => ({
      name: c.name,
      kind: c.kind,
      hash: hex(c.hash),
    }));
    return { path, kind: 'dir', hash: hex(await this.dirHashOf(userId, path)), children };
  }
}

function hex(b: Uint8Array): string {
  return Buffer.from(b).toString('hex');
}
