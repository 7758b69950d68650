/**
 * The filesystem tier's SHA-256s by path, valid while the file's revision is the one recorded:
 * a stat right after a write (or of a file stat'd lately) needs no second pass over its bytes.
 * Bounded (issue #16): one entry per file ever written grew the proxy's heap by ~55 MB per
 * 100,000 small files, for hashes the proxy keeps in its own index and almost never asks the
 * tier for. Past the bound the least recently set or used entry goes (a later stat hashes).
 */
export const DEFAULT_HASH_CACHE_ENTRIES = 10_000;

export interface CachedHash {
  readonly revision: string;
  readonly sha256: string;
}

export class HashCache {
  private readonly byPath = new Map<string, CachedHash>();

  constructor(private readonly limit = DEFAULT_HASH_CACHE_ENTRIES) {}

  get size(): number {
    return this.byPath.size;
  }

  get(path: string): CachedHash | undefined {
    const hit = this.byPath.get(path);
    if (hit !== undefined) {
      // Most recently used last (Map keeps insertion order).
      this.byPath.delete(path);
      this.byPath.set(path, hit);
    }
    return hit;
  }

  set(path: string, value: CachedHash): void {
    this.byPath.delete(path);
    this.byPath.set(path, value);
    if (this.byPath.size > this.limit) {
      const oldest = this.byPath.keys().next();
      if (!oldest.done) this.byPath.delete(oldest.value);
    }
  }

  entries(): IterableIterator<[string, CachedHash]> {
    return this.byPath.entries();
  }
}
