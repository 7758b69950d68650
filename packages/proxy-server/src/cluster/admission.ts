/**
 * One Request Queue for every instance (issue #18; HyCloud §III-C, Eq. 6). The instances
 * sharing one PostgreSQL share the tiers behind it — the filesystem tier (EFS/NFS), the
 * object tier (S3) and PostgreSQL itself — so at most `cluster.applySlots` operations apply
 * at once over the whole cluster, and when more are ready than there are slots, the one with
 * the smallest FOP(x) = t_A + t_T, whichever instance received it, takes the next one: small
 * files and directory operations ahead of an earlier large transfer, directory operations
 * first come first served, a large transfer never starved (its FOP is fixed when it arrives;
 * everything that arrives later than that FOP queues behind it).
 *
 * A slot is a PostgreSQL advisory lock (one of `applySlots` keys) taken, without waiting, in
 * the transaction that already holds the operation's ordering locks (ordering.ts), after
 * them: it is released with them when the operation commits, and goes with the session when
 * an instance dies. Path locks come first and a slot holder never waits for a path lock, so
 * the two cannot deadlock, and related operations keep their arrival order: the later one
 * waits at the path lock, behind the earlier one, whatever their FOPs.
 *
 * Fast path: the statement that takes the ordering locks also tries a slot, unless a live
 * instance has an operation waiting with a FOP no larger than this one's — no extra round
 * trip while nothing waits. Otherwise the operation writes its FOP in `op_queue`
 * (pg-migrations/009) and retries when woken (LISTEN/NOTIFY on `weft_op_queue`: a new entry,
 * an entry leaving, a slot freed while entries wait) or every `cluster.queuePollMs`; it takes
 * a slot only when no live entry has a smaller (FOP, id). Entries of an instance whose
 * heartbeat (proxy_instances) is older than `cluster.aliveMs` are ignored, so a dead
 * instance blocks nobody; they are deleted later by whoever sees them.
 *
 * FOPs are compared across machines on the database's clock: each instance adds its measured
 * offset to PostgreSQL's clock (refreshed every 30 s) to its own arrival times.
 */
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Sql, Tx } from '../store/postgres-db.ts';
import { lockKey } from './ordering.ts';

const CHANNEL = 'weft_op_queue';
const DB_NOW = `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)`;
const HOUSEKEEP_MS = 30_000;

/** No live entry with a smaller (fop, id) than ($2, $3) — or, with no id, fop ≤ $2. */
const noneAhead = (withId: boolean, fop: string, id: string, alive: string): string => `
  NOT EXISTS (SELECT 1 FROM op_queue q JOIN proxy_instances i ON i.id = q.instance_id
              WHERE ${withId ? `(q.fop, q.id) < (${fop}::float8, ${id}::bigint)` : `q.fop <= ${fop}::float8`}
                AND i.heartbeat_ms >= ${DB_NOW} - ${alive}::bigint)`;

/**
 * A free slot's key taken now (the lock lasts as long as the transaction), or null. The
 * CASE keeps the try-lock after the check; LIMIT 1 stops at the first lock taken.
 */
const takeSlot = (keys: string, check: string): string =>
  `(SELECT k FROM unnest(${keys}::bigint[]) AS k
     WHERE CASE WHEN ${check} THEN pg_try_advisory_xact_lock(k) ELSE false END LIMIT 1)::text`;

const HEAD_SQL = `SELECT ${takeSlot('$1', noneAhead(true, '$2', '$3', '$4'))} AS slot`;

export interface AdmissionOptions {
  instanceId: string;
  /** Operations applying at once over every instance (cluster.applySlots, ≥ 1). */
  slots: number;
  /** An instance's queue entries count while its heartbeat is this recent (cluster.aliveMs). */
  aliveMs: number;
  /** A waiting operation looks again at least this often (cluster.queuePollMs). */
  pollMs: number;
  /** Convert FOPs to the database's clock (default true; tests on a fake clock turn it off). */
  alignClock?: boolean;
  log?: Logger;
  /** Where `weft_cluster_apply_waiting` and `weft_cluster_apply_queued_total` are registered. */
  registry?: Registry;
  /** Observer for tests: an operation of this instance entered (true) or left (false) the queue. */
  onQueue?: (fop: number, queued: boolean) => void;
}

export class PgAdmission {
  private readonly keys: string[];
  /** PostgreSQL's clock minus this process's (ms). */
  private offsetMs = 0;
  /** Entries waiting over the cluster, as last heard (notifications, recounts). */
  private known = 0;
  /** Bumped by every notification: a waiter that saw it change looks again at once. */
  private generation = 0;
  private readonly wakers = new Set<() => void>();
  /** This instance's entries now in op_queue: id → FOP (database clock). */
  private readonly mine = new Map<string, number>();
  private unlisten: (() => Promise<void>) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  /**
   * `sql`: a small pool of its own (entries are written outside the operations' transactions),
   * ended by close(); LISTEN takes one more connection.
   */
  constructor(
    private readonly sql: Sql,
    private readonly o: AdmissionOptions,
  ) {
    if (!(o.slots >= 1)) throw new Error('cluster.applySlots must be at least 1 for a shared budget');
    this.keys = Array.from({ length: o.slots }, (_, i) => lockKey('apply-slot', String(i)));
    if (o.registry) {
      const mine = this.mine;
      new Gauge({
        name: 'weft_cluster_apply_waiting',
        help: "This instance's operations waiting for one of the cluster's apply slots (cluster.applySlots)",
        registers: [o.registry],
        collect() {
          this.set(mine.size);
        },
      });
      this.queuedTotal = new Counter({
        name: 'weft_cluster_apply_queued_total',
        help: "This instance's operations that found no apply slot free (or one with a smaller FOP waiting) and queued",
        registers: [o.registry],
      });
    }
  }

