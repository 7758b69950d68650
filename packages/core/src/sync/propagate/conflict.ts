/**
 * Propagation of a conflict: keep both. On rows D5/D10 (both sides changed differently)
 * theirs is written beside ours as a conflicted copy and ours counts from then on as an
 * edit of theirs; on D23 (the server found the conflict first and kept ours as its copy)
 * ours is renamed to the server's copy name. See docs/sync-decisions.md.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { EntryInfo, OpResult } from '@weft/wire';
import { conflictCopyPath } from '../../conflict-name.ts';
import { stated } from '../../decisions.ts';
import { JournalChanges } from '../../journal/changes.ts';
import { type FileRow, SMUDGED_MTIME } from '../../journal/journal.ts';
import { atomicWrite } from '../../local-fs.ts';
import type { Op } from '../../ops.ts';
import type { ServerConflict, SyncContext } from '../context.ts';
import { unlessGone } from './download.ts';

/**
 * Both sides changed (D5, D10): the remote version becomes a conflicted copy beside ours.
 * Returns the journal changes.
 */
export async function keepConflict(
  ctx: SyncContext,
  entry: EntryInfo,
  row: FileRow | undefined,
  device: string | undefined,
  rowId: string,
): Promise<JournalChanges> {
  const out = new JournalChanges();
  const copy = conflictCopyPath(entry.path, device ?? 'another device', new Date(ctx.now()), ctx.taken);
  const dl = await ctx.client.download(entry.path).catch(unlessGone);
  if (!dl) return out; // gone from the server since: a later change in the feed says where
  await atomicWrite(await ctx.at(copy), dl.body, { mtimeMs: entry.mtimeMs });
  ctx.noteLocalName(copy, out);
  out.add(await adoptAsEditOf(ctx, entry.path, entry.revision, entry.sha256 ?? null, row));
  ctx.markDirty([copy]);
  ctx.status.conflict(entry.path, copy, rowId);
  return out;
}

/**
 * Theirs was kept as a conflicted copy; ours stays in place and from now on counts as
 * an edit of their version, so the next scan uploads it over theirs without a second
 * conflict. The row's content is marked unknown, so the scan re-reads the file and
 * queues the upload even when its stat has not moved — and a file the journal did not
 * know yet (say, the far end of a local move not scanned) gets a row, so it is not
 * mistaken for a new file or a move onto a taken name. Returns the journal change.
 */
export async function adoptAsEditOf(
  ctx: SyncContext,
  p: string,
  revision: string,
  sha256: string | null,
  row: FileRow | undefined = ctx.journal.getFile(p),
): Promise<JournalChanges> {
  const out = new JournalChanges();
  const st = await ctx
    .at(p)
    .then((abs) => fsp.lstat(abs, { bigint: true }))
    .catch(() => undefined);
  if (st?.isFile()) {
    out.upsertFile({
      path: p,
      kind: 'file',
      size: Number(st.size),
      mtimeNs: SMUDGED_MTIME,
      inode: st.ino,
      hash: null,
      syncedRev: revision,
      syncedHash: sha256,
      signature: null, // theirs is the base now; our signature was of an older version
      signatureBlock: null,
    });
  } else if (row) {
    out.upsertFile({ ...row, syncedRev: revision, syncedHash: sha256 });
  }
  ctx.markDirty([p]);
  return out;
}

/**
 * The server kept our write as a conflicted copy (someone else changed the file first).
 * Mirror that locally once the current request is done: our content moves to the
 * copy's name, and the version the server has at the original name is fetched then —
 * the feed may have delivered it before our write, so it would not come again.
 */
export function noteServerConflict(
  ctx: SyncContext,
  op: Op,
  r: Extract<OpResult, { status: 'conflict' }>,
): void {
  const { path, conflictPath } = r.conflict;
  const d = ctx.decide(stated(path, 'refused-conflict'), { copy: conflictPath });
  ctx.status.conflict(path, conflictPath || path, d.id);
  ctx.serverConflicts.push({ op, path, conflictPath, entry: r.entry, action: d.action });
  ctx.control.pullAgain();
}

/**
 * D23: rename our file to the copy name the server kept it under (the caller fetches
 * theirs). Only when the file here is what the copy holds: a put queued before a move here
 * sends the content from where the move carried it (push.ts), and the path may hold a new
 * file since — that one stays (the caller's fetch decides it) and the copy comes down.
 * Returns the journal changes if ours was renamed (or is gone), undefined if it stays.
 */
export async function adoptServerCopy(
  ctx: SyncContext,
  c: ServerConflict,
): Promise<JournalChanges | undefined> {
  if (c.action !== 'adopt-server-copy' || c.op.kind !== 'put' || c.conflictPath === '') return undefined;
  const row = ctx.journal.getFile(c.path);
  const copy = await ctx.client.stat(c.conflictPath);
  if (copy?.kind === 'file' && copy.sha256 !== (await ctx.localHash(row, c.path))) return undefined;
  const from = await ctx.at(c.path);
  const to = await ctx.at(c.conflictPath);
  await fsp.mkdir(nodePath.dirname(to), { recursive: true });
  const moved = await fsp
    .rename(from, to)
    .then(() => true)
    .catch(() => false);
  const st = moved ? await fsp.lstat(to, { bigint: true }).catch(() => undefined) : undefined;
  const out = new JournalChanges();
  if (st && row) {
    out.upsertFile({
      ...row,
      path: c.conflictPath,
      size: Number(st.size),
      mtimeNs: st.mtimeNs,
      inode: st.ino,
      syncedRev: c.entry?.revision ?? null,
      syncedHash: c.entry?.sha256 ?? row.hash,
      signature: null,
      signatureBlock: null,
    });
  }
  return out.deleteFile(c.path);
}
