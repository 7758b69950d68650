/**
 * The share mirror engines' books on PostgreSQL (the mirror's ShareStore interface,
 * packages/mirror/src/books-store.ts): tables `mirror_*` of pg-migrations/007, the rows the
 * mirror's SQLite books hold. Every proxy instance on the database reads them (a share's
 * replica availability and backlog), the controller's engines write them.
 *
 * Fencing: the books take a `fenceFor` hook, called once per share store (when an engine
 * starts, in the controller term it starts in); every write runs in a transaction that first
 * calls the fence it returned — the lease row is locked FOR SHARE there (cluster/lease.ts), so
 * no takeover commits meanwhile, and once the term is over the write is refused (FencedError)
 * and nothing of it applied. A `transaction(fn)` is fenced once, at its start.
 *
 * Why here and not in packages/mirror: the proxy owns the PostgreSQL driver (`postgres`), the
 * one numbered migration set with its version table (store/postgres-db.ts) and the lease; the
 * mirror package stays free of a database server and keeps SQLite as its embedded default.
 */
import {
  atOrUnder,
  type HeadEntry,
  type KnownEntry,
  type LoggedOp,
  loggedOp,
  type LogRecord,
  logRecord,
  type MirrorBooks,
  type MirrorLogRow,
  type Op,
  type Outage,
  outageOf,
  type OutageRow,
  type ShareStore,
} from '@weft/mirror';
import { type ClusterRole, FencedError } from '../cluster/lease.ts';
import { connect, inTransaction, type Sql, type Tx } from '../store/postgres-db.ts';

/** Checks, inside a write's transaction, that the writer may still write (throws if not). */
export type BooksFence = (tx: Tx) => Promise<void>;

export interface PostgresMirrorBooksOptions {
  /** Called when a share's store is made (an engine starting): the fence of its writes. Default: none. */
  readonly fenceFor?: () => BooksFence;
}

type Q = Sql | Tx;

/**
 * The fence of the controller term current now (`fenceFor` for the proxy): a store made in
 * term N writes only while this instance still holds the role in term N — not after it was
 * lost, even if regained since. Made while not the controller: every write is refused.
 */
export function termFence(role: ClusterRole): () => BooksFence {
  return () => {
    const token = role.fencingToken;
    return (tx) =>
      token === undefined
        ? Promise.reject(new FencedError(`instance ${role.instanceId} is not the controller`))
        : role.fence(tx, token);
  };
}

/** `path` at or below `prefix` ('' = all), in SQL. */
function under(q: Q, prefix: string) {
  return prefix === '' ? q`TRUE` : q`(path = ${prefix} OR starts_with(path, ${prefix + '/'}))`;
}

export class PostgresMirrorBooks implements MirrorBooks {
  constructor(
    private readonly sql: Sql,
    private readonly o: PostgresMirrorBooksOptions = {},
    private readonly owned = false,
  ) {}

  /** On a pool of its own (closed by close()). */
  static open(url: string, o: PostgresMirrorBooksOptions = {}): PostgresMirrorBooks {
    return new PostgresMirrorBooks(connect(url, 4), o, true);
  }

  share(shareId: string): ShareStore {
    return new PostgresShareStore(this.sql, shareId, this.o.fenceFor?.());
  }

  async close(): Promise<void> {
    if (this.owned) await this.sql.end({ timeout: 5 });
  }
}

export class PostgresShareStore implements ShareStore {
  constructor(
    private readonly q: Q,
    readonly shareId: string,
    private readonly fence: BooksFence | undefined,
    /** Bound to a transaction already fenced: calls run in it. */
    private readonly tx?: Tx,
  ) {}

  /** Run a write: in the open transaction, or in a new fenced one. */
  private write<T>(fn: (q: Q) => Promise<T>): Promise<T> {
    if (this.tx) return fn(this.tx);
    return inTransaction(this.q as Sql, async (tx) => {
      await this.fence?.(tx);
      return fn(tx);
    });
  }

