/**
 * Propagating a move: a server-side move on the target when it holds exactly what the
 * origin moved and the share agrees (EntryFacts.nativeOk); otherwise the content is
 * written at the destination (read from the log, or from the origin for a folder) and the
 * source is deleted like any delete — what changed there meanwhile stays.
 */
import { type Entry, hasServerSideMove } from '@weft/providers';
import type { EngineContext, Replica } from '../context.ts';
import { isAlreadyExists, isNotFound } from '../provider-failures.ts';
import type { LoggedOp, Op } from '../ops.ts';
import { isParked } from '../parking.ts';
import { fullPath, relativePath, snapshot } from '../replica-view.ts';
import { rebase } from '../tree-paths.ts';
import { applyDelete } from './delete.ts';
import { applyDir } from './dir.ts';
import { applyFile } from './file.ts';

export async function applyMove(
  ctx: EngineContext,
  t: Replica,
  op: Extract<Op, { type: 'move' }>,
  logged: LoggedOp,
): Promise<void> {
  const { store, view, stats } = ctx;
  const known = await store.known(t.id, op.from);
  const canMove =
    hasServerSideMove(t.provider) && (op.kind === 'file' || t.provider.features.move === 'files-and-folders');
  if (
    known &&
    known.kind === op.kind &&
    canMove &&
    ctx.facts.nativeOk.has(logged.seq) &&
    hasServerSideMove(t.provider)
  ) {
    const ok = await matchesKnown(ctx, t, op.from, op.kind, op.files);
    if (ok) {
      try {
        const under = await store.knownUnder(t.id, op.from);
        const e = await t.provider.move(fullPath(t, op.from), fullPath(t, op.to));
        stats.applied += 1;
        stats.nativeMoves += 1;
        await store.transaction(async (tx) => {
          await tx.dropKnownUnder(t.id, op.from);
          for (const k of under) await tx.setKnown(t.id, rebase(k.path, op.from, op.to), k);
          if (op.kind === 'file') {
            await tx.setKnown(t.id, op.to, { kind: 'file', revision: e.revision, sha256: known.sha256 });
          }
        });
        view.dropSeenUnder(t, op.from);
        for (const k of under) {
          const to = rebase(k.path, op.from, op.to);
          const rev = to === op.to && op.kind === 'file' ? e.revision : k.revision;
          view.setSeen(t, to, { ...k, revision: rev });
          if (k.kind === 'file') view.addOurs(t, to, rev);
        }
        return;
      } catch (e) {
        if (!isNotFound(e) && !isAlreadyExists(e)) throw e;
      }
    }
  }
  // No server-side move, or the source changed under us: upload at `to`, delete `from`.
  if (op.kind === 'file') {
    const rev = op.revisions[''];
    if (logged.data && rev) await applyFile(ctx, t, op.to, rev.sha256, logged.data, logged);
  } else {
    await copyFromOrigin(ctx, t, op.to, logged);
  }
  await applyDelete(ctx, t, op.from, op.files);
}

/**
 * The replica holds exactly what the origin moved under `path` (op.files), each file at
 * the revision we know: nothing edited, added or removed there, so a native move is safe.
 */
async function matchesKnown(
  ctx: EngineContext,
  t: Replica,
  path: string,
  kind: 'file' | 'dir',
  files: Readonly<Record<string, string>> | undefined,
): Promise<boolean> {
  const known = new Map((await ctx.store.knownUnder(t.id, path)).map((k) => [k.path, k]));
  const expect = (rel: string, entryKind: 'file' | 'dir', revision: string): boolean => {
    const k = known.get(rel);
    if (!k || k.kind !== entryKind) return false;
    const key = rel === path ? '' : rel.slice(path.length + 1);
    if (entryKind === 'dir') return !files || files[key] === 'dir';
    return k.revision === revision && (!files || files[key] === k.sha256);
  };
  if (kind === 'file') {
    const cur = await snapshot(t, path, false);
    return cur?.kind === 'file' && expect(path, 'file', cur.revision);
  }
  let count = 0;
  try {
    for await (const e of t.provider.list(fullPath(t, path), { recursive: true })) {
      const rel = relativePath(t, e.path);
      if (rel === undefined || !expect(rel, e.kind, e.revision)) return false;
      count += 1;
    }
  } catch (e) {
    if (isNotFound(e)) return false;
    throw e;
  }
  return !files || count === Object.keys(files).length - 1;
}

/** Fallback of a folder move: the moved folder's files, read from the origin. */
async function copyFromOrigin(ctx: EngineContext, t: Replica, dir: string, logged: LoggedOp): Promise<void> {
  const origin = ctx.byId.get(logged.origin);
  if (!origin) return;
  await applyDir(ctx, t, dir);
  const entries: Entry[] = [];
  try {
    for await (const e of origin.provider.list(fullPath(origin, dir), { recursive: true })) {
      const rel = relativePath(origin, e.path);
      if (rel !== undefined && !isParked(rel)) entries.push(e);
    }
  } catch (e) {
    if (isNotFound(e)) return;
    throw e;
  }
  for (const e of entries) {
    const rel = relativePath(origin, e.path);
    if (rel === undefined) continue;
    if (e.kind === 'dir') {
      await applyDir(ctx, t, rel);
      continue;
    }
    const snap = await snapshot(origin, rel, true);
    if (!snap?.data) continue;
    await applyFile(ctx, t, rel, snap.sha256, snap.data, logged);
  }
}