  private readonly queuedTotal: Counter | undefined;

  async start(): Promise<void> {
    const listening = await this.sql.listen(CHANNEL, (payload) => this.heard(payload));
    this.unlisten = () => listening.unlisten();
    await this.housekeep();
    this.timer = setInterval(() => {
      this.housekeep().catch((err: unknown) =>
        this.o.log?.warn({ err }, 'cluster: op queue housekeeping failed'),
      );
    }, HOUSEKEEP_MS);
    this.timer.unref();
  }

  /** Entries may be waiting somewhere: a finishing operation should say it freed a slot. */
  contended(): boolean {
    return this.known > 0 || this.mine.size > 0;
  }

  /** The notification a finishing operation sends inside its transaction (delivered at commit). */
  readonly freedStatement = `SELECT pg_notify('${CHANNEL}', 'free')`;

  /**
   * The ordering statement with a slot tried after the locks: `lockCalls` (the lock function
   * calls, parameters $1..$n), `n` their count of parameters. Its one row has `slot`.
   */
  fastPath(lockCalls: string, n: number, fop: number): { statement: string; params: (string | number)[] } {
    const check = noneAhead(false, `$${n + 2}`, '', `$${n + 3}`);
    return {
      statement: `SELECT CASE WHEN locked.go THEN ${takeSlot(`$${n + 1}`, check)} END AS slot
                  FROM (SELECT true AS go, ${lockCalls} OFFSET 0) AS locked`,
      params: [this.arrayParam(), this.toDb(fop), this.o.aliveMs],
    };
  }

  /** No slot on the fast path: queue this operation and wait, in `tx`, until it has one. */
  async wait(tx: Tx, fop: number): Promise<void> {
    const fopDb = this.toDb(fop);
    const [row] = await this.sql<{ id: string }[]>`
      WITH ins AS (
        INSERT INTO op_queue (instance_id, fop, queued_ms)
        VALUES (${this.o.instanceId}, ${fopDb}, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint) RETURNING id)
      SELECT id::text AS id, pg_notify(${CHANNEL}, 'enq') FROM ins`;
    const id = row!.id;
    this.mine.set(id, fopDb);
    this.queuedTotal?.inc();
    this.o.onQueue?.(fop, true);
    try {
      for (;;) {
        const seen = this.generation;
        // Only this instance's first entry asks: the others cannot be ahead of it (a herd of
        // queries at every freed slot, else). When it leaves, the next one asks at once.
        if (this.firstHere(id, fopDb)) {
          const [r] = await tx.unsafe<{ slot: string | null }[]>(
            HEAD_SQL,
            [this.arrayParam(), fopDb, id, this.o.aliveMs],
            { prepare: true },
          );
          if (r?.slot) return;
        }
        if (this.closed) throw new Error('cluster admission closed');
        await this.nap(seen);
      }
    } finally {
      this.mine.delete(id);
      this.wakeAll();
      this.o.onQueue?.(fop, false);
      await this.sql`
        WITH d AS (DELETE FROM op_queue WHERE id = ${id}::bigint RETURNING id)
        SELECT pg_notify(${CHANNEL}, 'deq') FROM d`.catch((err: unknown) =>
        // The housekeeping deletes it later (it is this instance's and no longer waits).
        this.o.log?.warn({ err }, 'cluster: op queue entry not removed'),
      );
    }
  }

  /** Until a notification newer than `seen`, or `pollMs`. */
  private nap(seen: number): Promise<void> {
    if (this.generation !== seen) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(t);
        this.wakers.delete(done);
        resolve();
      };
      const t = setTimeout(done, this.o.pollMs);
      this.wakers.add(done);
    });
  }

  private heard(payload: string): void {
    if (payload === 'enq') this.known += 1;
    else if (payload === 'deq') this.known = Math.max(0, this.known - 1);
    this.wakeAll();
  }

  private wakeAll(): void {
    this.generation += 1;
    for (const w of [...this.wakers]) w();
  }

  /** No other entry of this instance has a smaller (FOP, id). */
  private firstHere(id: string, fop: number): boolean {
    const n = BigInt(id);
    for (const [other, f] of this.mine) if (f < fop || (f === fop && BigInt(other) < n)) return false;
    return true;
  }

  /**
   * Measure the clock offset, remove this instance's entries that no longer wait (a previous
   * run of the same id; a failed removal) and entries of instances gone for long, and recount.
   */
  async housekeep(): Promise<void> {
    if (this.o.alignClock ?? true) {
      const t0 = Date.now();
      const [c] = await this.sql<{ now: number }[]>`
        SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::float8 AS now`;
      const t1 = Date.now();
      this.offsetMs = c!.now - (t0 + t1) / 2;
    }
    const mine = `{${[...this.mine.keys()].join(',')}}`;
    await this.sql`
      DELETE FROM op_queue q
      WHERE (q.instance_id = ${this.o.instanceId} AND NOT (q.id = ANY(${mine}::bigint[])))
         OR NOT EXISTS (SELECT 1 FROM proxy_instances i WHERE i.id = q.instance_id
                        AND i.heartbeat_ms >= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000) - ${3 * this.o.aliveMs}::bigint)`;
    const [n] = await this.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM op_queue q JOIN proxy_instances i ON i.id = q.instance_id
      WHERE i.heartbeat_ms >= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000) - ${this.o.aliveMs}::bigint`;
    this.known = n?.n ?? 0;
  }

  private toDb(fop: number): number {
    return fop + this.offsetMs;
  }

  private arrayParam(): string {
    return `{${this.keys.join(',')}}`;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.wakeAll();
    await this.unlisten?.().catch(() => undefined);
    await this.sql.end({ timeout: 5 });
  }
}
