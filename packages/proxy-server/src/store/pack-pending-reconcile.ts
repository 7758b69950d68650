/**
 * The PostgreSQL pack pending counter (pg-migrations/011, the metrics' weft_pack_pending_files)
 * made self-healing. Its triggers are exact one transaction at a time, but under READ
 * COMMITTED two transactions that commit at once — one adding a small file whose content the
 * other is packing (or whose pack it removes) — can each miss the other's row, and the sum
 * stays one off from then on. A reconcile finds and removes any such drift:
 *
 * - It folds the counter's appended deltas (pg-migrations/013) into its rows, then, in one
 *   REPEATABLE READ transaction, reads the counter's sum and recounts the pending
 *   files in steps of `step` entries (keyset on the primary key, a turn of the event loop
 *   between steps), all under the same snapshot: the difference is exactly the drift left by
 *   the transactions committed before it. Writes committed meanwhile are in neither figure and
 *   add their own part to the counter as usual.
 * - It adds that difference to slot 16 (pg-migrations/012), a row no trigger writes, in the
 *   same transaction: two reconciles at once conflict on it (serialization failure) and only
 *   one correction holds; the other is dropped and reported as not applied.
 *
 * `PendingReconciler` runs one at start and then every `intervalMs` while the proxy is idle
 * (deferred while `busy()`, at most `intervalMs` more), logging and counting each correction.
 */
import type { Logger } from 'pino';
import type { Sql, Tx } from './postgres-db.ts';

/** Between reconciles in a running proxy (ms). */
export const PENDING_RECONCILE_MS = 10 * 60_000;

/** Entries looked at per step of a recount. */
export const RECONCILE_STEP = 10_000;

export interface PendingReconcile {
  /** The counter's sum and the recount, both under the reconcile's snapshot. */
  readonly counter: number;
  readonly recount: number;
  /** recount − counter: what the reconcile added (if `applied`). */
  readonly delta: number;
  /** False when another reconcile corrected the counter at the same time (this one's dropped). */
  readonly applied: boolean;
  /** Steps the recount took. */
  readonly steps: number;
}

interface StepRow {
  seen: number;
  pending: number;
  last_user: string | null;
  last_path: string | null;
}

/**
 * Fold the counter's appended deltas (pg-migrations/013: one row per statement that changed
 * the count) into slot 0, in one statement: each delta is deleted and added exactly once,
 * also with several proxies folding at once (a second DELETE skips the rows the first took).
 */
export async function foldPendingDeltas(sql: Sql): Promise<void> {
  await sql`WITH d AS (DELETE FROM pack_pending_delta RETURNING n)
    UPDATE pack_pending SET n = n + (SELECT SUM(n) FROM d) WHERE slot = 0 AND EXISTS (SELECT 1 FROM d)`;
}

/** The kept count: the rows of pack_pending and the deltas not folded yet. */
export async function keptPendingCount(sql: Sql | Tx): Promise<number> {
  const [c] = await sql<{ n: string | null }[]>`
    SELECT ((SELECT COALESCE(SUM(n), 0) FROM pack_pending)
          + (SELECT COALESCE(SUM(n), 0) FROM pack_pending_delta))::text AS n`;
  return Number(c?.n ?? 0);
}

/** Recount the pending small files and correct the counter by the drift (see above). */
export async function reconcilePostgresPending(
  sql: Sql,
  options: { readonly step?: number; readonly betweenSteps?: () => Promise<void> } = {},
): Promise<PendingReconcile> {
  const step = options.step ?? RECONCILE_STEP;
  const between = options.betweenSteps ?? (() => new Promise<void>((resolve) => setImmediate(resolve)));
  await foldPendingDeltas(sql);
  try {
    return (await sql.begin('isolation level repeatable read', async (tx) => {
      // The first statement fixes the snapshot: the counter as it is in it.
      const counter = await keptPendingCount(tx);
      let recount = 0;
      let steps = 0;
      let after: [string, string] | undefined;
      for (;;) {
        steps += 1;
        const [r] = await tx<StepRow[]>`
          WITH s AS (
            SELECT user_id, path, tier, sha256 FROM entries
             WHERE ${after === undefined ? tx`TRUE` : tx`(user_id, path) > (${after[0]}, ${after[1]})`}
             ORDER BY user_id, path LIMIT ${step}),
          l AS (SELECT user_id, path FROM s ORDER BY user_id DESC, path DESC LIMIT 1)
          SELECT (SELECT COUNT(*) FROM s)::int AS seen,
                 (SELECT COUNT(*) FROM s WHERE tier = 'small' AND sha256 IS NOT NULL
                     AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = s.sha256))::int AS pending,
                 (SELECT user_id FROM l) AS last_user, (SELECT path FROM l) AS last_path`;
        recount += r?.pending ?? 0;
        if (!r || r.seen < step || r.last_user === null || r.last_path === null) break;
        after = [r.last_user, r.last_path];
        await between();
      }
      const delta = recount - counter;
      if (delta !== 0) await tx`UPDATE pack_pending SET n = n + ${delta} WHERE slot = 16`;
      return { counter, recount, delta, applied: true, steps };
    })) as PendingReconcile;
  } catch (e) {
    // Another reconcile updated slot 16 after this one's snapshot: its correction holds.
    if ((e as { code?: string }).code === '40001')
      return { counter: 0, recount: 0, delta: 0, applied: false, steps: 0 };
    throw e;
  }
}

export interface PendingReconcilerOptions {
  readonly reconcile: () => Promise<PendingReconcile>;
  readonly log: Logger;
  /** Between reconciles (ms); 0: only the one at start. */
  readonly intervalMs: number;
  /** The proxy has work queued: a reconcile waits (by a tenth of the interval, at most one interval). */
  readonly busy?: () => boolean;
  /** Called with each correction applied (the metrics). */
  readonly onCorrection?: (delta: number) => void;
}

/** Reconciles at start and periodically when idle (the controller's job: cluster/role.ts). */
export class PendingReconciler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<PendingReconcile> | undefined;
  private stopped = true;
  /** Reconciles run, and those that changed the counter (tests). */
  runs = 0;
  corrections = 0;

  constructor(private readonly o: PendingReconcilerOptions) {}

  start(): void {
    this.stopped = false;
    this.schedule(0, 0);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** One reconcile now (or the one running). */
  run(): Promise<PendingReconcile> {
    this.running ??= this.once().finally(() => (this.running = undefined));
    return this.running;
  }

  private async once(): Promise<PendingReconcile> {
    this.runs += 1;
    const r = await this.o.reconcile();
    if (r.applied && r.delta !== 0) {
      this.corrections += 1;
      this.o.onCorrection?.(r.delta);
      this.o.log.warn(
        { counter: r.counter, recount: r.recount, delta: r.delta, steps: r.steps },
        'pack pending counter corrected (concurrent commits had left it off)',
      );
    } else if (!r.applied) this.o.log.info('pack pending reconcile dropped: another ran at the same time');
    return r;
  }

  private schedule(delayMs: number, deferredMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      const wait = Math.max(1, Math.floor(this.o.intervalMs / 10));
      if (this.o.busy?.() && deferredMs + wait <= this.o.intervalMs)
        return this.schedule(wait, deferredMs + wait);
      this.run()
        .catch((err: unknown) => this.o.log.warn({ err }, 'pack pending reconcile failed'))
        .finally(() => {
          if (this.o.intervalMs > 0) this.schedule(this.o.intervalMs, 0);
        });
    }, delayMs);
    this.timer.unref();
  }
}
