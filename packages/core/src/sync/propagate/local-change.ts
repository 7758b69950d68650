/**
 * Propagation, remote → local namespace changes: a remote delete (D12, D13; D15 and D19
 * keep what was edited here) and a remote move (D20). Nothing is unlinked: what goes,
 * goes to the trash. See docs/sync-decisions.md.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { DecisionRow } from '../../decisions.ts';
import { JournalChanges } from '../../journal/changes.ts';
import { type FileRow, SMUDGED_MTIME } from '../../journal/journal.ts';
import type { Op } from '../../ops.ts';
import type { SyncContext } from '../context.ts';
import type { GoneThere } from '../discovery/observe.ts';

/**
 * `p` is gone from the server (discovery/observe.ts observeGone saw it, `d` decided it).
 * What is here as last synced goes to the trash (D12, or D13 when it is gone here too);
 * files that are not what we last synced — edited, or new and not scanned yet — outrank
 * the delete (D15 for a file, D19 for a folder holding them): they stay, their folders are
 * created again, and they go up again. Returns the journal changes.
 */
export async function deleteLocal(
  ctx: SyncContext,
  gone: GoneThere,
  d: DecisionRow,
): Promise<JournalChanges> {
  const out = new JournalChanges();
  const { rows, keep } = gone;
  const p = gone.seen.path;
  const abs = await ctx.at(p);
  if (d.action === 'delete-local' || d.action === 'forget') {
    await ctx.trash.keep(abs, ctx.paths.localRel(p));
    out.deleteFilesUnder(p).forgetLocalNamesUnder(p);
    ctx.status.activity({ kind: 'deleted', path: p, row: d.id });
    return out;
  }
  if (d.action !== 'upload' && d.action !== 'keep-changed') return out;
  const holdsKept = (dir: string): boolean => [...keep.keys()].some((k) => k.startsWith(dir + '/'));
  const ops: Op[] = [];
  // Deepest first, so a folder is looked at after everything in it.
  for (const r of [...rows].sort((a, b) => (a.path < b.path ? 1 : -1))) {
    const rAbs = await ctx.at(r.path);
    if (r.kind === 'file') {
      if (keep.has(r.path)) {
        out.upsertFile({
          ...r,
          syncedRev: null,
          syncedHash: null,
          mtimeNs: SMUDGED_MTIME,
          hash: null,
        });
      } else {
        await ctx.trash.keep(rAbs, ctx.paths.localRel(r.path));
        out.deleteFile(r.path).forgetLocalNamesUnder(r.path);
      }
    } else if (holdsKept(r.path)) {
      out.upsertFile({ ...r, syncedRev: null });
      ops.push({ kind: 'mkdir', path: r.path, created: true });
    } else {
      await ctx.trash.keep(rAbs, ctx.paths.localRel(r.path));
      out.deleteFilesUnder(r.path).forgetLocalNamesUnder(r.path);
    }
  }
  out.enqueue(ops.reverse());
  ctx.markDirty([p]); // the kept files are uploaded as new by the scan
  ctx.status.activity({ kind: 'deleted', path: p, detail: `kept ${keep.size} changed file(s)`, row: d.id });
  return out;
}

/**
 * D20: rename the local entry `from` to `to` as the server did; returns the journal changes
 * (its rows follow it). Undefined when the rename failed here; the caller then takes D21.
 */
export async function moveLocal(
  ctx: SyncContext,
  from: string,
  to: string,
  revision: string,
  /** The moved file's content there: a revision whose content is not our base is not taken. */
  sha256: string | undefined,
  /** The decision-table row that asked for it (D20). */
  rowId: string,
): Promise<JournalChanges | undefined> {
  const absFrom = await ctx.at(from);
  const absTo = await ctx.at(to);
  await fsp.mkdir(nodePath.dirname(absTo), { recursive: true });
  try {
    await fsp.rename(absFrom, absTo);
  } catch {
    return undefined;
  }
  const out = new JournalChanges().moveFiles(from, to).forgetLocalNamesUnder(from);
  ctx.noteLocalName(to, out);
  // The rows as the move leaves them.
  const rows = ctx.journal.filesUnder(from).map((r) => ({ ...r, path: to + r.path.slice(from.length) }));
  const moved = rows[0]?.path === to ? rows[0] : undefined;
  const newerThere = moved?.kind === 'file' && sha256 !== undefined && sha256 !== moved.syncedHash;
  if (moved && !newerThere) {
    rows[0] = { ...moved, syncedRev: revision };
    out.upsertFile(rows[0]);
  }
  requeueMovedEdits(ctx, to, rows, out);
  ctx.status.activity({ kind: 'moved', path: to, detail: from, row: rowId });
  return out;
}

/**
 * Local rows were just renamed to `to` (a rename there done here, or ours moved on to a
 * conflicted-copy name): edits made here and queued under the old name moved with their
 * files, so they go up under the new one (the put of the old path finds nothing there and
 * is dropped). An edit not scanned yet is found by the scan of the new place. `rows`: the
 * rows at and under `to` as they are now; the puts are added to `out`.
 */
export function requeueMovedEdits(
  ctx: SyncContext,
  to: string,
  rows: readonly FileRow[],
  out: JournalChanges,
): JournalChanges {
  const edits: Op[] = [];
  for (const r of rows)
    if (r.kind === 'file' && r.hash !== null && r.hash !== r.syncedHash)
      edits.push({ kind: 'put', path: r.path, hash: r.hash, size: r.size, created: r.syncedRev === null });
  out.enqueue(edits);
  ctx.markDirty([to]);
  return out;
}
