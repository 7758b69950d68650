/**
 * Propagating a delete: only the versions the deleter had (the entry's `files`) are
 * removed, each conditional on the revision known on the target; a concurrent edit or a
 * new file stays (edits win over concurrent deletes) and reaches the others through the
 * log; folders are removed once empty (parking.ts).
 */
import type { Entry } from '@weft/providers';
import type { EngineContext, Replica } from '../context.ts';
import { isNotFound, isPreconditionFailed } from '../provider-failures.ts';
import { isParked } from '../parking.ts';
import { fullPath, relativePath, snapshot } from '../replica-view.ts';
import type { KnownEntry } from '../store.ts';
import { isUnder } from '../tree-paths.ts';

/** Remove a file, if it is still the version we knew there (else the edit wins and stays). */
export async function removeKnownFile(
  ctx: EngineContext,
  t: Replica,
  path: string,
  known: KnownEntry,
): Promise<boolean> {
  let revision = known.revision;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      await t.provider.remove(fullPath(t, path), { ifRevision: revision });
      await ctx.store.touch(t.id, path);
      ctx.stats.applied += 1;
      return true;
    } catch (e) {
      if (isNotFound(e)) return true;
      if (!isPreconditionFailed(e)) throw e;
    }
    const cur = await snapshot(t, path, true);
    if (!cur) return true;
    if (cur.kind !== 'file' || cur.sha256 !== known.sha256) return false;
    revision = cur.revision;
  }
  return false;
}

/** The duplicates a move entry left on its origin (EntryFacts.movedDuplicates): removed if unchanged. */
export async function removeDuplicates(ctx: EngineContext, origin: Replica, seq: number): Promise<void> {
  for (const d of ctx.facts.movedDuplicates.get(seq) ?? []) {
    if (!(await removeKnownFile(ctx, origin, d.path, d))) continue; // changed since: it stays
    await ctx.store.setKnown(origin.id, d.path, undefined);
    ctx.view.setSeen(origin, d.path, undefined);
  }
  ctx.facts.movedDuplicates.delete(seq);
}

export async function applyDelete(
  ctx: EngineContext,
  t: Replica,
  path: string,
  files?: Readonly<Record<string, string>>,
): Promise<void> {
  const known = await ctx.store.knownUnder(t.id, path);
  const root = known.find((k) => k.path === path);
  if (known.length === 0) return;
  const deletable = (k: KnownEntry & { path: string }): boolean =>
    k.kind === 'file' && (!files || files[k.path === path ? '' : k.path.slice(path.length + 1)] === k.sha256);
  const removed = new Set<string>();
  if (root?.kind === 'file') {
    if (deletable(root) && (await removeKnownFile(ctx, t, path, root))) removed.add(path);
  } else {
    // A folder: remove the versions the deleter had, keep anything else (a concurrent
    // edit or new file there reaches the others through the log), then empty folders.
    const entries: Entry[] = [];
    try {
      for await (const e of t.provider.list(fullPath(t, path), { recursive: true })) {
        const rel = relativePath(t, e.path);
        if (rel !== undefined && !isParked(rel)) entries.push(e);
      }
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    const knownByPath = new Map(known.map((k) => [k.path, k]));
    const kept = new Set<string>();
    // What we knew there and is there no more (moved or deleted by the replica's owner):
    // out of the books, or a restart's re-listing reports it gone again.
    const present = new Set(entries.map((e) => relativePath(t, e.path)));
    for (const k of known) if (k.path !== path && !present.has(k.path)) removed.add(k.path);
    for (const e of entries) {
      const rel = relativePath(t, e.path);
      if (rel === undefined || e.kind !== 'file') continue;
      const k = knownByPath.get(rel);
      if (k && deletable(k) && (await removeKnownFile(ctx, t, rel, k))) removed.add(rel);
      else kept.add(rel);
    }
    const dirs = entries
      .filter((e) => e.kind === 'dir')
      .map((e) => relativePath(t, e.path))
      .filter((p): p is string => p !== undefined)
      .concat(entries.length > 0 || root ? [path] : [])
      .sort((a, b) => b.length - a.length);
    for (const d of dirs) {
      if ([...kept].some((k) => isUnder(k, d))) continue;
      if (files && files[d === path ? '' : d.slice(path.length + 1)] !== 'dir') {
        kept.add(d); // a folder the deleter had not seen
        continue;
      }
      if (!(await ctx.parking.removeEmptyFolder(t, d))) {
        kept.add(d); // a save landed in it meanwhile: it stays, and reaches the others
        continue;
      }
      removed.add(d);
    }
  }
  for (const k of known) {
    if (!removed.has(k.path)) continue;
    await ctx.store.setKnown(t.id, k.path, undefined);
    ctx.view.setSeen(t, k.path, undefined);
  }
}
