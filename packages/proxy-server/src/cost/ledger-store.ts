/**
 * The cost ledger's tables (SQLite migration 005, pg-migrations/002): one async interface, two
 * implementations on the metadata store's database — SQLite here, PostgreSQL in
 * ledger-postgres.ts — so that with several proxy processes on one PostgreSQL the ledger
 * holds every process's requests and egress (each adds its own counts) and the bytes held
 * are read from the shared index, per user.
 */
import type Database from 'better-sqlite3';
import type { RequestKind, Tier } from './model.ts';

/** The whole proxy's rows ('' cannot be a user id). */
export const PROXY = '';

export interface StorageReading {
  readonly userId: string;
  readonly tier: Tier;
  readonly bytes: number;
}

export interface StorageRow {
  month: string;
  byte_ms: number;
  last_bytes: number;
  last_ms: number;
}

export interface RequestCount {
  readonly backend: Tier;
  readonly kind: RequestKind;
  readonly requests: number;
  readonly bytes: number;
}

export interface CostStore {
  /** Add request and egress counts to `month` (one transaction). */
  addCounts(
    month: string,
    requests: readonly RequestCount[],
    egress: ReadonlyMap<string, number>,
  ): Promise<void>;
  /**
   * Record the bytes held at `nowMs` (chargeSample on each reading's latest row, read and
   * written in one transaction) and the hour's chart points.
   */
  sample(
    nowMs: number,
    span: { month: string; startMs: number },
    hourMs: number,
    readings: readonly StorageReading[],
  ): Promise<void>;
  storage(month: string, userId: string, tier: Tier): Promise<StorageRow | undefined>;
  requests(month: string, backend: Tier): Promise<{ kind: RequestKind; requests: number; bytes: number }[]>;
  /** Egress of `month`: one user's, or (PROXY) everyone's. */
  egress(month: string, userId: string): Promise<number>;
  history(userId: string, sinceMs: number): Promise<{ hour_ms: number; tier: Tier; bytes: number }[]>;
  prune(beforeMs: number): Promise<void>;
  /**
   * The bytes each tier holds now, from the metadata tables: per user the logical bytes of
   * their files on each tier; for the proxy the physical bytes (an object shared by several
   * users counted once).
   */
  readStorage(): Promise<StorageReading[]>;
}

/**
 * The rows a sample writes for one reading, given the latest row before it: the interval
 * since that row is charged at its bytes (split at a month boundary: the earlier month is
 * closed at its end, this month starts with the same bytes); a clock that went back is
 * charged nothing for the gap.
 */
export function chargeSample(
  prev: StorageRow | undefined,
  span: { month: string; startMs: number },
  nowMs: number,
  bytes: number,
): StorageRow[] {
  let byteMs = 0;
  const out: StorageRow[] = [];
  if (prev && prev.last_ms <= nowMs) {
    if (prev.month === span.month) {
      byteMs = prev.byte_ms + prev.last_bytes * (nowMs - prev.last_ms);
    } else {
      const closedAt = Math.max(prev.last_ms, span.startMs);
      out.push({
        month: prev.month,
        byte_ms: prev.byte_ms + prev.last_bytes * (closedAt - prev.last_ms),
        last_bytes: prev.last_bytes,
        last_ms: closedAt,
      });
      byteMs = prev.last_bytes * (nowMs - closedAt);
    }
  } else if (prev) {
    byteMs = prev.byte_ms;
  }
  out.push({ month: span.month, byte_ms: byteMs, last_bytes: bytes, last_ms: nowMs });
  return out;
}

/** Per-user and proxy totals from the per-user rows of the index (both stores). */
export function storageReadings(
  users: readonly string[],
  perUser: readonly { user_id: string; tier: 'small' | 'large'; bytes: number }[],
  kept: readonly { user_id: string; tier: 'small' | 'large'; bytes: number }[],
  keptSmallBytes: number,
  objectBytes: number,
  droppedBytes: number,
): StorageReading[] {
  const byUser = new Map<string, { fs: number; objects: number }>();
  for (const id of users) byUser.set(id, { fs: 0, objects: 0 });
  let fsTotal = 0;
  for (const r of perUser) {
    const u = byUser.get(r.user_id) ?? { fs: 0, objects: 0 };
    if (r.tier === 'small') {
      u.fs += r.bytes;
      fsTotal += r.bytes;
    } else u.objects += r.bytes;
    byUser.set(r.user_id, u);
  }
  // Kept versions (migration 007) are held for their users too: small ones on the filesystem
  // tier (each content once for the proxy), large ones as objects (already in `objects`).
  for (const r of kept) {
    const u = byUser.get(r.user_id) ?? { fs: 0, objects: 0 };
    if (r.tier === 'small') u.fs += r.bytes;
    else u.objects += r.bytes;
    byUser.set(r.user_id, u);
  }
  fsTotal += keptSmallBytes;
  const out: StorageReading[] = [];
  for (const [userId, u] of byUser)
    out.push({ userId, tier: 'fs', bytes: u.fs }, { userId, tier: 'objects', bytes: u.objects });
  // The object tier holds the large objects and the packs (whole, dead entries included);
  // the filesystem tier no longer holds a small file whose copy was dropped for its pack.
  out.push(
    { userId: PROXY, tier: 'fs', bytes: fsTotal - droppedBytes },
    { userId: PROXY, tier: 'objects', bytes: objectBytes },
  );
  return out;
}

