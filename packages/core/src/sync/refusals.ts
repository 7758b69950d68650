/**
 * The server refused one of our operations (rows D23–D26 of docs/sync-decisions.md): the
 * two sides would drift apart, so mend it at once without losing either side's content.
 */
import * as fsp from 'node:fs/promises';
import { conflictCopyPath } from '../conflict-name.ts';
import { stated } from '../decisions.ts';
import { JournalChanges } from '../journal/changes.ts';
import type { OpResult } from '@weft/wire';
import type { Op } from '../ops.ts';
import type { SyncContext } from './context.ts';
import { fetchRemoteSubtree } from './discovery/remote.ts';
import { adoptServerCopy } from './propagate/conflict.ts';
import { requeueMovedEdits } from './propagate/local-change.ts';

/**
 * - D24: a move onto a name someone else took meanwhile keeps both: ours moves on under a
 *   conflicted-copy name, theirs comes down;
 * - D25: a move whose source the server no longer has (deleted or moved elsewhere by
 *   another device) makes what we moved new content there;
 * - D26: anything else: compare the whole folder with the server on the next pull. A folder
 *   made here whose creation was refused is sent once more (the pull does not bring back
 *   what was never sent, and the scan knows the folder already); refused again, it stays
 *   shown as an error in the activity until the engine restarts.
 */
export async function repairFailedOp(ctx: SyncContext, op: Op, code: string): Promise<void> {
  if (op.kind === 'move' && code === 'ALREADY_EXISTS') {
    const d = ctx.decide(stated(op.to, 'refused-taken'), { from: op.from, code });
    if (d.action === 'move-to-copy' && (await moveToCopy(ctx, op, d.id))) return;
  }
  if (op.kind === 'move' && code === 'NOT_FOUND') {
    const d = ctx.decide(stated(op.to, 'refused-source-gone'), { from: op.from, code });
    if (d.action === 'reupload') return ctx.commit(reupload(ctx, op.to));
  }
  const d = ctx.decide(stated(op.kind === 'move' ? op.to : op.path, 'refused'), { code });
  if (d.action !== 'reconcile') return;
  if (op.kind === 'mkdir') await sendMkdirAgain(ctx, op.path);
  ctx.control.reconcileEverything();
}

/** Folders whose refused creation was queued again (once each), per engine. */
const retriedMkdirs = new WeakMap<SyncContext, Set<string>>();

/** D26 for a refused mkdir: queue it again once, if the folder is still here and was never synced. */
async function sendMkdirAgain(ctx: SyncContext, p: string): Promise<void> {
  const retried = retriedMkdirs.get(ctx) ?? new Set<string>();
  retriedMkdirs.set(ctx, retried);
  const row = ctx.journal.getFile(p);
  if (retried.has(p) || row?.kind !== 'dir' || row.syncedRev !== null) return;
  const here = await ctx
    .at(p)
    .then((abs) => fsp.stat(abs))
    .then((st) => st.isDirectory())
    .catch(() => false);
  if (!here) return;
  retried.add(p);
  ctx.commit(new JournalChanges().enqueue([{ kind: 'mkdir', path: p, created: true }]));
}

/**
 * D24: move ours on to a conflicted-copy name (there and here), then fetch theirs. The
 * server applies a move whatever its base (docs/formats/api.md), so the move there is sent
 * only when the server's source is still the entry ours was synced from; otherwise (edited,
 * replaced or gone there) ours goes up as new content under the copy name and the source
 * is left to the pull — a move there would carry another entry to the copy than the one
 * renamed here.
 */