  async transaction<T>(fn: (tx: ShareStore) => Promise<T>): Promise<T> {
    if (this.tx) return fn(this);
    return inTransaction(this.q as Sql, async (tx) => {
      await this.fence?.(tx);
      return fn(new PostgresShareStore(tx, this.shareId, this.fence, tx));
    });
  }

  async cursor(replica: string): Promise<string | undefined> {
    const [r] = await this.q<{ cursor: string }[]>`SELECT cursor FROM mirror_replica_cursor
      WHERE share_id = ${this.shareId} AND replica_id = ${replica}`;
    return r?.cursor;
  }

  async setCursor(replica: string, cursor: string): Promise<void> {
    await this.write(
      (q) => q`INSERT INTO mirror_replica_cursor (share_id, replica_id, cursor)
        VALUES (${this.shareId}, ${replica}, ${cursor})
        ON CONFLICT (share_id, replica_id) DO UPDATE SET cursor = excluded.cursor`,
    );
  }

  async known(replica: string, path: string): Promise<KnownEntry | undefined> {
    const [r] = await this.q<KnownEntry[]>`SELECT kind, revision, sha256 FROM mirror_known
      WHERE share_id = ${this.shareId} AND replica_id = ${replica} AND path = ${path}`;
    return r ? { kind: r.kind, revision: r.revision, sha256: r.sha256 } : undefined;
  }

  async knownUnder(replica: string, path: string): Promise<(KnownEntry & { path: string })[]> {
    const rows = await this.q<(KnownEntry & { path: string })[]>`SELECT path, kind, revision, sha256
      FROM mirror_known WHERE share_id = ${this.shareId} AND replica_id = ${replica}
      AND ${under(this.q, path)} ORDER BY path`;
    return rows.map((r) => ({ path: r.path, kind: r.kind, revision: r.revision, sha256: r.sha256 }));
  }

  async setKnown(replica: string, path: string, entry: KnownEntry | undefined): Promise<void> {
    await this.write((q) =>
      entry === undefined
        ? q`DELETE FROM mirror_known WHERE share_id = ${this.shareId} AND replica_id = ${replica} AND path = ${path}`
        : q`INSERT INTO mirror_known (share_id, replica_id, path, kind, revision, sha256)
            VALUES (${this.shareId}, ${replica}, ${path}, ${entry.kind}, ${entry.revision}, ${entry.sha256})
            ON CONFLICT (share_id, replica_id, path) DO UPDATE SET kind = excluded.kind,
              revision = excluded.revision, sha256 = excluded.sha256`,
    );
  }

  async dropKnownUnder(replica: string, path: string): Promise<void> {
    await this.write(
      (q) => q`DELETE FROM mirror_known WHERE share_id = ${this.shareId} AND replica_id = ${replica}
        AND (path = ${path} OR starts_with(path, ${path + '/'}))`,
    );
  }

  async head(path: string): Promise<KnownEntry | undefined> {
    const [r] = await this.q<{ kind: 'file' | 'dir'; sha256: string }[]>`SELECT kind, sha256
      FROM mirror_head WHERE share_id = ${this.shareId} AND path = ${path}`;
    return r ? { kind: r.kind, sha256: r.sha256, revision: '' } : undefined;
  }

  async headUnder(path: string): Promise<HeadEntry[]> {
    const rows = await this.q<HeadEntry[]>`SELECT path, kind, sha256 FROM mirror_head
      WHERE share_id = ${this.shareId} AND ${under(this.q, path)} ORDER BY path`;
    return rows.map((r) => ({ path: r.path, kind: r.kind, sha256: r.sha256 }));
  }

