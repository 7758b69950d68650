/**
 * Ordering across proxy instances sharing one PostgreSQL (issue #18; HyCloud §III-C's
 * stop-and-wait, which scheduler.ts keeps within one process). Each operation, once this
 * instance's scheduler lets it start (every earlier related op *here* has finished), takes
 * PostgreSQL advisory locks in a transaction of its own and holds them while it applies:
 *
 *  - the namespace's key, shared: many operations of a namespace apply at once, and a
 *    whole-namespace job (reconciliation) takes it exclusively;
 *  - the key of each top-level name it touches (both ends of a move), exclusive, in key
 *    order (no deadlock): related paths — one inside the other, or equal — always share
 *    their first component, so they queue on the same key.
 *
 * PostgreSQL grants a contended advisory lock in the order it was requested, so related
 * operations apply one at a time, in the order they reached the lock, whichever instance
 * received them. An operation acknowledged on one instance has released its locks before
 * its answer left, so anything sent after that answer applies after it (the real-time order
 * the ordering checker in test/cluster-ordering.test.ts verifies). Two unrelated top-level
 * names may hash to one key: they are then ordered too, which is safe.
 *
 * The locks live as long as the transaction, so they go with the session when an instance
 * dies (at once on kill -9; within about 10 s of a partition, CLUSTER_KEEPALIVES). An
 * instance that cannot reach PostgreSQL refuses the operation (SLOW_DOWN, retried by the
 * client) rather than apply it unordered.
 *
 * With a shared budget (admission.ts, cluster.applySlots), the same statement then tries one
 * of the cluster's apply slots, and an operation that finds none queues for it in FOP order
 * over every instance, still holding its path locks (so related operations keep their order).
 *
 * On SQLite there is one process and the scheduler's own ordering is the whole story.
 */
import { createHash } from 'node:crypto';
import { ApiError } from '../errors.ts';
import type { PgAdmission } from './admission.ts';
import { CLUSTER_KEEPALIVES, connect, type Sql } from '../store/postgres-db.ts';

export interface ClusterOrdering {
  /**
   * Apply `fn` holding the cross-instance locks of these paths of `namespace` (and, with a
   * shared budget, one of the cluster's apply slots, granted in order of `fop`: Eq. 6, epoch
   * ms on this process's clock).
   */
  around<T>(namespace: string, paths: readonly string[], fn: () => Promise<T>, fop?: number): Promise<T>;
  /** Apply `fn` with no operation of `namespace` running on any instance. */
  exclusive<T>(namespace: string, fn: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** A 64-bit advisory lock key (signed, as PostgreSQL's bigint) for these parts. */
export function lockKey(...parts: string[]): string {
  const h = createHash('sha256').update(parts.join('\0')).digest();
  return BigInt.asIntN(64, h.readBigUInt64BE(0)).toString();
}

/** The keys an op on `paths` locks: [shared namespace key, ...exclusive keys in order]. */
export function opLockKeys(
  namespace: string,
  paths: readonly string[],
): { shared: string[]; exclusive: string[] } {
  const tops = new Set<string>();
  for (const p of paths) {
    const top = p.replace(/^\/+/, '').split('/')[0] ?? '';
    // The namespace root is related to everything in it: the whole namespace, exclusively.
    if (top === '') return { shared: [], exclusive: [lockKey('ns', namespace)] };
    tops.add(top);
  }
  const exclusive = [...tops].map((t) => lockKey('path', namespace, t));
  exclusive.sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0));
  return { shared: [lockKey('ns', namespace)], exclusive: [...new Set(exclusive)] };
}

const UNREACHABLE = 'operations cannot be ordered: the metadata store is unreachable; retry later';

export class PgOrdering implements ClusterOrdering {
  private readonly sql: Sql;

  /**
   * `connections`: the scheduler's concurrency plus a little (one per applying op).
   * `admission`: the cluster's shared budget (absent: each instance only its own concurrency).
   */
  constructor(
    url: string,
    connections: number,
    private readonly admission?: PgAdmission,
    applicationName = 'weft-proxy',
  ) {
    // Its statements wait for locks and apply slots as long as the operations ahead take:
    // no statement or response limit (a lost instance's session goes with CLUSTER_KEEPALIVES).
    this.sql = connect(
      url,
      connections,
      {
        connection: { ...CLUSTER_KEEPALIVES, application_name: applicationName },
        connect_timeout: 5,
      },
      { statementTimeoutMs: 0, responseTimeoutMs: 0 },
    );
  }

  around<T>(namespace: string, paths: readonly string[], fn: () => Promise<T>, fop?: number): Promise<T> {
    return this.holding(opLockKeys(namespace, paths), fn, fop ?? Date.now());
  }

  exclusive<T>(namespace: string, fn: () => Promise<T>): Promise<T> {
    return this.holding({ shared: [], exclusive: [lockKey('ns', namespace)] }, fn);
  }

  private async holding<T>(
    keys: { shared: string[]; exclusive: string[] },
    fn: () => Promise<T>,
    fop?: number,
  ): Promise<T> {
    const calls = [
      ...keys.shared.map((_, i) => `pg_advisory_xact_lock_shared($${i + 1}::bigint)`),
      ...keys.exclusive.map((_, i) => `pg_advisory_xact_lock($${keys.shared.length + i + 1}::bigint)`),
    ];
    // The select list is evaluated left to right: namespace first, then names in key order.
    const lockParams: (string | number)[] = [...keys.shared, ...keys.exclusive];
    const admission = fop === undefined ? undefined : this.admission;
    // With a shared budget, the same round trip tries a slot once the locks are held.
    const { statement, params } = admission
      ? admission.fastPath(calls.join(', '), lockParams.length, fop!)
      : { statement: `SELECT ${calls.join(', ')}`, params: [] };
    let applied = false;
    let outcome: { ok: true; value: T } | { ok: false; error: unknown } | undefined;
    try {
      await this.sql.begin(async (tx) => {
        // Prepared: one text per count of names touched, planned once per connection.
        const [row] = await tx.unsafe<{ slot?: string | null }[]>(statement, [...lockParams, ...params], {
          prepare: true,
        });
        if (admission && !row?.slot) await admission.wait(tx, fop!);
        applied = true;
        try {
          outcome = { ok: true, value: await fn() };
        } catch (error) {
          outcome = { ok: false, error };
        }
        // Operations wait for a slot somewhere: wake them when this one's frees (at commit).
        if (admission?.contended()) await tx.unsafe(admission.freedStatement);
      });
    } catch (e) {
      // Locks not obtained: nothing applied. Obtained: the op's own outcome stands (the
      // commit that releases them failing changes nothing the op did).
      if (!applied) throw new ApiError('SLOW_DOWN', UNREACHABLE, { reason: (e as Error).message });
    }
    if (!outcome) throw new ApiError('SLOW_DOWN', UNREACHABLE);
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  }

  async close(): Promise<void> {
    await this.sql.end({ timeout: 5 });
  }
}
