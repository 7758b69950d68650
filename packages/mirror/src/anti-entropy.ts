/**
 * Anti-entropy: a verification re-lists every replica against the books (the persisted
 * `known` rows — what a restarted engine starts from — not the in-memory view), and, when
 * that finds nothing, a reconciliation compares every replica's books with the share's
 * head and logs what differs. A feed may miss a change; this is what catches it.
 */
import type { EngineContext, Replica, Seen } from './context.ts';
import { relist } from './ingest.ts';
import type { Op } from './ops.ts';
import type { KnownEntry } from './store.ts';
import { seenFromBooks, snapshot } from './replica-view.ts';

/**
 * Re-list every replica against the books. Returns log entries appended (the caller
 * drains them). Feed cursors are left where they are: a change both listed here and read
 * later from a feed is recognised as seen.
 */
export async function relistAgainstBooks(ctx: EngineContext, reconciled: Set<string>): Promise<number> {
  let found = 0;
  for (const r of ctx.replicas) {
    const books = await seenFromBooks(ctx.store, r); // the books (plus entries pending at r: none in quiesce)
    const mine = ctx.view.seenOf(r);
    const show = (e: Seen | undefined): string =>
      e ? (e.kind === 'dir' ? 'dir' : e.sha256.slice(0, 8)) : '-';
    const differing = [...new Set([...books.keys(), ...mine.keys()])].filter(
      (k) => show(books.get(k)) !== show(mine.get(k)),
    );
    if (differing.length > 0)
      ctx.log.warn(
        {
          replica: r.id,
          paths: differing
            .slice(0, 20)
            .map((k) => `${k}: books ${show(books.get(k))}, seen ${show(mine.get(k))}`),
        },
        'books and in-memory view differ: re-listing against the books',
      );
    ctx.view.replace(r, books);
    found += await relist(ctx, r, undefined, false);
  }
  if (found === 0) found += await reconcile(ctx, reconciled);
  return found;
}

/**
 * With the books true to every replica and nothing pending, every replica should hold the
 * share's head. Where one does not, nothing is dropped: a file a replica holds that the
 * head does not (or with other content) is logged from that replica, as if its feed had
 * reported it (a different head version becomes a conflicted copy, as usual); a head file
 * or folder a replica lacks is sent to that replica alone. Each (replica, path, version)
 * is tried once per engine (`reconciled`), so a name a cloud refuses cannot loop. Returns
 * entries appended.
 */
async function reconcile(ctx: EngineContext, reconciled: Set<string>): Promise<number> {
  const { store, replicas } = ctx;
  const head = new Map((await store.headUnder('')).map((h) => [h.path, h] as const));
  const books = new Map<string, Map<string, KnownEntry & { path: string }>>();
  for (const r of replicas)
    books.set(r.id, new Map((await store.knownUnder(r.id, '')).map((k) => [k.path, k])));
  const paths = [...new Set([...head.keys(), ...[...books.values()].flatMap((b) => [...b.keys()])])].sort();
  const now = ctx.now();
  let n = 0;
  const once = (r: Replica, path: string, version: string): boolean => {
    const key = `${r.id}\u0000${path}\u0000${version}`;
    if (reconciled.has(key)) return false;
    reconciled.add(key);
    return true;
  };
  // A replica with entries still pending for it (unavailable: its outage log) is behind
  // by design: its books are not compared (that outage log brings it up to date).
  const current: Replica[] = [];
  for (const r of replicas)
    if (!ctx.outages.isDown(r.id) && (await store.pendingFor(r.id)) === 0) current.push(r);
  for (const path of paths) {
    const h = head.get(path);
    if (h && !replicas.some((r) => books.get(r.id)?.has(path))) {
      await store.setHead(path, undefined); // held nowhere: not the share's any more
      continue;
    }
    /** Replicas holding a version the share had at this path before its head: behind. */
    const stale: Replica[] = [];
    for (const r of current) {
      const k = books.get(r.id)?.get(path);
      if (!k || (h && h.kind === k.kind && (k.kind === 'dir' || h.sha256 === k.sha256))) continue;
      if (h?.kind === 'file' && k.kind === 'file' && (await store.wasHead(path, k.sha256))) {
        // An older version of the share's file, never a new one: it gets the head (a
        // write conditional on what it holds), it is not written over the head.
        if (once(r, path, h.sha256)) stale.push(r);
        continue;
      }
      if (k.kind === 'dir') {
        if (h || !once(r, path, 'dir')) continue;
        await store.append(r.id, { type: 'dir', path }, undefined, now);
        ctx.log.warn(
          { replica: r.id, path },
          'reconcile: a folder only this replica holds is logged from it',
        );
        n += 1;
        continue;
      }
      if (!once(r, path, k.sha256)) continue;
      if (!(await logCurrent(ctx, r, path, k.sha256, now))) continue; // changed: its feed tells
      ctx.log.warn({ replica: r.id, path }, 'reconcile: a version only this replica holds is logged from it');
      n += 1;
    }
    if (!h) continue;
    const lacking = current
      .filter((r) => !books.get(r.id)?.has(path) && once(r, path, h.sha256 || 'dir'))
      .concat(stale);
    if (lacking.length === 0) continue;
    const others = replicas.filter((r) => !lacking.includes(r)).map((r) => r.id);
    if (h.kind === 'dir') {
      const from = replicas.find((r) => !lacking.includes(r)) ?? lacking[0];
      if (!from) continue;
      await store.append(from.id, { type: 'dir', path }, undefined, now, others);
      ctx.log.warn(
        { replicas: lacking.map((l) => l.id), path },
        'reconcile: sending the share folder to replicas without it',
      );
      n += 1;
      continue;
    }
    for (const r of replicas) {
      if (lacking.includes(r) || books.get(r.id)?.get(path)?.sha256 !== h.sha256) continue;
      if (!(await logCurrent(ctx, r, path, h.sha256, now, others))) continue;
      ctx.log.warn(
        { replicas: lacking.map((l) => l.id), path },
        'reconcile: sending the share version to replicas without it',
      );
      n += 1;
      break;
    }
  }
  return n;
}

/**
 * Log the file `r` holds at `path` from `r` (to `done` excluded), if it is still the version
 * with `sha256`. false: gone or changed since (its feed reports that).
 */
async function logCurrent(
  ctx: EngineContext,
  r: Replica,
  path: string,
  sha256: string,
  now: number,
  done: string[] = [],
): Promise<boolean> {
  const snap = await snapshot(r, path, true);
  if (snap?.kind !== 'file' || snap.sha256 !== sha256 || !snap.data) return false;
  const op: Op = { type: 'file', path, revision: snap.revision, sha256, size: snap.data.byteLength };
  await ctx.store.append(r.id, op, snap.data, now, done);
  return true;
}
