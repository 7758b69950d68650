/**
 * Ingest, the mirror's discovery: each replica's change feed is read from its persisted
 * cursor (a `reset`, a first start or a provider without a feed means a full re-listing,
 * diffed against what the engine last saw there). Changes the engine caused itself are
 * recognised by revision (and, after a restart, by content hash at processing time) and
 * dropped; the rest are snapshotted (stat, read, stat: content and revision agree) and
 * appended to the share's one ordered log, with the cursor, in one transaction. A delete
 * followed by upserts of the same revisions/hashes becomes a move (move-detect.ts).
 */
import { type Entry, hasChangeFeed } from '@weft/providers';
import type { EngineContext, Replica, SyntheticChange } from './context.ts';
import { isNotFound } from './provider-failures.ts';
import { detectMoves, sameAsSeen } from './move-detect.ts';
import type { Op } from './ops.ts';
import { isParked, isParkedFolder } from './parking.ts';
import { fullPath, relativePath, snapshot } from './replica-view.ts';
import { isUnder, rebase } from './tree-paths.ts';

type Append = { op: Op; data?: Uint8Array };

/**
 * Read one replica's feed (or re-list it) into the log. `first`: its first read by this
 * engine (a replica with relistOnStart is re-listed). Returns entries appended.
 */
export async function ingest(ctx: EngineContext, r: Replica, first: boolean): Promise<number> {
  const p = r.provider;
  if (!hasChangeFeed(p)) return relist(ctx, r, undefined);
  const cursor = await ctx.store.cursor(r.id);
  if (cursor === undefined || (first && r.relistOnStart)) return relist(ctx, r, await p.latestCursor());
  const changes: SyntheticChange[] = [];
  let c = cursor;
  for (;;) {
    const page = await p.changes(c, { limit: ctx.pageSize });
    if (page.reset) {
      ctx.log.warn({ replica: r.id }, 'change feed reset: re-listing');
      return relist(ctx, r, page.cursor);
    }
    for (const ch of page.changes) {
      const rel = relativePath(r, ch.path);
      if (rel === undefined || rel === '' || isParked(rel)) continue;
      changes.push(
        ch.type === 'delete' ? { type: 'delete', path: rel } : { type: 'upsert', path: rel, entry: ch.entry },
      );
    }
    c = page.cursor;
    if (!page.hasMore) break;
  }
  return ingestBatch(ctx, r, changes, c);
}

/**
 * Full listing diffed against what we saw: deletes of what vanished, upserts of the rest.
 * `deletes` false (a verification): what vanished is taken out of the books instead.
 */
export async function relist(
  ctx: EngineContext,
  r: Replica,
  cursor: string | undefined,
  deletes = true,
): Promise<number> {
  ctx.log.trace({ replica: r.id }, 're-listing');
  if (deletes) ctx.stats.relistings += 1; // a verification's listing counts as one (engine.ts)
  const entries: Entry[] = [];
  for await (const e of r.provider.list(r.root, { recursive: true })) entries.push(e);
  const present = new Set<string>();
  const changes: SyntheticChange[] = [];
  const upserts: SyntheticChange[] = [];
  for (const e of entries) {
    const rel = relativePath(r, e.path);
    if (rel !== undefined && e.kind === 'dir' && isParkedFolder(rel)) ctx.parking.adopt(r, rel, e.path);
    if (rel === undefined || rel === '' || isParked(rel)) continue;
    present.add(rel);
    upserts.push({ type: 'upsert', path: rel, entry: { ...e, path: rel } });
  }
  const seen = ctx.view.seenOf(r);
  const gone = [...seen.keys()].filter((k) => !present.has(k)).sort();
  if (!deletes) {
    // A verification: what the books held and the listing does not is taken out of the
    // books, not deleted elsewhere — a wrong book must not delete the share's last copy;
    // reconcile() sends the share's version back if the replica should hold it.
    if (gone.length > 0)
      ctx.log.warn(
        { replica: r.id, paths: gone.slice(0, 20) },
        'verification: not on the replica, out of the books',
      );
    for (const g of gone) {
      await ctx.store.setKnown(r.id, g, undefined);
      seen.delete(g);
    }
    gone.length = 0;
  }
  for (const g of gone) {
    const last = changes.at(-1);
    if (last && isUnder(g, last.path)) continue;
    changes.push({ type: 'delete', path: g });
  }
  upserts.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  // A verification trusts the books only: a file there that the books lack is logged even
  // if this engine wrote that revision (its own write, moved out of the books since).
  return ingestBatch(ctx, r, [...changes, ...upserts], cursor, deletes);
}

