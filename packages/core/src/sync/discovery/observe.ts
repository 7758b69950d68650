/**
 * Remote discovery's observations: for each remote change (an entry from the feed, a
 * listing or a repair), what is known of its path — the base and local content the
 * journal and the disk hold, the remote content, the kinds, a move — as one Observation
 * (decisions.ts) for decide(). Reading the disk happens here; nothing is written.
 */
import * as fsp from 'node:fs/promises';
import type { EntryInfo } from '@weft/wire';
import type { Observation } from '../../decisions.ts';
import type { FileRow } from '../../journal/journal.ts';
import { PARTIAL_PREFIX } from '../../local-fs.ts';
import type { SyncContext } from '../context.ts';

/** The base of an entry as last synced, where the journal keeps no content hash (a folder). */
const SYNCED = 'as synced';

/**
 * A remote file entry: the base and local content the journal and the disk hold, the
 * remote content, and the circumstance that decides first — our own write echoed (D16:
 * its revision is the synced one; the disk is not read, the journal's content stands for
 * it) or acknowledged never (D17: content this device sent).
 */
export async function observeFile(
  ctx: SyncContext,
  entry: EntryInfo,
  row: FileRow | undefined,
): Promise<Observation> {
  const base = row?.syncedHash ?? undefined;
  const o = { path: entry.path, base, remote: entry.sha256 };
  const kind = { ...(base === undefined ? {} : { base: 'file' as const }), remote: 'file' as const };
  if (row?.syncedRev === entry.revision) return { ...o, local: row.hash ?? undefined, kind, hint: 'echo' };
  const local = await ctx.localHash(row, entry.path);
  const seen: Observation = { ...o, local, kind: local === undefined ? kind : { ...kind, local: 'file' } };
  return entry.sha256 && ctx.journal.wasSent(entry.path, entry.sha256) ? { ...seen, hint: 'sent' } : seen;
}

/**
 * A remote entry of one kind where this device made one of the other and never sent it (a
 * folder made here, a file there, or the other way round: D27). Undefined: no such clash.
 */
export async function observeNewKind(
  ctx: SyncContext,
  entry: EntryInfo,
  row: FileRow | undefined,
): Promise<Observation | undefined> {
  if (row === undefined || row.syncedRev !== null || row.kind === entry.kind) return undefined;
  if (row.kind === 'file') {
    // Still a file on disk (the row may be older than the disk).
    const st = await fsp.lstat(await ctx.at(entry.path)).catch(() => undefined);
    if (!st?.isFile()) return undefined;
  }
  const local = row.kind === 'file' ? (row.hash ?? undefined) : undefined;
  return {
    path: entry.path,
    base: undefined,
    local,
    remote: entry.sha256,
    kind: { local: row.kind, remote: entry.kind },
  };
}

/** A path the journal holds as one kind and the server now as the other (D22). */
export function observeKindChange(row: FileRow, current: EntryInfo): Observation {
  return {
    path: row.path,
    base: row.syncedHash ?? undefined,
    local: row.hash ?? undefined,
    remote: current.sha256,
    kind: { base: row.kind, remote: current.kind },
  };
}

/** A remote move: where the entry was, whether we hold that source, whether its new name is free here. */
export async function observeMove(
  ctx: SyncContext,
  from: string,
  entry: EntryInfo,
  row: FileRow | undefined,
): Promise<Observation> {
  const target = ctx.journal.getFile(entry.path);
  const inTheWay = target ? undefined : await fsp.lstat(await ctx.at(entry.path)).catch(() => undefined);
  return {
    path: entry.path,
    base: row?.syncedHash ?? undefined,
    local: row?.hash ?? undefined,
    remote: entry.sha256,
    kind: { remote: entry.kind },
    moveHint: { from, sourceHere: row !== undefined, destinationFree: !target && !inTheWay },
  };
}

/** A path gone from the server, as seen here: its rows, and what here is new or changed since the base. */
export interface GoneThere {
  readonly seen: Observation;
  /** The journal's rows at and under the path. */
  readonly rows: readonly FileRow[];
  /** Files here that are not what we last synced, by path, with their content. */
  readonly keep: ReadonlyMap<string, string>;
}

/**
 * `p` is gone from the server. Undefined: the journal holds nothing there. A file edited
 * here since the base is D15; a folder holding files new or changed since is D19; all here
 * as last synced is D12 (D13 when it is gone here too).
 */
export async function observeGone(ctx: SyncContext, p: string): Promise<GoneThere | undefined> {
  const rows = ctx.journal.filesUnder(p);
  if (rows.length === 0) return undefined;
  const top = rows[0]?.path === p ? rows[0] : undefined;
  const keep = new Map<string, string>();
  for (const f of await localFilesUnder(ctx, p)) {
    const row = ctx.journal.getFile(f);
    const local = await ctx.localHash(row, f);
    if (local !== undefined && (!row || row.kind !== 'file' || local !== row.syncedHash)) keep.set(f, local);
  }
  const kept = keep.get(p);
  let seen: Observation;
  if (top?.kind === 'file' && kept !== undefined) {
    const base = top.syncedHash ?? undefined;
    seen = { path: p, base, local: kept, remote: undefined, kind: { local: 'file' } };
  } else if (keep.size > 0) {
    const base = top?.syncedHash ?? SYNCED;
    seen = { path: p, base, local: undefined, remote: undefined, kind: {}, hint: 'folder-gone-with-changes' };
  } else {
    // All here is as last synced (or gone here too): its content is the base.
    const here = (await fsp.lstat(await ctx.at(p)).catch(() => undefined)) !== undefined;
    const base = top?.syncedHash ?? SYNCED;
    seen = { path: p, base, local: here ? base : undefined, remote: undefined, kind: {} };
  }
  return { seen, rows, keep };
}

/** Files on disk at or under `p` (not ignored, not our temp files), as folder paths. */
async function localFilesUnder(ctx: SyncContext, p: string): Promise<string[]> {
  const out: string[] = [];
  const visit = async (rel: string): Promise<void> => {
    const abs = await ctx.at(rel).catch(() => undefined);
    if (abs === undefined) return;
    const st = await fsp.lstat(abs).catch(() => undefined);
    if (!st) return;
    if (st.isFile()) {
      if (!ctx.ignore.ignores(rel, false)) out.push(rel);
      return;
    }
    if (!st.isDirectory() || ctx.ignore.ignores(rel, true)) return;
    const names = await fsp.readdir(abs).catch(() => [] as string[]);
    for (const n of names) {
      if (n.startsWith(PARTIAL_PREFIX)) continue;
      const remote = ctx.paths.remoteName(n.normalize('NFC'));
      if (remote !== undefined) await visit(`${rel}/${remote}`);
    }
  };
  await visit(p);
  return out;
}
