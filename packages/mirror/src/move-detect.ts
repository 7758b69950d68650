/**
 * Moves in a batch of changes read from one replica (pure): a delete of something the
 * engine had seen there, then upserts carrying the same revisions or hashes at a path it
 * had not seen. Feeds report a move as a delete and an upsert (or a re-listing shows one
 * path gone and another new); logging it as a move lets targets move too, server-side.
 */
import type { Entry } from '@weft/providers';
import type { Seen, SyntheticChange } from './context.ts';
import { isUnder, rebase } from './tree-paths.ts';

/** A move found at a delete's index: where it went, and the upserts it accounts for. */
export interface DetectedMove {
  readonly to: string;
  readonly kind: 'file' | 'dir';
  readonly consumed: Set<number>;
}

/** An entry as listed is what was seen (same revision or, for files, the same provider hash). */
export function sameAsSeen(s: Seen | undefined, e: Entry): boolean {
  if (!s || s.kind !== e.kind) return false;
  if (e.kind === 'dir') return true;
  if (s.revision !== '' && s.revision === e.revision) return true;
  return s.hash !== undefined && e.hash !== undefined && s.hash === e.hash.value;
}

/**
 * The moves in `changes` given what was `seen` on the replica: delete index → the move. A
 * folder moved when every file seen inside it appears, unchanged, at the same place under
 * one new folder.
 */
export function detectMoves(
  seen: ReadonlyMap<string, Seen>,
  changes: readonly SyntheticChange[],
): Map<number, DetectedMove> {
  const found = new Map<number, DetectedMove>();
  const taken = new Set<number>();
  for (let i = 0; i < changes.length; i++) {
    const d = changes[i];
    if (d?.type !== 'delete') continue;
    const s = seen.get(d.path);
    if (!s) continue;
    if (s.kind === 'file') {
      // Feeds that report the latest state of each item (Dropbox, Drive, Graph) may list
      // the new path before the old one's delete: look at the whole batch.
      for (let j = 0; j < changes.length; j++) {
        const u = changes[j];
        if (u?.type !== 'upsert' || taken.has(j) || u.entry.kind !== 'file' || seen.has(u.path)) continue;
        if (sameAsSeen(s, u.entry)) {
          taken.add(j);
          found.set(i, { to: u.path, kind: 'file', consumed: new Set([j]) });
          break;
        }
      }
      continue;
    }
    const files = [...seen.entries()].filter(
      ([k, v]) => v.kind === 'file' && isUnder(k, d.path) && k !== d.path,
    );
    if (files.length === 0) continue;
    for (let j = 0; j < changes.length; j++) {
      const u = changes[j];
      if (u?.type !== 'upsert' || taken.has(j) || u.entry.kind !== 'dir' || seen.has(u.path)) continue;
      const to = u.path;
      const consumed = new Set<number>([j]);
      let all = true;
      for (const [k, v] of files) {
        const target = rebase(k, d.path, to);
        const idx = changes.findIndex(
          (c, n) =>
            n !== i && !taken.has(n) && c.type === 'upsert' && c.path === target && sameAsSeen(v, c.entry),
        );
        if (idx < 0) {
          all = false;
          break;
        }
        consumed.add(idx);
      }
      if (!all) continue;
      // Sub-folders of the moved folder that were seen come along too.
      for (const [k, v] of seen) {
        if (v.kind !== 'dir' || !isUnder(k, d.path) || k === d.path) continue;
        const target = rebase(k, d.path, to);
        const idx = changes.findIndex((c, n) => n !== i && c.type === 'upsert' && c.path === target);
        if (idx >= 0) consumed.add(idx);
      }
      for (const n of consumed) taken.add(n);
      found.set(i, { to, kind: 'dir', consumed });
      break;
    }
  }
  return found;
}
