/**
 * Propagation of row D27 (docs/sync-decisions.md): a folder made here, never sent, meets a
 * file another device created under the same name, or a file made here a folder. Both are
 * kept, as Dropbox does: ours moves on to a conflicted-copy name (here, then there as new),
 * theirs comes down under the name.
 */
import * as fsp from 'node:fs/promises';
import { conflictCopyPath } from '../../conflict-name.ts';
import type { Op } from '../../ops.ts';
import type { SyncContext } from '../context.ts';

const under = (p: string, root: string): boolean => p === root || p.startsWith(root + '/');

/**
 * Rename our entry `p` (a folder and what is in it, or a file) to a conflicted-copy name and
 * queue it there as new; what the queue held to create it under `p` goes. False: it could
 * not be moved (gone meanwhile); nothing changed.
 */
export async function ownToCopy(ctx: SyncContext, p: string, rowId: string): Promise<boolean> {
  const copy = conflictCopyPath(p, ctx.deviceName, new Date(ctx.now()), ctx.taken);
  const moved = await Promise.all([ctx.at(p), ctx.at(copy)])
    .then(([a, b]) => fsp.rename(a, b))
    .then(
      () => true,
      () => false,
    );
  if (!moved) return false;
  // Never sent (new here): its creation and its files' puts name the old path.
  const stale = ctx.journal
    .pendingOps()
    .filter(({ op }) => (op.kind === 'move' ? false : under(op.path, p)))
    .map((q) => q.id);
  for (const id of stale) ctx.journal.completeOp(id, () => undefined);
  const ops: Op[] = [];
  ctx.journal.transaction(() => {
    ctx.journal.moveFiles(p, copy);
    for (const row of ctx.journal.filesUnder(copy)) {
      ctx.journal.upsertFile({ ...row, syncedRev: null, syncedHash: null });
      if (row.kind === 'dir') ops.push({ kind: 'mkdir', path: row.path, created: true });
      else if (row.hash)
        ops.push({ kind: 'put', path: row.path, hash: row.hash, size: row.size, created: true });
    }
  });
  ctx.journal.enqueueMany(ops);
  ctx.noteLocalName(copy);
  ctx.markDirty([copy]);
  ctx.status.conflict(p, copy, rowId);
  return true;
}
