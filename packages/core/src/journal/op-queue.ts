/**
 * The journal's operation queue and its persistence in the `ops` table: the queue is loaded
 * once and kept in memory (CoalescingQueue), and a transaction writes the rows it changed
 * once, when it ends. The Journal owns the database and delegates its queue methods here.
 */
import type Database from 'better-sqlite3';
import { CoalescingQueue } from '../coalesce.ts';
import type { Op } from '../ops.ts';

export interface QueuedOp {
  readonly id: number;
  readonly op: Op;
}

interface OpRecord {
  id: number | bigint;
  kind: Op['kind'];
  path: string;
  to_path: string | null;
  hash: string | null;
  size: number | bigint | null;
  created: number | bigint;
  replaces: number | bigint;
}

function toOp(r: OpRecord): Op {
  switch (r.kind) {
    case 'put':
      return {
        kind: 'put',
        path: r.path,
        hash: r.hash ?? '',
        size: Number(r.size ?? 0),
        created: r.created === 1 || r.created === 1n,
      };
    case 'mkdir':
      return { kind: 'mkdir', path: r.path, created: Number(r.created) === 1 };
    case 'delete':
      // A delete keeps the revision it removes in the hash column.
      return r.hash === null
        ? { kind: 'delete', path: r.path }
        : { kind: 'delete', path: r.path, revision: r.hash };
    case 'move':
      return { kind: 'move', from: r.path, to: r.to_path ?? '', replaces: Number(r.replaces) === 1 };
  }
}

export class OpQueueStore {
  constructor(
    private readonly db: Database.Database,
    /** The journal's prepared statement for a text (prepared once). */
    private readonly sql: (text: string) => Database.Statement,
  ) {}

  /**
   * The waiting operations, loaded once and kept in step with the ops table: the table's
   * row id is the queue position (CoalescingQueue), so a push writes only the rows it
   * changed. Dropped (reloaded on next use) whenever a transaction that touched it fails.
   */
  private queueCache: CoalescingQueue | undefined;

  private get queue(): CoalescingQueue {
    if (this.queueCache === undefined) {
      const rows = this.sql('SELECT * FROM ops ORDER BY id').all() as OpRecord[];
      // Never reuse a position (an operation being sent is completed by its id later).
      const seq = this.sql("SELECT seq FROM sqlite_sequence WHERE name = 'ops'").get() as
        { seq: number | bigint } | undefined;
      this.queueCache = new CoalescingQueue(
        rows.map((r) => ({ id: Number(r.id), op: toOp(r) })),
        Number(seq?.seq ?? 0) + 1,
      );
    }
    return this.queueCache;
  }

  /** Times the queue's changes were written to the ops table (tests: once per transaction). */
  writes = 0;

  /** Write the queue's changes to the ops table (inside the caller's transaction). */
  private flush(): void {
    const changes = this.queue.takeChanges();
    if (changes.size === 0) return;
    this.writes += 1;
    this.pendingCache = undefined;
    const del = this.sql('DELETE FROM ops WHERE id = ?');
    const put = this.sql(
      `INSERT INTO ops(id, kind, path, to_path, hash, size, created, replaces, queued_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT(id) DO UPDATE SET kind = excluded.kind, path = excluded.path, to_path = excluded.to_path,
         hash = excluded.hash, size = excluded.size, created = excluded.created, replaces = excluded.replaces`,
    );
    const now = Date.now();
    // The deleted rows in one statement (a bundle's outcomes delete up to 64 at once; one
    // statement a row was a measurable share of the agent's CPU per upload, issue #16).
    const deleted: number[] = [];
    for (const [id, o] of changes) {
      if (o === undefined) deleted.push(id);
      else if (o.kind === 'move') put.run(id, 'move', o.from, o.to, null, null, 0, o.replaces ? 1 : 0, now);
      else if (o.kind === 'put') put.run(id, 'put', o.path, null, o.hash, o.size, o.created ? 1 : 0, 0, now);
      else if (o.kind === 'mkdir') put.run(id, 'mkdir', o.path, null, null, null, o.created ? 1 : 0, 0, now);
      // A delete keeps the revision it removes in the hash column.
      else put.run(id, 'delete', o.path, null, o.revision ?? null, null, 0, 0, now);
    }
    if (deleted.length === 1) del.run(deleted[0]);
    else if (deleted.length > 1)
      this.sql('DELETE FROM ops WHERE id IN (SELECT value FROM json_each(?))').run(JSON.stringify(deleted));
  }

  /** Inside transaction(): the queue's changes are written once, when it ends. */
  private inTransaction = false;

  /**
   * Run `fn` in a transaction and write the queue's changes at its end; if it fails, forget
   * the cached queue (the table is the truth). Nested calls run inside the outer one, with
   * no savepoint of their own: a savepoint and a flush per completed operation were a tenth
   * of a 100,000-file upload's journal time (issue #16).
   */
  transaction<T>(fn: () => T): T {
    if (this.inTransaction) return fn();
    try {
      this.inTransaction = true;
      return this.db.transaction(() => {
        const out = fn();
        this.flush();
        return out;
      })();
    } catch (e) {
      this.queueCache = undefined;
      this.pendingCache = undefined;
      throw e;
    } finally {
      this.inTransaction = false;
    }
  }

  /** See Journal.enqueueMany. */
  enqueueMany(ops: readonly Op[], alsoInTransaction?: () => void): number {
    return this.transaction(() => {
      alsoInTransaction?.();
      const queue = this.queue;
      for (const op of ops) queue.push(op);
      this.pendingCache = undefined;
      return queue.size;
    });
  }

  /**
   * The waiting operations in order (from memory: no table read). The same array until the
   * queue next changes: callers that ask once per file of a 100,000-file queue copy it once.
   */
  pendingOps(): readonly QueuedOp[] {
    this.pendingCache ??= [...this.queue.entries()];
    return this.pendingCache;
  }

  private pendingCache: readonly QueuedOp[] | undefined;

  /** See Journal.whereNow: O(queued moves), whatever the length of the queue. */
  whereNow(id: number, path: string): string {
    let p = path;
    for (const { op } of this.queue.movesAfter(id)) {
      if (op.kind !== 'move') continue;
      if (p === op.from) p = op.to;
      else if (p.startsWith(op.from + '/')) p = op.to + p.slice(op.from.length);
    }
    return p;
  }

  /** The queued moves, in queue order: O(moves), whatever the length of the queue. */
  queuedMoves(): QueuedOp[] {
    return this.queue.movesAfter(0);
  }

  /** How many operations wait. */
  pendingCount(): number {
    return this.queue.size;
  }

  /** Remove a finished operation and apply its journal effects in the same transaction. */
  completeOp(id: number, effects: () => void): void {
    this.transaction(() => {
      if (this.queue.remove(id)) this.pendingCache = undefined;
      effects();
    });
  }
}
