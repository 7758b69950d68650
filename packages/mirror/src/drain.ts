/**
 * Draining the share's log: pending entries are applied in order — the origin's
 * bookkeeping first (books.ts), then every other replica (propagate/*). Entries on the same
 * path run strictly one after another (stop-and-wait), unrelated paths in parallel; folder
 * deletes and moves are barriers.
 */
import { caseFoldKey } from '@weft/providers';
import { applyAtOrigin } from './books.ts';
import type { EngineContext } from './context.ts';
import { isInvalidPath } from './provider-failures.ts';
import type { LoggedOp, Op } from './ops.ts';
import { applyDelete, applyTo, removeDuplicates } from './propagate/index.ts';
import type { ShareStore } from './store.ts';
import { isUnder, prefixes } from './tree-paths.ts';

/** A folder delete or any move: nothing runs beside it. */
async function isBarrier(store: ShareStore, op: Op): Promise<boolean> {
  if (op.type === 'move') return true;
  if (op.type === 'delete') return (await store.head(op.path))?.kind !== 'file';
  return false;
}

/** Whether an entry covering `keys` (case-folded) touches what `set` holds; a barrier also what is below. */
function overlaps(set: ReadonlySet<string> | undefined, keys: readonly string[], barrier: boolean): boolean {
  if (!set || set.size === 0) return false;
  for (const k of keys) {
    for (const p of prefixes(k)) if (set.has(p)) return true;
    if (barrier) for (const s of set) if (isUnder(s, k)) return true;
  }
  return false;
}

interface Applied {
  /** Replicas the entry is still pending for. */
  readonly waiting: string[];
  /** It waits whole (not applied at its origin). */
  readonly deferred: boolean;
  /** Anything happened. */
  readonly progressed: boolean;
}

/**
 * Apply pending log entries (and those they append, e.g. conflicted copies) until none is
 * left, stop() is called, or drainBudgetMs has passed (the rest stays pending for the
 * next round). Returns how many entries progressed.
 *
 * Order per replica: an entry is applied to a replica only after every earlier entry on
 * the same path (or a folder around it; for folder moves and deletes, anything inside)
 * has been applied there. A replica that cannot take writes (unavailable, or a call on it
 * failed in this round) is left out; what is pending for it is its outage log, replayed
 * in this order when it is back, and the other replicas go on. An entry whose origin still
 * has earlier entries pending on its path (a change the member made on a version the
 * share had since replaced) waits whole, with every later entry on that path: applying
 * it first would write an older version over a newer one.
 */
export async function drain(ctx: EngineContext): Promise<number> {
  let applied = 0;
  let after = 0;
  let started = 0;
  const since = ctx.now();
  const enough = (): boolean =>
    ctx.stopping() || (started >= ctx.concurrency && ctx.now() - since >= ctx.drainBudgetMs);
  /** Per replica: paths (case-folded) of entries still pending there. */
  const behind = new Map<string, Set<string>>();
  /** Paths of entries that wait whole (not applied at their origin). */
  const waiting = new Set<string>();
  const hold = (ids: readonly string[], keys: readonly string[]): void => {
    for (const id of ids) {
      let set = behind.get(id);
      if (!set) behind.set(id, (set = new Set()));
      for (const k of keys) set.add(k);
    }
  };
  for (;;) {
    const ops = await ctx.store.pending(after, false);
    if (ops.length === 0) return applied;
    after = ops.at(-1)?.seq ?? after;
    const total = applied + ops.length;
    const report = (): void => ctx.onProgress?.({ applied, pending: Math.max(0, total - applied) });
    const tails = new Map<string, Promise<void>>();
    const inflight = new Set<Promise<void>>();
    let cut = false;
    for (const op of ops) {
      if (enough()) {
        cut = true;
        break;
      }
      started += 1;
      const barrier = await isBarrier(ctx.store, op.op);
      const keys = (op.op.type === 'move' ? [op.op.from, op.op.to] : [op.op.path]).map(caseFoldKey);
      const run = async (): Promise<void> => {
        const whole = overlaps(waiting, keys, barrier);
        let res: Applied;
        try {
          res = await applyOp(ctx, op, (id, origin) => {
            if (whole || overlaps(behind.get(id), keys, barrier)) return false;
            return origin || ctx.outages.writable(id);
          });
        } catch (e) {
          // Not a replica's failure (those are handled inside): the entry waits whole.
          ctx.log.error({ err: e, seq: op.seq }, 'applying a log entry failed');
          res = { waiting: ctx.replicas.map((r) => r.id), deferred: true, progressed: false };
        }
        hold(res.waiting, keys);
        if (res.deferred) for (const k of keys) waiting.add(k);
        if (res.progressed) {
          applied += 1;
          report();
        }
      };
      if (barrier) {
        await Promise.allSettled([...inflight]);
        await run();
        tails.clear();
        continue;
      }
      const key = keys[0] ?? '';
      const prev = tails.get(key) ?? Promise.resolve();
      const next = prev.then(run);
      const tracked = next.catch((e: unknown) => {
        ctx.log.error({ err: e, seq: op.seq }, 'log entry: unexpected failure');
      });
      tails.set(key, tracked);
      inflight.add(tracked);
      void tracked.finally(() => inflight.delete(tracked));
      if (inflight.size >= ctx.concurrency) await Promise.race(inflight);
    }
    await Promise.allSettled([...inflight]);
    if (cut) return applied;
  }
}

