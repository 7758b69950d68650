/**
 * The namespace writes that move no content (HybridStore.mkdir, remove, move, copy): each
 * one changes the filesystem tier first, then records the change in one metadata
 * transaction, the write order hybrid.ts describes. A crash between the two is repaired by
 * reconcile() at startup (the tier is the truth).
 */
import type { FsProvider } from '@weft/providers';
import type { EntryInfo, OpResult } from '@weft/wire';
import { deleteConflict } from '@weft/wire';
import { ApiError } from '../errors.ts';
import type { Writer } from './hybrid.ts';
import { ignoreNotFound } from './ignore-not-found.ts';
import { LINK_EXTENSION } from './link-file.ts';
import { type ChangeInput, type EntryRow, type MetadataStore, publicEntry } from './metadata.ts';
import { lastEntry, NOOP_SEQ } from './op-results.ts';
import { checkNewPath, checkUserPath } from './paths.ts';
import type { QuotaLedger } from './quota.ts';
import type { ChangeRecord } from '@weft/wire';

/** What the namespace operations need of the store. */
export interface TreeOpsDeps {
  readonly fs: FsProvider;
  readonly meta: MetadataStore;
  readonly quota: QuotaLedger;
  nsPath(userId: string, path: string): string;
  /** Record changes in one metadata transaction. */
  record(userId: string, changes: ChangeInput[], w: Writer): Promise<ChangeRecord[]>;
  /** Create missing ancestors of `path` (tier and index), their changes pushed on `out`. */
  ensureParents(userId: string, path: string, out: ChangeInput[]): Promise<void>;
  /** Put aside the bytes of files about to be deleted (kept versions); returns the unpin. */
  keepContent(userId: string, rows: readonly (EntryRow | EntryInfo)[]): Promise<() => void>;
  stat(userId: string, path: string): Promise<EntryInfo | undefined>;
}

/** Where an entry lives on the filesystem tier: its file, or a large file's link file. */
export function tierPath(d: Pick<TreeOpsDeps, 'nsPath'>, userId: string, e: EntryRow | EntryInfo): string {
  const ns = d.nsPath(userId, e.path);
  return e.kind === 'file' && e.tier === 'large' ? ns + LINK_EXTENSION : ns;
}

export async function mkdir(d: TreeOpsDeps, w: Writer, path: string): Promise<OpResult> {
  checkNewPath(path);
  const cur = await d.meta.getEntry(w.userId, path);
  if (cur?.kind === 'dir') return { status: 'applied', entry: publicEntry(cur), seq: NOOP_SEQ };
  if (cur) throw new ApiError('ALREADY_EXISTS', 'a file exists at that path', { path });
  const changes: ChangeInput[] = [];
  await d.ensureParents(w.userId, path, changes);
  await d.fs.mkdir(d.nsPath(w.userId, path));
  const st = await d.fs.stat(d.nsPath(w.userId, path));
  changes.push({
    type: 'upsert',
    entry: { path, kind: 'dir', size: 0, mtimeMs: Math.floor(st.modifiedMs), fsRevision: st.revision },
  });
  const { entry, seq } = lastEntry(await d.record(w.userId, changes, w));
  return { status: 'applied', ...(entry ? { entry } : {}), seq };
}

export async function remove(
  d: TreeOpsDeps,
  w: Writer,
  path: string,
  base: string | null | undefined,
  own?: readonly string[],
): Promise<OpResult> {
  checkUserPath(path);
  const cur = await d.meta.getEntry(w.userId, path);
  if (!cur) return { status: 'applied', seq: NOOP_SEQ }; // already gone: idempotent
  const conflict = deleteConflict(path, cur, base, own);
  if (conflict) return { status: 'conflict', conflict, entry: publicEntry(cur), seq: NOOP_SEQ };
  const unkeep = await d.keepContent(w.userId, [
    cur,
    ...(cur.kind === 'dir' ? await d.meta.listEntries(w.userId, path, true) : []),
  ]);
  try {
    await d.fs.remove(tierPath(d, w.userId, cur)).catch(ignoreNotFound);
    const records = await d.record(w.userId, [{ type: 'delete', path }], w);
    return { status: 'applied', seq: records.at(-1)?.seq ?? NOOP_SEQ };
  } finally {
    unkeep();
  }
}

export async function move(d: TreeOpsDeps, w: Writer, from: string, to: string): Promise<OpResult> {
  checkUserPath(from);
  checkNewPath(to);
  if (from === to) throw new ApiError('BAD_REQUEST', 'source and destination are the same');
  if (to.startsWith(from + '/')) throw new ApiError('BAD_REQUEST', 'cannot move a folder inside itself');
  const src = await d.meta.getEntry(w.userId, from);
  if (!src) throw new ApiError('NOT_FOUND', 'source not found', { path: from });
  if (await d.meta.getEntry(w.userId, to))
    throw new ApiError('ALREADY_EXISTS', 'destination exists', { path: to });
  const changes: ChangeInput[] = [];
  await d.ensureParents(w.userId, to, changes);
  const suffix = src.kind === 'file' && src.tier === 'large' ? LINK_EXTENSION : '';
  // One rename on the filesystem tier, whatever the folder holds.
  const moved = await d.fs.move(d.nsPath(w.userId, from) + suffix, d.nsPath(w.userId, to) + suffix);
  changes.push({ type: 'move', from, path: to });
  const records = await d.record(w.userId, changes, w);
  await d.meta.setFsRevision(w.userId, to, moved.revision);
  const last = records.at(-1);
  const entry = await d.stat(w.userId, to);
  return { status: 'applied', ...(entry ? { entry } : {}), seq: last?.seq ?? NOOP_SEQ };
}

export async function copy(d: TreeOpsDeps, w: Writer, from: string, to: string): Promise<OpResult> {
  checkUserPath(from);
  checkNewPath(to);
  if (to === from || to.startsWith(from + '/'))
    throw new ApiError('BAD_REQUEST', 'cannot copy onto or inside itself');
  const src = await d.meta.getEntry(w.userId, from);
  if (!src) throw new ApiError('NOT_FOUND', 'source not found', { path: from });
  if (await d.meta.getEntry(w.userId, to))
    throw new ApiError('ALREADY_EXISTS', 'destination exists', { path: to });
  const rows = [src, ...(src.kind === 'dir' ? await d.meta.listEntries(w.userId, from, true) : [])];
  // A copy adds every file it copies to the namespace's usage (dedup or not).
  const held = await d.quota.reserve(
    w.userId,
    rows.reduce((n, r) => n + (r.kind === 'file' ? r.size : 0), 0),
  );
  const changes: ChangeInput[] = [];
  let seq: number;
  try {
    await d.ensureParents(w.userId, to, changes);
    const suffix = src.kind === 'file' && src.tier === 'large' ? LINK_EXTENSION : '';
    // A large file's copy is a copy of its link file: a new reference, not a new upload.
    await d.fs.copy(d.nsPath(w.userId, from) + suffix, d.nsPath(w.userId, to) + suffix);
    for (const r of rows) {
      const target = to + r.path.slice(from.length);
      // Only its tier revision: no hash (stat would hash files past the cache: issue #16).
      const st = await d.fs.statWithoutHash(tierPath(d, w.userId, { ...r, path: target }));
      const { revision: _r, ...rest } = r;
      changes.push({ type: 'upsert', entry: { ...rest, path: target, fsRevision: st.revision } });
    }
    seq = lastEntry(await d.record(w.userId, changes, w)).seq;
  } finally {
    held.release();
  }
  const entry = await d.stat(w.userId, to);
  return { status: 'applied', ...(entry ? { entry } : {}), seq };
}
