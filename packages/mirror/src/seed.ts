/**
 * Seeding a member who joins a share that already ran (no cursor, nothing known, while
 * others have cursors): they receive the share's current tree as log entries applied to
 * them alone.
 */
import type { EngineContext, Replica, Snapshot } from './context.ts';
import type { Op } from './ops.ts';
import { snapshot } from './replica-view.ts';

/**
 * One log entry per folder and file of the head, its content read from a replica that
 * holds exactly that version, applied to the joiner only (every other replica is marked
 * done). Files already in the joiner's folder come in through its first re-listing, later
 * in the log: the same content is left alone; different content stays in place and the
 * share's version becomes a conflicted copy, which reaches everyone — merged, conflicts
 * kept. Returns the entries appended.
 */
export async function seedJoiners(ctx: EngineContext): Promise<number> {
  const { store, replicas } = ctx;
  const fresh = new Set<Replica>();
  for (const r of replicas) if ((await store.cursor(r.id)) === undefined) fresh.add(r);
  if (fresh.size === replicas.length) return 0;
  const joiners: Replica[] = [];
  for (const r of fresh) if ((await store.knownUnder(r.id, '')).length === 0) joiners.push(r);
  if (joiners.length === 0) return 0;
  const head = await store.headUnder('');
  const content = new Map<string, { origin: Replica; revision: string; data: Uint8Array }>();
  for (const h of head) {
    if (h.kind !== 'file') continue;
    for (const r of replicas) {
      if (joiners.includes(r) || (await store.known(r.id, h.path))?.sha256 !== h.sha256) continue;
      if (ctx.outages.isDown(r.id)) continue;
      let snap: Snapshot | undefined;
      try {
        snap = await snapshot(r, h.path, true);
      } catch (e) {
        await ctx.outages.failed(r, e, 'reading');
        continue;
      }
      // Changed there since: that change is in its feed and reaches the joiner anyway.
      if (!snap?.data || snap.sha256 !== h.sha256) continue;
      content.set(h.path, { origin: r, revision: snap.revision, data: snap.data });
      break;
    }
  }
  const someone = replicas.find((r) => !joiners.includes(r));
  if (!someone) return 0;
  const now = ctx.now();
  let seeded = 0;
  await store.transaction(async (tx) => {
    seeded = 0;
    for (const j of joiners) {
      const others = replicas.filter((r) => r !== j).map((r) => r.id);
      for (const h of head) {
        if (h.kind === 'dir') {
          await tx.append(someone.id, { type: 'dir', path: h.path }, undefined, now, others);
          seeded += 1;
          continue;
        }
        const c = content.get(h.path);
        if (!c) continue;
        const op: Op = {
          type: 'file',
          path: h.path,
          revision: c.revision,
          sha256: h.sha256,
          size: c.data.byteLength,
        };
        await tx.append(c.origin.id, op, c.data, now, others);
        seeded += 1;
      }
    }
  });
  ctx.log.info({ joiners: joiners.map((j) => j.id), entries: seeded }, 'seeding joining members');
  return seeded;
}