export class SqliteCostStore implements CostStore {
  constructor(private readonly db: Database.Database) {}

  async addCounts(
    month: string,
    requests: readonly RequestCount[],
    egress: ReadonlyMap<string, number>,
  ): Promise<void> {
    const addRequests = this.db.prepare(
      `INSERT INTO cost_requests (month, backend, kind, requests, bytes) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (month, backend, kind) DO UPDATE SET
         requests = requests + excluded.requests, bytes = bytes + excluded.bytes`,
    );
    const addEgress = this.db.prepare(
      `INSERT INTO cost_egress (month, user_id, bytes) VALUES (?, ?, ?)
       ON CONFLICT (month, user_id) DO UPDATE SET bytes = bytes + excluded.bytes`,
    );
    this.db.transaction(() => {
      for (const r of requests) addRequests.run(month, r.backend, r.kind, r.requests, r.bytes);
      for (const [userId, bytes] of egress) addEgress.run(month, userId, bytes);
    })();
  }

  async sample(
    nowMs: number,
    span: { month: string; startMs: number },
    hourMs: number,
    readings: readonly StorageReading[],
  ): Promise<void> {
    const latest = this.db.prepare(
      'SELECT month, byte_ms, last_bytes, last_ms FROM cost_storage WHERE user_id = ? AND tier = ? ORDER BY month DESC LIMIT 1',
    );
    const upsert = this.db.prepare(
      `INSERT INTO cost_storage (month, user_id, tier, byte_ms, last_bytes, last_ms) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (month, user_id, tier) DO UPDATE SET
         byte_ms = excluded.byte_ms, last_bytes = excluded.last_bytes, last_ms = excluded.last_ms`,
    );
    const point = this.db.prepare(
      `INSERT INTO cost_history (hour_ms, user_id, tier, bytes) VALUES (?, ?, ?, ?)
       ON CONFLICT (user_id, hour_ms, tier) DO UPDATE SET bytes = excluded.bytes`,
    );
    this.db.transaction(() => {
      for (const r of readings) {
        const prev = latest.get(r.userId, r.tier) as StorageRow | undefined;
        for (const row of chargeSample(prev, span, nowMs, r.bytes))
          upsert.run(row.month, r.userId, r.tier, row.byte_ms, row.last_bytes, row.last_ms);
        point.run(hourMs, r.userId, r.tier, r.bytes);
      }
    })();
  }

  async storage(month: string, userId: string, tier: Tier): Promise<StorageRow | undefined> {
    return this.db
      .prepare(
        'SELECT month, byte_ms, last_bytes, last_ms FROM cost_storage WHERE month = ? AND user_id = ? AND tier = ?',
      )
      .get(month, userId, tier) as StorageRow | undefined;
  }

  async requests(
    month: string,
    backend: Tier,
  ): Promise<{ kind: RequestKind; requests: number; bytes: number }[]> {
    return this.db
      .prepare('SELECT kind, requests, bytes FROM cost_requests WHERE month = ? AND backend = ?')
      .all(month, backend) as { kind: RequestKind; requests: number; bytes: number }[];
  }

  async egress(month: string, userId: string): Promise<number> {
    const all = userId === PROXY;
    const r = this.db
      .prepare(
        `SELECT COALESCE(SUM(bytes), 0) AS n FROM cost_egress WHERE month = ?${all ? '' : ' AND user_id = ?'}`,
      )
      .get(...(all ? [month] : [month, userId])) as { n: number };
    return r.n;
  }

  async history(userId: string, sinceMs: number): Promise<{ hour_ms: number; tier: Tier; bytes: number }[]> {
    return this.db
      .prepare(
        'SELECT hour_ms, tier, bytes FROM cost_history WHERE user_id = ? AND hour_ms >= ? ORDER BY hour_ms',
      )
      .all(userId, sinceMs) as { hour_ms: number; tier: Tier; bytes: number }[];
  }

  async prune(beforeMs: number): Promise<void> {
    this.db.prepare('DELETE FROM cost_history WHERE hour_ms < ?').run(beforeMs);
  }

  async readStorage(): Promise<StorageReading[]> {
    const db = this.db;
    type Row = { user_id: string; tier: 'small' | 'large'; bytes: number };
    const one = (q: string): number => (db.prepare(q).get() as { bytes: number }).bytes;
    return storageReadings(
      (db.prepare('SELECT id FROM users').all() as { id: string }[]).map((u) => u.id),
      db
        .prepare(
          `SELECT user_id, tier, COALESCE(SUM(size), 0) AS bytes FROM entries
           WHERE kind = 'file' AND tier IS NOT NULL GROUP BY user_id, tier`,
        )
        .all() as Row[],
      db
        .prepare('SELECT user_id, tier, COALESCE(SUM(size), 0) AS bytes FROM versions GROUP BY user_id, tier')
        .all() as Row[],
      one(
        `SELECT COALESCE(SUM(size), 0) AS bytes FROM (SELECT DISTINCT sha256, size FROM versions WHERE tier = 'small')`,
      ),
      one(
        `SELECT (SELECT COALESCE(SUM(size), 0) FROM objects) + (SELECT COALESCE(SUM(size), 0) FROM packs) AS bytes`,
      ),
      one(
        `SELECT COALESCE(SUM(size), 0) AS bytes FROM entries
         WHERE kind = 'file' AND tier = 'small' AND sha256 IN (SELECT sha256 FROM fs_dropped)`,
      ),
    );
  }
}
