/**
 * The consistency check (HyCloud §III-D, Eq. 9–10): the journal's view of what is synced
 * is hashed as a Merkle tree exactly as the server hashes its namespace (@weft/wire), and
 * the two are compared top-down — one round trip per level that differs — to find the
 * entries where this device and the server disagree. The engine repairs those as remote
 * changes; run after a crash or a long disconnection, when feed events may have been lost.
 */
import { dirHash, fileLeafHash, orderChildren, type MerkleChildHash, type MerkleNode } from '@weft/wire';
import type { FileRow } from './journal/journal.ts';

/** What this device believes the server holds: synced rows only, at their synced content. */
export class LocalMerkle {
  private readonly children = new Map<string, { name: string; row: FileRow }[]>();
  private readonly rows = new Map<string, FileRow>();
  private readonly cache = new Map<string, Uint8Array>();

  constructor(rows: readonly FileRow[]) {
    for (const r of rows) {
      // Never synced (new here, not uploaded yet): not part of what the server should hold.
      if (r.syncedRev === null || (r.kind === 'file' && r.syncedHash === null)) continue;
      this.rows.set(r.path, r);
    }
    for (const r of this.rows.values()) {
      const slash = r.path.lastIndexOf('/');
      const parent = slash < 0 ? '' : r.path.slice(0, slash);
      const list = this.children.get(parent) ?? [];
      list.push({ name: r.path.slice(slash + 1), row: r });
      this.children.set(parent, list);
    }
  }

  /** The node for `path` in the shape the server answers with. */
  node(path: string): MerkleNode {
    if (path !== '') {
      const r = this.rows.get(path);
      if (!r) return { path };
      if (r.kind === 'file') return { path, kind: 'file', hash: hex(this.hashOf(r)) };
    }
    const children = orderChildren(this.childHashes(path)).map((c) => ({
      name: c.name,
      kind: c.kind,
      hash: hex(c.hash),
    }));
    return { path, kind: 'dir', hash: hex(this.dirHashOf(path)), children };
  }

  private hashOf(r: FileRow): Uint8Array {
    return r.kind === 'file' ? fileLeafHash(r.path, r.syncedHash ?? '') : this.dirHashOf(r.path);
  }

  private childHashes(dir: string): MerkleChildHash[] {
    return (this.children.get(dir) ?? []).map((c) => ({
      name: c.name,
      kind: c.row.kind,
      hash: this.hashOf(c.row),
    }));
  }

  private dirHashOf(dir: string): Uint8Array {
    const cached = this.cache.get(dir);
    if (cached) return cached;
    const h = dirHash(dir, this.childHashes(dir));
    this.cache.set(dir, h);
    return h;
  }
}

export interface Divergence {
  /** Entries where the two sides differ, top-most only (a differing folder's content is in it). */
  readonly paths: string[];
  /** Requests made to the server (one per level that differs). */
  readonly roundTrips: number;
}

/**
 * Walk both trees from the root, descending only into folders whose hashes differ.
 * `remote` answers a batch of paths with the server's nodes (POST /v1/merkle).
 */
export async function findDivergence(
  local: LocalMerkle,
  remote: (paths: readonly string[]) => Promise<MerkleNode[]>,
  batch = 1000,
): Promise<Divergence> {
  const out: string[] = [];
  let level = [''];
  let roundTrips = 0;
  while (level.length > 0) {
    const next: string[] = [];
    for (let i = 0; i < level.length; i += batch) {
      const paths = level.slice(i, i + batch);
      const nodes = await remote(paths);
      roundTrips += 1;
      nodes.forEach((theirs, k) => {
        const path = paths[k] ?? theirs.path;
        const ours = local.node(path);
        if (ours.hash === theirs.hash && ours.kind === theirs.kind) return;
        if (ours.kind !== 'dir' || theirs.kind !== 'dir') {
          out.push(path);
          return;
        }
        const mine = new Map((ours.children ?? []).map((c) => [c.name, c]));
        const yours = new Map((theirs.children ?? []).map((c) => [c.name, c]));
        for (const name of new Set([...mine.keys(), ...yours.keys()])) {
          const a = mine.get(name);
          const b = yours.get(name);
          const child = path === '' ? name : `${path}/${name}`;
          if (a && b && a.hash === b.hash && a.kind === b.kind) continue;
          if (a?.kind === 'dir' && b?.kind === 'dir') next.push(child);
          else out.push(child);
        }
      });
    }
    level = next;
  }
  return { paths: out.sort(), roundTrips };
}

function hex(b: Uint8Array): string {
  return Buffer.from(b).toString('hex');
}
