/**
 * Propagation of row D27 (docs/sync-decisions.md): a folder made here, never sent, meets a
 * file another device created under the same name, or a file made here a folder. Both are
 * kept, as Dropbox does: ours moves on to a conflicted-copy name (here, then there as new),
 * theirs comes down under the name.
 */
import * as fsp from 'node:fs/promises';
import { conflictCopyPath } from '../../conflict-name.ts';
import { JournalChanges } from '../../journal/changes.ts';
import type { Op } from '../../ops.ts';
import type { SyncContext } from '../context.ts';

const under = (p: string, root: string): boolean => p === root || p.startsWith(root + '/');

/**
 * Rename our entry `p` (a folder and what is in it, or a file) to a conflicted-copy name and
 * queue it there as new; what the queue held to create it under `p` goes. Returns the
 * journal changes; undefined: it could not be moved (gone meanwhile), nothing changed.
 */
export async function ownToCopy(
  ctx: SyncContext,
  p: string,
  rowId: string,
): Promise<JournalChanges | undefined> {
  const copy = conflictCopyPath(p, ctx.deviceName, new Date(ctx.now()), ctx.taken);
  const moved = await Promise.all([ctx.at(p), ctx.at(copy)])
    .then(([a, b]) => fsp.rename(a, b))
    .then(
      () => true,
      () => false,
    );
  if (!moved) return undefined;
  const out = new JournalChanges();
  // Never sent (new here): its creation and its files' puts name the old path.
  for (const { id, op } of ctx.journal.pendingOps())
    if (op.kind !== 'move' && under(op.path, p)) out.completeOp(id);
  const ops: Op[] = [];
  out.moveFiles(p, copy);
  for (const r of ctx.journal.filesUnder(p)) {
    const row = { ...r, path: copy + r.path.slice(p.length) };
    out.upsertFile({ ...row, syncedRev: null, syncedHash: null });
    if (row.kind === 'dir') ops.push({ kind: 'mkdir', path: row.path, created: true });
    else if (row.hash)
      ops.push({ kind: 'put', path: row.path, hash: row.hash, size: row.size, created: true });
  }
  out.enqueue(ops);
  ctx.noteLocalName(copy, out);
  ctx.markDirty([copy]);
  ctx.status.conflict(p, copy, rowId);
  return out;
}