/**
 * Apply one log entry where `can` allows (`origin`: its origin's bookkeeping; else a
 * target's write): the origin's bookkeeping, then the other replicas. A target whose call
 * fails is marked unavailable (OutageLog.failed); a name its cloud refuses (InvalidPath)
 * is not applied there.
 */
async function applyOp(
  ctx: EngineContext,
  logged: LoggedOp,
  can: (replica: string, origin: boolean) => boolean,
): Promise<Applied> {
  const { store, replicas, facts } = ctx;
  const done = new Set(logged.doneTargets);
  const notDone = (): string[] => replicas.filter((r) => !done.has(r.id)).map((r) => r.id);
  let progressed = false;
  if (!done.has(logged.origin)) {
    if (!can(logged.origin, true)) return { waiting: notDone(), deferred: true, progressed };
    const propagate = await applyAtOrigin(ctx, logged);
    ctx.log.trace({ seq: logged.seq, replica: logged.origin, propagate }, 'applied at origin');
    if (propagate === 'origin-too') {
      // The engine wrote into what the origin deleted after the delete was read from its
      // feed (an earlier entry re-created it there): the delete applies there as well,
      // to the versions the deleter had seen — else the origin alone keeps them.
      const origin = ctx.byId.get(logged.origin);
      try {
        if (origin && logged.op.type === 'delete')
          await applyDelete(ctx, origin, logged.op.path, logged.op.files);
        if (origin && logged.op.type === 'move') await removeDuplicates(ctx, origin, logged.seq);
      } catch (e) {
        if (origin) await ctx.outages.failed(origin, e, 'applying a delete or move at its origin');
        return { waiting: notDone(), deferred: true, progressed };
      }
    }
    done.add(logged.origin);
    progressed = true;
    // Done (nothing propagates) or done at the origin: recorded by applyAtOrigin, with the books.
    if (!propagate) return { waiting: [], deferred: false, progressed };
    if (propagate === 'origin-too') await store.markTargetDone(logged.seq, [...done]);
  }
  const targets = replicas.filter((r) => !done.has(r.id) && can(r.id, false));
  let entry = logged;
  if (targets.length > 0 && !entry.data && (entry.op.type === 'file' || entry.op.type === 'move'))
    entry = { ...entry, data: await store.data(entry.seq) };
  const results = await Promise.allSettled(
    targets.map(async (t) => {
      await applyTo(ctx, t, entry);
      ctx.log.trace({ seq: logged.seq, replica: t.id, op: logged.op }, 'applied');
    }),
  );
  for (const [i, x] of results.entries()) {
    const t = targets[i];
    if (!t) continue;
    if (x.status === 'fulfilled') {
      done.add(t.id);
      progressed = true;
      continue;
    }
    const reason: unknown = x.reason;
    if (isInvalidPath(reason)) {
      // The name is not allowed on that cloud: nothing was written; the others have it.
      ctx.stats.refused += 1;
      ctx.log.error(
        { seq: logged.seq, replica: t.id, err: reason },
        'the cloud refuses this name: not applied on this replica',
      );
      done.add(t.id);
      progressed = true;
      continue;
    }
    // Once per outage at warn level (OutageLog.failed); each try of an unavailable replica: debug.
    if (ctx.outages.isDown(t.id))
      ctx.log.debug({ seq: logged.seq, replica: t.id, err: reason }, 'apply failed');
    else ctx.log.warn({ seq: logged.seq, replica: t.id, err: reason }, 'apply failed');
    await ctx.outages.failed(t, reason, 'writing');
  }
  if (replicas.every((r) => done.has(r.id))) {
    await store.markDone(logged.seq);
    facts.previousHead.delete(logged.seq);
    facts.nativeOk.delete(logged.seq);
    return { waiting: [], deferred: false, progressed };
  }
  if (progressed) await store.markTargetDone(logged.seq, [...done]);
  return { waiting: notDone(), deferred: false, progressed };
}
