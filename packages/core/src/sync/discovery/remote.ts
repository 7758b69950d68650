/**
 * Remote discovery: what changed on the server — the change feed from the saved cursor, a
 * full listing on first run or after a reset, a subtree listing when one path must be
 * made to match — turned into one observation per path (base, local, remote, kind, move),
 * decided by the table (decisions.ts) and handed to the propagators. Runs of file upserts
 * are decided together so that the small ones come down in bundles.
 */
import type { ChangeRecord, EntryInfo } from '@weft/wire';
import { LocalMerkle, findDivergence } from '../../consistency.ts';
import { type DecisionRow, decide } from '../../decisions.ts';
import type { FileRow } from '../../journal/journal.ts';
import { syncedPathsBetween } from '../../journal/scan-index.ts';
import type { SyncContext } from '../context.ts';
import { keepConflict } from '../propagate/conflict.ts';
import {
  type Download,
  downloadLarge,
  downloadSmall,
  makeLocalDir,
  recordSynced,
} from '../propagate/download.ts';
import { ownToCopy } from '../propagate/kind-clash.ts';
import { deleteLocal, moveLocal } from '../propagate/local-change.ts';
import { holdForQueuedMoves, releasable, released } from './held.ts';
import { observeFile, observeGone, observeKindChange, observeMove, observeNewKind } from './observe.ts';

/** Pull the feed from the saved cursor (or list everything) and apply what it says. */
export async function pull(ctx: SyncContext): Promise<void> {
  const raw = ctx.journal.getMeta('cursor');
  if (raw === undefined || raw === '') {
    await fullReconcile(ctx);
    return;
  }
  let cursor = Number(raw);
  for (;;) {
    // A run of our own recorded writes right after the cursor is not read back (issue #16).
    const past = ctx.ownChanges.skip(cursor);
    if (past !== cursor) ctx.journal.setMeta('cursor', String(past));
    cursor = past;
    const page = await ctx.client.changes(cursor);
    if (page.reset) {
      await fullReconcile(ctx);
      return;
    }
    // Known and not yet applied: not up to date until they are (issue #14).
    if (page.changes.length > 0) ctx.status.update({ state: 'syncing' });
    for (const c of page.changes) ctx.trace('remote', c);
    await applyRemoteBatch(ctx, page.changes);
    cursor = page.cursor;
    ctx.journal.setMeta('cursor', String(cursor));
    if (!page.hasMore) return;
  }
}

/** Entries a page of the full listing holds (the server's MAX_LIST_PAGE at most). */
export const LIST_PAGE = 2_000;

/**
 * First sync or a reset feed: compare the remote listing with the journal — a page at a
 * time when the store pages it (issue #16: a whole listing of a million entries was held
 * by both sides at once), else whole.
 */
async function fullReconcile(ctx: SyncContext): Promise<void> {
  if (ctx.client.listPage) {
    await pagedReconcile(ctx, ctx.client.listPage.bind(ctx.client));
    return;
  }
  const listing = await ctx.client.list('', true);
  ctx.status.update({ state: 'syncing' });
  const remote = new Map(listing.entries.map((e) => [e.path, e]));
  const held = holdForQueuedMoves(ctx);
  const entries = listing.entries.filter((e) => !held(e.path));
  const dirs = entries.filter((e) => e.kind === 'dir').sort((a, b) => (a.path < b.path ? -1 : 1));
  for (const d of dirs) await ctx.guarded(d.path, () => applyRemoteDir(ctx, d));
  await applyRemoteFiles(
    ctx,
    entries.filter((e) => e.kind === 'file'),
  );
  // Rows the server no longer has (and we had synced): deleted remotely. The index a page at
  // a time, not every whole row at once (a 1,000,000-file journal: hundreds of MiB of objects).
  for await (const row of ctx.journal.indexUnderPaged('')) {
    if (row.synced && !remote.has(row.path) && !held(row.path))
      await ctx.guarded(row.path, () => applyRemoteDelete(ctx, row.path));
  }
  ctx.journal.setMeta('cursor', String(listing.seq));
}

/**
 * The listing a page at a time: each page's folders, then its files, then the synced rows of
 * its span of the key space (after the last page's end, through its own) it does not name —
 * gone remotely. The pages and the journal share one order (bytes of the path), so each row
 * is compared exactly once; the feed then goes on from the first page's seq, which replays
 * whatever landed while the pages were read.
 */