async function ingestBatch(
  ctx: EngineContext,
  r: Replica,
  batch: SyntheticChange[],
  cursor: string | undefined,
  trustOurs = true,
): Promise<number> {
  const { view, stats } = ctx;
  // A folder's delete implies its content's: Dropbox lists the children's deletes first.
  const deleted = batch.filter((c) => c.type === 'delete').map((c) => c.path);
  const changes = batch.filter(
    (c) => c.type !== 'delete' || !deleted.some((d) => d !== c.path && isUnder(c.path, d)),
  );
  const moves = detectMoves(view.seenOf(r), changes);
  const consumed = new Set<number>();
  for (const m of moves.values()) for (const n of m.consumed) consumed.add(n);
  const appends: Append[] = [];
  for (let i = 0; i < changes.length; i++) {
    if (consumed.has(i)) continue;
    const ch = changes[i];
    if (!ch) continue;
    const move = moves.get(i);
    if (move) {
      const a = await ingestMove(ctx, r, ch.path, move.to, move.kind);
      if (a) appends.push(a);
      else {
        // Moved and gone again since (or changed kind): what remains is a delete.
        const files = view.seenFiles(r, ch.path);
        view.dropSeenUnder(r, ch.path);
        appends.push({ op: { type: 'delete', path: ch.path, files } });
      }
      continue;
    }
    if (ch.type === 'delete') {
      if (![...view.seenOf(r).keys()].some((k) => isUnder(k, ch.path))) {
        stats.echoes += 1;
        continue;
      }
      const was = view.seenOf(r).get(ch.path);
      const now = await snapshot(r, ch.path, false);
      if (now !== undefined && (was === undefined || now.kind === was.kind || now.kind === 'dir')) {
        // There again (or never gone: only things inside were). A file's new content
        // follows as an upsert; what was inside a folder and is not now: deletes.
        for (const gone of await vanishedUnder(ctx, r, ch.path)) appends.push(gone);
        continue;
      }
      const files = view.seenFiles(r, ch.path);
      view.dropSeenUnder(r, ch.path);
      appends.push({ op: { type: 'delete', path: ch.path, files } });
      continue;
    }
    const s = view.seenOf(r).get(ch.path);
    if (
      sameAsSeen(s, ch.entry) ||
      (trustOurs && ch.entry.kind === 'file' && view.isOurs(r, ch.path, ch.entry.revision))
    ) {
      stats.echoes += 1;
      continue;
    }
    const snap = await snapshot(r, ch.path, true);
    if (!snap) continue; // gone again: its delete follows
    if (snap.kind === 'dir') {
      if (s?.kind === 'dir') continue;
      view.setSeen(r, ch.path, { kind: 'dir', revision: '', sha256: '' });
      appends.push({ op: { type: 'dir', path: ch.path } });
      continue;
    }
    if (s?.kind === 'file' && s.revision === snap.revision) {
      stats.echoes += 1;
      continue;
    }
    if (trustOurs && view.isOurs(r, ch.path, snap.revision)) {
      stats.echoes += 1;
      continue;
    }
    view.setSeen(r, ch.path, { kind: 'file', revision: snap.revision, sha256: snap.sha256, hash: snap.hash });
    appends.push({
      op: {
        type: 'file',
        path: ch.path,
        revision: snap.revision,
        sha256: snap.sha256,
        size: snap.data?.byteLength ?? 0,
      },
      data: snap.data,
    });
  }
  const now = ctx.now();
  await ctx.store.transaction(async (tx) => {
    for (const a of appends) await tx.append(r.id, a.op, a.data, now);
    if (cursor !== undefined) await tx.setCursor(r.id, cursor);
  });
  stats.ingested += appends.length;
  for (const a of appends) ctx.log.trace({ replica: r.id, op: a.op }, 'ingested');
  if (appends.length > 0) ctx.log.debug({ replica: r.id, entries: appends.length }, 'ingested');
  return appends.length;
}

/** Deletes of what we saw below `dir` that is no longer there (top-most only). */
async function vanishedUnder(ctx: EngineContext, r: Replica, dir: string): Promise<Append[]> {
  const present = new Set<string>();
  try {
    const st = await r.provider.stat(fullPath(r, dir));
    if (st.kind === 'dir') {
      for await (const e of r.provider.list(fullPath(r, dir), { recursive: true })) {
        const rel = relativePath(r, e.path);
        if (rel !== undefined && !isParked(rel)) present.add(rel);
      }
    }
  } catch (e) {
    if (!isNotFound(e)) throw e;
  }
  const out: Append[] = [];
  let last: string | undefined;
  for (const k of [...ctx.view.seenOf(r).keys()].filter((k) => isUnder(k, dir) && k !== dir).sort()) {
    if (present.has(k) || (last !== undefined && isUnder(k, last))) continue;
    last = k;
    const files = ctx.view.seenFiles(r, k);
    ctx.view.dropSeenUnder(r, k);
    out.push({ op: { type: 'delete', path: k, files } });
  }
  return out;
}

async function ingestMove(
  ctx: EngineContext,
  r: Replica,
  from: string,
  to: string,
  kind: 'file' | 'dir',
): Promise<Append | undefined> {
  const revisions: Record<string, { revision: string; sha256: string }> = {};
  const seen = ctx.view.seenOf(r);
  const files = ctx.view.seenFiles(r, from);
  let data: Uint8Array | undefined;
  if (kind === 'file') {
    const snap = await snapshot(r, to, true);
    if (!snap || snap.kind !== 'file') return undefined;
    revisions[''] = { revision: snap.revision, sha256: snap.sha256 };
    data = snap.data;
    seen.delete(from);
    seen.set(to, { kind: 'file', revision: snap.revision, sha256: snap.sha256, hash: snap.hash });
  } else {
    const entries = new Map<string, Entry>();
    try {
      for await (const e of r.provider.list(fullPath(r, to), { recursive: true })) {
        const rel = relativePath(r, e.path);
        if (rel !== undefined && !isParked(rel)) entries.set(rel, e);
      }
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
    for (const [k, v] of [...seen.entries()]) {
      if (!isUnder(k, from)) continue;
      seen.delete(k);
      const target = rebase(k, from, to);
      const now = entries.get(target);
      if (!now || now.kind !== v.kind) continue;
      // Edited after the move: not "moved unchanged"; its own upsert in the batch follows.
      if (v.kind === 'file' && !sameAsSeen(v, now)) continue;
      if (v.kind === 'file') {
        revisions[target.slice(to.length + 1)] = { revision: now.revision, sha256: v.sha256 };
        seen.set(target, { kind: 'file', revision: now.revision, sha256: v.sha256, hash: now.hash?.value });
      } else seen.set(target, v);
    }
    seen.set(to, { kind: 'dir', revision: '', sha256: '' });
  }
  return { op: { type: 'move', from, to, kind, revisions, files }, data };
}
