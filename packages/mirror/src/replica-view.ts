/**
 * The engine's view of each replica: what it last saw or caused at each path (`seen`, in
 * memory; the persisted `known` rows are the books), the revisions its own writes produced
 * (so their feed echoes are dropped), the mapping between a replica's paths and the share's,
 * and the consistent read of one entry (snapshot).
 */
import { caseFoldKey, collect } from '@weft/providers';
import { isNotFound } from './provider-failures.ts';
import type { Replica, Seen, Snapshot } from './context.ts';
import type { ShareStore } from './store.ts';
import { isUnder, rebase, sha256Hex } from './tree-paths.ts';

/** Revisions of our own writes remembered per path. */
const OURS_KEPT = 16;

/** The provider path of `rel` (a share-relative path) on `r`. */
export function fullPath(r: Replica, rel: string): string {
  if (r.root === '') return rel;
  return rel === '' ? r.root : `${r.root}/${rel}`;
}

/** The share-relative path of a provider path on `r`; undefined outside its root. */
export function relativePath(r: Replica, path: string): string | undefined {
  if (r.root === '') return path;
  const fold = !r.provider.features.caseSensitive;
  const a = fold ? caseFoldKey(path) : path;
  const root = fold ? caseFoldKey(r.root) : r.root;
  if (a === root) return '';
  if (a.startsWith(root + '/')) return path.slice(r.root.length + 1);
  return undefined;
}

/**
 * What the engine has seen on `r`, rebuilt from the database (a new engine, or a
 * verification): the books, plus what the feed of `r` reported in log entries not yet
 * applied at their origin — the books take those in only when they are applied, in log
 * order. Without them, a re-listing would not know those paths, and a move or delete of
 * them made meanwhile would go unreported (the old path came back everywhere).
 */
export async function seenFromBooks(store: ShareStore, r: Replica): Promise<Map<string, Seen>> {
  const seen = new Map<string, Seen>((await store.knownUnder(r.id, '')).map((k) => [k.path, k]));
  const dir: Seen = { kind: 'dir', revision: '', sha256: '' };
  for (const e of await store.pending(0, false)) {
    if (e.origin !== r.id || e.doneTargets.includes(r.id)) continue;
    const op = e.op;
    if (op.type === 'file') seen.set(op.path, { kind: 'file', revision: op.revision, sha256: op.sha256 });
    else if (op.type === 'dir') seen.set(op.path, dir);
    else if (op.type === 'delete') {
      for (const k of [...seen.keys()]) if (isUnder(k, op.path)) seen.delete(k);
    } else {
      const moved = [...seen].filter(([k]) => isUnder(k, op.from));
      for (const [k] of moved) seen.delete(k);
      for (const [k, v] of moved) {
        if (v.kind !== 'dir') continue;
        seen.set(rebase(k, op.from, op.to), v);
      }
      for (const [rel, rev] of Object.entries(op.revisions))
        seen.set(rel === '' ? op.to : `${op.to}/${rel}`, { kind: 'file', ...rev });
      if (op.kind === 'dir') seen.set(op.to, dir);
    }
  }
  return seen;
}

export class ReplicaView {
  /** Per replica: path → what the engine last saw or caused there (in memory). */
  private readonly seen = new Map<string, Map<string, Seen>>();
  /** Per replica: path → revisions our own writes produced (recent ones). */
  private readonly ours = new Map<string, Map<string, string[]>>();

  /** Start `r` from `seen` (ours: nothing yet). */
  load(r: Replica, seen: Map<string, Seen>): void {
    this.seen.set(r.id, seen);
    if (!this.ours.has(r.id)) this.ours.set(r.id, new Map());
  }

  /** Replace what was seen on `r` (a verification starts from the books). */
  replace(r: Replica, seen: Map<string, Seen>): void {
    this.seen.set(r.id, seen);
  }

  seenOf(r: Replica): Map<string, Seen> {
    const m = this.seen.get(r.id);
    if (!m) throw new Error(`unknown replica ${r.id}`);
    return m;
  }

  setSeen(r: Replica, path: string, s: Seen | undefined): void {
    const m = this.seenOf(r);
    if (s === undefined) m.delete(path);
    else m.set(path, s);
  }

  dropSeenUnder(r: Replica, path: string): void {
    const m = this.seenOf(r);
    for (const k of [...m.keys()]) if (isUnder(k, path)) m.delete(k);
  }

  /** What was seen at or below `path` (relative to it; '' = `path` itself) → SHA-256 or 'dir'. */
  seenFiles(r: Replica, path: string): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [k, v] of this.seenOf(r)) {
      if (isUnder(k, path))
        out[k === path ? '' : k.slice(path.length + 1)] = v.kind === 'dir' ? 'dir' : v.sha256;
    }
    return out;
  }

  addOurs(r: Replica, path: string, revision: string): void {
    if (revision === '') return;
    const m = this.ours.get(r.id);
    if (!m) return;
    const list = m.get(path) ?? [];
    list.push(revision);
    if (list.length > OURS_KEPT) list.shift();
    m.set(path, list);
  }

  isOurs(r: Replica, path: string, revision: string): boolean {
    return revision !== '' && (this.ours.get(r.id)?.get(path)?.includes(revision) ?? false);
  }
}

/**
 * The entry at `rel` on a replica with (when `withContent`) its content, read so that
 * content and revision belong together. undefined when nothing is there.
 */
export async function snapshot(r: Replica, rel: string, withContent: boolean): Promise<Snapshot | undefined> {
  const path = fullPath(r, rel);
  for (let attempt = 0; ; attempt++) {
    try {
      const a = await r.provider.stat(path);
      if (a.kind === 'dir') return { kind: 'dir', revision: '', sha256: '' };
      if (!withContent) return { kind: 'file', revision: a.revision, sha256: '', hash: a.hash?.value };
      const data = await collect(await r.provider.read(path));
      const b = await r.provider.stat(path);
      if (b.revision === a.revision || attempt >= 3) {
        return { kind: 'file', revision: b.revision, sha256: sha256Hex(data), hash: b.hash?.value, data };
      }
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }
}