async function pagedReconcile(
  ctx: SyncContext,
  listPage: NonNullable<SyncContext['client']['listPage']>,
): Promise<void> {
  ctx.status.update({ state: 'syncing' });
  const held = holdForQueuedMoves(ctx);
  let seq: number | undefined;
  let after = '';
  for (;;) {
    const page = await listPage('', {
      limit: LIST_PAGE,
      ...(seq === undefined ? {} : { after, seq }),
    });
    seq ??= page.seq;
    const named = new Set(page.entries.map((e) => e.path));
    const entries = page.entries.filter((e) => !held(e.path));
    const dirs = entries.filter((e) => e.kind === 'dir');
    for (const d of dirs) await ctx.guarded(d.path, () => applyRemoteDir(ctx, d));
    await applyRemoteFiles(
      ctx,
      entries.filter((e) => e.kind === 'file'),
    );
    for await (const path of syncedPathsBetween(ctx.journal, after, page.next)) {
      if (!named.has(path) && !held(path)) await ctx.guarded(path, () => applyRemoteDelete(ctx, path));
    }
    if (page.next === undefined) break;
    after = page.next;
  }
  ctx.journal.setMeta('cursor', String(seq));
}

/**
 * Apply a page of changes in order, but download runs of file upserts together (one
 * bundle request for many small files). A run ends at any other kind of change, so
 * deletes, moves and folder changes keep their place in the order.
 */
async function applyRemoteBatch(ctx: SyncContext, changes: readonly ChangeRecord[]): Promise<void> {
  const held = holdForQueuedMoves(ctx);
  let run = new Map<string, { entry: EntryInfo; device: string | undefined }>();
  const flush = async (): Promise<void> => {
    if (run.size === 0) return;
    const byDevice = new Map<string | undefined, EntryInfo[]>();
    for (const { entry, device } of run.values()) {
      const list = byDevice.get(device) ?? [];
      list.push(entry);
      byDevice.set(device, list);
    }
    run = new Map();
    for (const [device, entries] of byDevice) await applyRemoteFiles(ctx, entries, device);
  };
  for (const c of changes) {
    if (held(...(c.type === 'move' ? [c.from, c.path] : [c.path]))) {
      run.delete(c.path); // an earlier version of it is not applied either
      continue;
    }
    if (c.type === 'upsert' && c.entry.kind === 'file' && !ctx.ignore.ignores(c.path, false)) {
      run.delete(c.path); // a later version of the same path replaces the earlier one
      run.set(c.path, { entry: c.entry, device: c.deviceName });
      continue;
    }
    await flush();
    await ctx.guarded(c.path, () => applyRemote(ctx, c));
  }
  await flush();
}

async function applyRemote(ctx: SyncContext, c: ChangeRecord): Promise<void> {
  if (ctx.ignore.ignores(c.path, c.type !== 'delete' && c.entry.kind === 'dir')) return;
  if (c.type === 'upsert') {
    if (c.entry.kind === 'dir') await applyRemoteDir(ctx, c.entry);
    else await applyRemoteFiles(ctx, [c.entry], c.deviceName);
  } else if (c.type === 'delete') {
    await applyRemoteDelete(ctx, c.path);
  } else {
    await applyRemoteMove(ctx, c.from, c.path, c.entry);
  }
}

/** Remote entries observed between two turns of the event loop. */
const OBSERVED_PER_TURN = 100;

/**
 * Remote file entries: observe each path (base, local, remote), decide, and propagate —
 * small downloads in bundles, large ones by delta or whole.
 */