  async setHead(path: string, entry: { kind: 'file' | 'dir'; sha256: string } | undefined): Promise<void> {
    await this.write(async (q) => {
      if (entry === undefined) {
        await q`DELETE FROM mirror_head WHERE share_id = ${this.shareId} AND path = ${path}`;
        return;
      }
      await q`INSERT INTO mirror_head (share_id, path, kind, sha256)
        VALUES (${this.shareId}, ${path}, ${entry.kind}, ${entry.sha256})
        ON CONFLICT (share_id, path) DO UPDATE SET kind = excluded.kind, sha256 = excluded.sha256`;
      if (entry.kind === 'file')
        await q`INSERT INTO mirror_head_history (share_id, path, sha256)
          VALUES (${this.shareId}, ${path}, ${entry.sha256}) ON CONFLICT DO NOTHING`;
    });
  }

  async wasHead(path: string, sha256: string): Promise<boolean> {
    const rows = await this.q`SELECT 1 FROM mirror_head_history
      WHERE share_id = ${this.shareId} AND path = ${path} AND sha256 = ${sha256}`;
    return rows.length > 0;
  }

  async pruneHeadHistory(): Promise<number> {
    const rows = await this.write(
      (q) => q`DELETE FROM mirror_head_history h WHERE h.share_id = ${this.shareId}
        AND NOT EXISTS (SELECT 1 FROM mirror_head c WHERE c.share_id = h.share_id
          AND c.path = h.path AND c.sha256 = h.sha256)
        AND NOT EXISTS (SELECT 1 FROM mirror_known k WHERE k.share_id = h.share_id
          AND k.path = h.path AND k.sha256 = h.sha256)`,
    );
    return rows.count;
  }

  async dropHeadUnder(path: string): Promise<void> {
    await this.write(
      (q) => q`DELETE FROM mirror_head WHERE share_id = ${this.shareId}
        AND (path = ${path} OR starts_with(path, ${path + '/'}))`,
    );
  }

  async append(
    origin: string,
    op: Op,
    data: Uint8Array | undefined,
    nowMs: number,
    doneTargets: string[] = [],
  ): Promise<number> {
    return this.write(async (q) => {
      const [r] = await q<{ seq: number }[]>`INSERT INTO mirror_log
        (share_id, origin, op, data, done_targets, created_ms)
        VALUES (${this.shareId}, ${origin}, ${JSON.stringify(op)},
          ${data === undefined ? null : Buffer.from(data.buffer, data.byteOffset, data.byteLength)},
          ${JSON.stringify(doneTargets)}, ${nowMs})
        RETURNING seq`;
      return r!.seq;
    });
  }

  async pendingCount(): Promise<number> {
    const [r] = await this.q<{ n: number }[]>`SELECT COUNT(*)::int AS n FROM mirror_log
      WHERE share_id = ${this.shareId} AND NOT done`;
    return r?.n ?? 0;
  }

  async pending(afterSeq = 0, withData = true): Promise<LoggedOp[]> {
    const rows = await this.q<MirrorLogRow[]>`SELECT seq, origin, op,
        ${withData ? this.q`data` : this.q`NULL::bytea AS data`}, done_targets, created_ms
      FROM mirror_log WHERE share_id = ${this.shareId} AND NOT done AND seq > ${afterSeq} ORDER BY seq`;
    return rows.map(loggedOp);
  }

  async pendingFor(replica: string): Promise<number> {
    const [r] = await this.q<{ n: number }[]>`SELECT COUNT(*)::int AS n FROM mirror_log
      WHERE share_id = ${this.shareId} AND NOT done
        AND NOT (done_targets::jsonb @> to_jsonb(${replica}::text))`;
    return r?.n ?? 0;
  }

  async data(seq: number): Promise<Uint8Array | undefined> {
    const [r] = await this.q<{ data: Buffer | null }[]>`SELECT data FROM mirror_log WHERE seq = ${seq}`;
    return r?.data ?? undefined;
  }

  async outage(replica: string): Promise<Outage | undefined> {
    const [r] = await this.q<OutageRow[]>`SELECT cause, since_ms, failures, next_probe_ms, error
      FROM mirror_replica_outage WHERE share_id = ${this.shareId} AND replica_id = ${replica}`;
    return r && outageOf(r);
  }