async function moveToCopy(
  ctx: SyncContext,
  op: Extract<Op, { kind: 'move' }>,
  rowId: string,
): Promise<boolean> {
  const copy = conflictCopyPath(op.to, ctx.deviceName, new Date(ctx.now()), ctx.taken);
  const ours = ctx.journal.getFile(op.to);
  const source = await ctx.client.stat(op.from);
  const same = ours !== undefined && source?.kind === ours.kind && source.revision === ours.syncedRev;
  let r: OpResult | undefined;
  if (same) {
    [r] = await ctx.client.ops([{ op: 'move', from: op.from, to: copy }]);
    if (r?.status !== 'applied') return false;
  }
  const moved = await Promise.all([ctx.at(op.to), ctx.at(copy)])
    .then(([a, b]) => fsp.rename(a, b))
    .then(() => true)
    .catch(() => false);
  if (!same && !moved) return false;
  const entry = r?.status === 'applied' ? r.entry : undefined;
  const out = new JournalChanges();
  // The rows as the move leaves them.
  const rows = moved
    ? ctx.journal.filesUnder(op.to).map((x) => ({ ...x, path: copy + x.path.slice(op.to.length) }))
    : ctx.journal.filesUnder(copy);
  if (moved) out.moveFiles(op.to, copy);
  const row = rows[0]?.path === copy ? rows[0] : undefined;
  if (row && entry) out.upsertFile({ ...row, syncedRev: entry.revision });
  ctx.commit(out);
  if (!same) ctx.commit(reupload(ctx, copy));
  else if (moved) {
    ctx.commit(await giveBackTheirs(ctx, op.to, copy));
    ctx.commit(requeueMovedEdits(ctx, copy, ctx.journal.filesUnder(copy), new JournalChanges()));
  } else ctx.markDirty([copy]);
  ctx.status.conflict(op.to, copy, rowId);
  await fetchRemoteSubtree(ctx, op.to);
  return true;
}

/**
 * Before our rename was refused, the pull may have merged the folder that took the name
 * into ours (their files came down into it); our folder has just moved on to `copy` with
 * them. What is theirs — at the same place and revision under the server's `to` — leaves
 * the copy (to the trash: the fetch of `to` brings it down again there); theirs edited
 * here stays in the copy and goes up as new. Returns the journal changes.
 */
async function giveBackTheirs(ctx: SyncContext, to: string, copy: string): Promise<JournalChanges> {
  const out = new JournalChanges();
  const row = ctx.journal.getFile(copy);
  if (row?.kind !== 'dir') return out;
  const listing = await ctx.client.list(to, true).catch(() => ({ entries: [] }));
  const theirs = new Map(listing.entries.map((e) => [e.path, e.revision]));
  if (theirs.size === 0) return out;
  // Deepest first, so a folder is looked at after what was in it.
  const rows = ctx.journal.filesUnder(copy).sort((a, b) => (a.path < b.path ? 1 : -1));
  for (const r of rows) {
    if (r.path === copy || r.syncedRev === null) continue;
    if (theirs.get(to + r.path.slice(copy.length)) !== r.syncedRev) continue;
    const abs = await ctx.at(r.path);
    if (r.kind === 'dir') {
      if (
        await fsp.rmdir(abs).then(
          () => true,
          () => false,
        )
      )
        out.deleteFile(r.path);
      else out.upsertFile({ ...r, syncedRev: null });
    } else if ((await ctx.localHash(r, r.path)) === r.syncedHash) {
      await ctx.trash.keep(abs, ctx.paths.localRel(r.path));
      out.deleteFile(r.path);
    } else {
      out.upsertFile({ ...r, syncedRev: null, syncedHash: null });
    }
  }
  return out;
}

/** D25: everything at or under `to` goes up again as new (the journal changes that say so). */
function reupload(ctx: SyncContext, to: string): JournalChanges {
  const out = new JournalChanges();
  const ops: Op[] = [];
  for (const row of ctx.journal.filesUnder(to)) {
    out.upsertFile({ ...row, syncedRev: null, syncedHash: null });
    if (row.kind === 'dir') ops.push({ kind: 'mkdir', path: row.path, created: true });
    else if (row.hash)
      ops.push({ kind: 'put', path: row.path, hash: row.hash, size: row.size, created: true });
  }
  return out.enqueue(ops);
}

/** D23, once the request that met them is done: ours to the server's copy name, theirs down. */
export async function resolveServerConflicts(ctx: SyncContext): Promise<void> {
  for (const c of ctx.serverConflicts.splice(0))
    await ctx.guarded(c.path, async () => {
      // Not ours here (see adoptServerCopy): the copy comes down as theirs would.
      const adopted = await adoptServerCopy(ctx, c);
      ctx.commit(adopted);
      if (!adopted && c.action === 'adopt-server-copy' && c.op.kind === 'put' && c.conflictPath !== '')
        await fetchRemoteSubtree(ctx, c.conflictPath);
      // Whatever the server now has at the path (or nothing): apply it as a remote change.
      await fetchRemoteSubtree(ctx, c.path);
    });
}