export async function applyRemoteFiles(
  ctx: SyncContext,
  entries: readonly EntryInfo[],
  device?: string,
): Promise<void> {
  const decided: { entry: EntryInfo; row: FileRow | undefined; local: string | undefined; d: DecisionRow }[] =
    [];
  // The echoes of our own uploads looked up together, one statement a page (issue #16), for
  // the paths the page names once: nothing this loop records can touch another entry's row.
  const named = new Map<string, number>();
  for (const e of entries) named.set(e.path, (named.get(e.path) ?? 0) + 1);
  const echoes = ctx.journal.syncedEchoHashes(
    entries.filter((e) => e.kind === 'file' && named.get(e.path) === 1),
  );
  let sinceTurn = 0;
  for (const entry of entries) {
    // A turn of the event loop now and then: a page of 1,000 echoes of our own uploads
    // observed in one go held the agent's UI for 300 ms on a loaded machine (issue #16).
    if (++sinceTurn === OBSERVED_PER_TURN) {
      sinceTurn = 0;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    // Our own write echoed, with nothing changed here since (its row synced at this revision,
    // its content the synced one): the echo's observation (as observeFile makes it) from one
    // indexed look-up, not a whole row per file (a 100,000-file drop echoes every file; issue
    // #16), and nothing more when its row (D16) says so.
    const echoed =
      entry.kind !== 'file'
        ? undefined
        : named.get(entry.path) === 1
          ? echoes.get(entry.path)
          : ctx.journal.syncedEchoHash(entry.path, entry.revision);
    if (echoed !== undefined) {
      const base = echoed ?? undefined;
      const kind = { ...(base === undefined ? {} : { base: 'file' as const }), remote: 'file' as const };
      const seen = { path: entry.path, base, remote: entry.sha256, local: base, kind, hint: 'echo' as const };
      if (decide(seen).action === 'nothing') continue;
    }
    let row = ctx.journal.getFile(entry.path);
    const clash = await observeNewKind(ctx, entry, row);
    if (clash) {
      // A folder made here (never sent), a file made there: both kept (D27).
      const d = ctx.decide(clash, { rev: entry.revision });
      const moved = d.action === 'conflict' ? await ownToCopy(ctx, entry.path, d.id) : undefined;
      if (moved) {
        ctx.commit(moved);
        row = undefined;
      }
    }
    let o = await observeFile(ctx, entry, row);
    if (o.hint === 'echo') {
      // Our own write, or already applied: not traced (every upload of ours echoes).
      const d = decide(o);
      if (d.action !== 'nothing')
        decided.push({ entry, row, local: await ctx.localHash(row, entry.path), d });
      continue;
    }
    if (o.hint === 'sent') {
      // Our own write whose acknowledgement was lost (a crash): it is the new base.
      const d = ctx.decide(o, { rev: entry.revision });
      if (d.action === 'record') {
        ctx.commit(recordSynced(entry, row, o.local ?? entry.sha256).clearSent(entry.path));
        continue;
      }
      o = { ...o, hint: undefined };
    }
    decided.push({ entry, row, local: o.local, d: ctx.decide(o, { rev: entry.revision }) });
  }
  const small: Download[] = [];
  for (const { entry, row, local, d } of decided) {
    switch (d.action) {
      case 'record':
      case 'nothing':
        ctx.commit(recordSynced(entry, row, local));
        break;
      case 'upload':
        // Our newer local edit is queued; the remote is at our base or we win a delete race.
        break;
      case 'conflict':
        await ctx.guarded(entry.path, async () =>
          ctx.commit(await keepConflict(ctx, entry, row, device, d.id)),
        );
        break;
      case 'download':
        if (entry.size < ctx.small) small.push({ entry, local, row: d.id });
        else
          await ctx.guarded(entry.path, async () =>
            ctx.commit(await downloadLarge(ctx, { entry, local, row: d.id })),
          );
        break;
      default:
        break;
    }
  }
  await downloadSmall(ctx, small, (changes) => ctx.commit(changes));
}

/** A remote folder: created here (D3); a file made here and never sent at its name moves on to a copy first (D27). */
async function applyRemoteDir(ctx: SyncContext, entry: EntryInfo): Promise<void> {
  const clash = await observeNewKind(ctx, entry, ctx.journal.getFile(entry.path));
  if (clash) {
    // A file made here (never sent), a folder made there: both kept (D27).
    const d = ctx.decide(clash, { rev: entry.revision });
    if (d.action === 'conflict') ctx.commit(await ownToCopy(ctx, entry.path, d.id));
  }
  ctx.commit(await makeLocalDir(ctx, entry));
}

/** `p` is gone from the server: observe what is here, decide (D12, D13, D15, D19), propagate. */
async function applyRemoteDelete(ctx: SyncContext, p: string): Promise<void> {
  const gone = await observeGone(ctx, p);
  if (!gone) return;
  const d = ctx.decide(gone.seen, { kept: gone.keep.size });
  ctx.commit(await deleteLocal(ctx, gone, d));
}

/** A remote move: the same rename here (D20), or else fetch the destination as new (D21). */
async function applyRemoteMove(ctx: SyncContext, from: string, to: string, entry: EntryInfo): Promise<void> {
  const row = ctx.journal.getFile(from);
  const seen = await observeMove(ctx, from, entry, row);
  let d = ctx.decide(seen);
  if (d.action === 'move-local') {
    const moved = await moveLocal(ctx, from, to, entry.revision, entry.sha256, d.id);
    if (moved) {
      ctx.commit(moved);
      // What changed there before the move and could not come down under the old name
      // (its download found it moved already) is decided as usual now: an edit (D8/D10),
      // a file put into the folder (D3). The feed will not repeat it.
      if (entry.kind === 'file') await applyRemoteFiles(ctx, [entry]);
      // (a later change may have removed it already). What the rename carried here that the
      // server's folder lacks goes: content fetched as it is now, under the old name, ahead
      // of the feed (a D21 earlier in this page), is not in the folder the rename made there.
      else await fetchRemoteSubtree(ctx, to, undefined, true);
      return;
    }
    // The rename failed here: decided again as a blocked move.
    d = ctx.decide({ ...seen, moveHint: { from, sourceHere: true, destinationFree: false } });
  }
  if (d.action !== 'download') return;
  // We did not have it (or something is in the way): fetch the destination as new content.
  // Synced entries under it that the server's folder lacks were deleted there: they go
  // (edits kept) — say our own rename of a folder another device emptied meanwhile, whose
  // echo this is (seed 1262).
  if (entry.kind === 'dir') await fetchRemoteSubtree(ctx, to, undefined, true);
  else await applyRemoteFiles(ctx, [entry]);
  if (row) await applyRemoteDelete(ctx, from);
}

/**
 * Bring down whatever the server holds at `p` (a file, or a folder and its content).
 * `dropMissing`: synced entries under the folder the server no longer has go too.
 */
export async function fetchRemoteSubtree(
  ctx: SyncContext,
  p: string,
  known?: EntryInfo,
  dropMissing = false,
): Promise<void> {
  const current = known ?? (await ctx.client.stat(p));
  if (current?.kind === 'file') {
    await applyRemoteFiles(ctx, [current]);
  } else if (current?.kind === 'dir') {
    const listing = await ctx.client.list(p, true);
    if (dropMissing) {
      const there = new Set(listing.entries.map((e) => e.path));
      const gone = ctx.journal
        .filesUnder(p)
        .filter((r) => r.path !== p && r.syncedRev !== null && !there.has(r.path))
        .sort((a, b) => (a.path < b.path ? -1 : 1));
      // Top-most first; a folder's delete takes its content with it.
      for (const r of gone) if (ctx.journal.getFile(r.path)) await applyRemoteDelete(ctx, r.path);
    }
    await applyRemoteDir(ctx, current);
    for (const d of listing.entries.filter((e) => e.kind === 'dir')) await applyRemoteDir(ctx, d);
    await applyRemoteFiles(
      ctx,
      listing.entries.filter((e) => e.kind === 'file'),
    );
  }
}

/**
 * After the push: each path held while a move of ours waited (held.ts) and no longer
 * touched by one is made to match the server as it is now.
 */
export async function releaseHeld(ctx: SyncContext): Promise<void> {
  for (const p of releasable(ctx)) {
    ctx.trace('release', { path: p });
    await ctx.guarded(p, () => repairPath(ctx, p));
    released(ctx, p);
  }
}

/** Make `p` match the server: what it holds comes down, what it lacks goes (edits kept). */
export async function repairPath(ctx: SyncContext, p: string): Promise<void> {
  const current = await ctx.client.stat(p);
  const row = ctx.journal.getFile(p);
  if (row && row.kind !== current?.kind) {
    if (current) {
      // A file where we had a folder (or the other way round): ours goes first (D22).
      const d = ctx.decide(observeKindChange(row, current));
      if (d.action === 'replace-kind') await applyRemoteDelete(ctx, p);
    } else {
      await applyRemoteDelete(ctx, p); // nothing there: decided as a remote delete
    }
  }
  if (current) await fetchRemoteSubtree(ctx, p, current, true);
}

/**
 * Compare the journal's synced view with the server's namespace by Merkle hashes and
 * repair every entry where they differ as a remote change (download, delete, or keep
 * both on a conflict). Entries with local operations still queued are left to those.
 */
export async function runConsistencyCheck(
  ctx: SyncContext,
): Promise<{ paths: string[]; roundTrips: number; repaired: number; atMs: number }> {
  const local = new LocalMerkle(ctx.journal.allFiles());
  const found = await findDivergence(local, (paths) => ctx.client.merkle(paths));
  const busy = ctx.journal
    .pendingOps()
    .flatMap(({ op }) => (op.kind === 'move' ? [op.from, op.to] : [op.path]));
  const related = (a: string, b: string): boolean =>
    a === b || a.startsWith(b + '/') || b.startsWith(a + '/');
  let repaired = 0;
  for (const p of found.paths) {
    if (busy.some((q) => related(p, q))) continue;
    ctx.trace('repair', p);
    await repairPath(ctx, p);
    repaired += 1;
  }
  if (found.paths.length > 0)
    ctx.status.activity({
      kind: 'error',
      path: '',
      detail: `consistency check repaired ${repaired} item(s)`,
    });
  return { ...found, repaired, atMs: ctx.now() };
}