  async setOutage(replica: string, o: Outage | undefined): Promise<void> {
    await this.write((q) =>
      o === undefined
        ? q`DELETE FROM mirror_replica_outage WHERE share_id = ${this.shareId} AND replica_id = ${replica}`
        : q`INSERT INTO mirror_replica_outage
            (share_id, replica_id, cause, since_ms, failures, next_probe_ms, error)
            VALUES (${this.shareId}, ${replica}, ${o.cause}, ${o.sinceMs}, ${o.failures}, ${o.nextProbeMs}, ${o.error})
            ON CONFLICT (share_id, replica_id) DO UPDATE SET cause = excluded.cause,
              since_ms = excluded.since_ms, failures = excluded.failures,
              next_probe_ms = excluded.next_probe_ms, error = excluded.error`,
    );
  }

  async markTargetDone(seq: number, targets: readonly string[]): Promise<void> {
    await this.write(
      (q) => q`UPDATE mirror_log SET done_targets = ${JSON.stringify(targets)} WHERE seq = ${seq}`,
    );
  }

  async markDone(seq: number): Promise<void> {
    await this.write((q) => q`UPDATE mirror_log SET done = TRUE, data = NULL WHERE seq = ${seq}`);
  }

  async touch(replica: string, path: string): Promise<void> {
    await this.write(
      (q) => q`INSERT INTO mirror_touched (share_id, replica_id, path, seq)
        SELECT ${this.shareId}, ${replica}, ${path}, COALESCE(MAX(seq), 0) FROM mirror_log
          WHERE share_id = ${this.shareId}
        ON CONFLICT (share_id, replica_id, path) DO UPDATE SET seq = excluded.seq`,
    );
  }

  async touchedAt(replica: string, path: string): Promise<number> {
    const [r] = await this.q<{ seq: number }[]>`SELECT seq FROM mirror_touched
      WHERE share_id = ${this.shareId} AND replica_id = ${replica} AND path = ${path}`;
    return r?.seq ?? 0;
  }

  async touchedUnderSince(replica: string, path: string, seq: number): Promise<boolean> {
    const rows = await this.q<{ path: string }[]>`SELECT path FROM mirror_touched
      WHERE share_id = ${this.shareId} AND replica_id = ${replica} AND seq >= ${seq}`;
    return rows.some((r) => atOrUnder(r.path, path));
  }

  async copiesOf(seq: number): Promise<string[]> {
    const rows = await this.q<{ copy: string }[]>`SELECT copy FROM mirror_conflict_copies
      WHERE share_id = ${this.shareId} AND seq = ${seq} ORDER BY copy`;
    return rows.map((r) => r.copy);
  }

  async reserveCopy(seq: number, copy: string): Promise<boolean> {
    return this.write(async (q) => {
      await q`INSERT INTO mirror_conflict_copies (share_id, copy, seq) VALUES (${this.shareId}, ${copy}, ${seq})
        ON CONFLICT (share_id, copy) DO NOTHING`;
      const [r] = await q<{ seq: number }[]>`SELECT seq FROM mirror_conflict_copies
        WHERE share_id = ${this.shareId} AND copy = ${copy}`;
      return r?.seq === seq;
    });
  }

  async maxSeq(): Promise<number> {
    const [r] = await this.q<{ m: number | null }[]>`SELECT MAX(seq) AS m FROM mirror_log
      WHERE share_id = ${this.shareId}`;
    return r?.m ?? 0;
  }

  async logLength(): Promise<number> {
    const [r] = await this.q<{ n: number }[]>`SELECT COUNT(*)::int AS n FROM mirror_log
      WHERE share_id = ${this.shareId}`;
    return r?.n ?? 0;
  }

  async logRecords(): Promise<LogRecord[]> {
    const rows = await this.q<
      { seq: number; origin: string; op: string; done_targets: string; done: boolean }[]
    >`
      SELECT seq, origin, op, done_targets, done FROM mirror_log WHERE share_id = ${this.shareId} ORDER BY seq`;
    return rows.map(logRecord);
  }
}
