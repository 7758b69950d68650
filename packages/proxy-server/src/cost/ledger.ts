/**
 * The cost ledger (docs/cost.md; tables of migration 005): requests to each backend by
 * billing class, bytes held per tier integrated over the month, and egress per user.
 * Requests and egress are counted in memory on the request path and written in one
 * transaction per `flush` (the cost service flushes with each sample and on close), so a
 * crash loses at most one sampling interval of counts.
 */
import type Database from 'better-sqlite3';
import type { RequestKind, Tier, TierUsage, Usage } from './model.ts';
import { monthOf } from './model.ts';

export type Backend = Tier;
/** The whole proxy's rows ('' cannot be a user id). */
export const PROXY = '';
const HOUR_MS = 3600 * 1000;

export interface StorageReading {
  readonly userId: string;
  readonly tier: Tier;
  readonly bytes: number;
}

interface StorageRow {
  month: string;
  byte_ms: number;
  last_bytes: number;
  last_ms: number;
}

function emptyRequests(): Record<RequestKind, { requests: number; bytes: number }> {
  return {
    put: { requests: 0, bytes: 0 },
    get: { requests: 0, bytes: 0 },
    delete: { requests: 0, bytes: 0 },
  };
}

export class CostLedger {
  private readonly pendingRequests = new Map<string, { requests: number; bytes: number }>();
  private readonly pendingEgress = new Map<string, number>();

  constructor(private readonly db: Database.Database) {}

  /** Count requests to `backend` (cheap: in memory until the next flush). */
  countRequests(backend: Backend, kind: RequestKind, requests: number, bytes: number): void {
    const key = `${backend}\0${kind}`;
    const p = this.pendingRequests.get(key) ?? { requests: 0, bytes: 0 };
    p.requests += requests;
    p.bytes += bytes;
    this.pendingRequests.set(key, p);
  }

  countEgress(userId: string, bytes: number): void {
    this.pendingEgress.set(userId, (this.pendingEgress.get(userId) ?? 0) + bytes);
  }

  /** Write the pending counts into the month of `nowMs`. */
  flush(nowMs: number): void {
    const { month } = monthOf(nowMs);
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
      for (const [key, p] of this.pendingRequests) {
        const [backend, kind] = key.split('\0');
        addRequests.run(month, backend, kind, p.requests, p.bytes);
      }
      for (const [userId, bytes] of this.pendingEgress) addEgress.run(month, userId, bytes);
    })();
    this.pendingRequests.clear();
    this.pendingEgress.clear();
  }

  /**
   * Record the bytes held now. The interval since the previous sample is charged at the
   * previous sample's bytes (split at a month boundary); the hour's chart point is updated.
   */
  sample(nowMs: number, readings: readonly StorageReading[]): void {
    const span = monthOf(nowMs);
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
    const hour = Math.floor(nowMs / HOUR_MS) * HOUR_MS;
    this.db.transaction(() => {
      for (const r of readings) {
        const prev = latest.get(r.userId, r.tier) as StorageRow | undefined;
        let byteMs = 0;
        if (prev && prev.last_ms <= nowMs) {
          if (prev.month === span.month) {
            byteMs = prev.byte_ms + prev.last_bytes * (nowMs - prev.last_ms);
          } else {
            // Close the earlier month at its end; this month starts with the same bytes.
            const closedAt = Math.max(prev.last_ms, span.startMs);
            upsert.run(
              prev.month,
              r.userId,
              r.tier,
              prev.byte_ms + prev.last_bytes * (closedAt - prev.last_ms),
              prev.last_bytes,
              closedAt,
            );
            byteMs = prev.last_bytes * (nowMs - closedAt);
          }
        } else if (prev) {
          byteMs = prev.byte_ms; // a clock that went back: charge nothing for the gap
        }
        upsert.run(span.month, r.userId, r.tier, byteMs, r.bytes, nowMs);
        point.run(hour, r.userId, r.tier, r.bytes);
      }
    })();
  }

  /** The proxy's usage (`PROXY`) or one user's, this month up to `nowMs`. */
  usage(userId: string, nowMs: number): Usage {
    const { month } = monthOf(nowMs);
    const tier = (t: Tier): TierUsage => {
      const r = this.db
        .prepare(
          'SELECT byte_ms, last_bytes, last_ms FROM cost_storage WHERE month = ? AND user_id = ? AND tier = ?',
        )
        .get(month, userId, t) as StorageRow | undefined;
      const requests = emptyRequests();
      for (const row of this.db
        .prepare('SELECT kind, requests, bytes FROM cost_requests WHERE month = ? AND backend = ?')
        .all(month, t) as { kind: RequestKind; requests: number; bytes: number }[]) {
        requests[row.kind] = { requests: row.requests, bytes: row.bytes };
      }
      for (const [key, p] of this.pendingRequests) {
        const [backend, kind] = key.split('\0') as [Backend, RequestKind];
        if (backend !== t) continue;
        requests[kind] = {
          requests: requests[kind].requests + p.requests,
          bytes: requests[kind].bytes + p.bytes,
        };
      }
      return {
        byteMs: r ? r.byte_ms + r.last_bytes * Math.max(0, nowMs - r.last_ms) : 0,
        bytesNow: r?.last_bytes ?? 0,
        requests,
      };
    };
    let egressBytes = 0;
    const rows = this.db
      .prepare(
        `SELECT user_id, bytes FROM cost_egress WHERE month = ?${userId === PROXY ? '' : ' AND user_id = ?'}`,
      )
      .all(...(userId === PROXY ? [month] : [month, userId])) as { user_id: string; bytes: number }[];
    for (const r of rows) egressBytes += r.bytes;
    for (const [u, bytes] of this.pendingEgress) if (userId === PROXY || u === userId) egressBytes += bytes;
    return { tiers: { fs: tier('fs'), objects: tier('objects') }, egressBytes };
  }

  /** Hourly points of bytes held since `sinceMs`, oldest first. */
  history(userId: string, sinceMs: number): { timeMs: number; fsBytes: number; objectsBytes: number }[] {
    const rows = this.db
      .prepare(
        'SELECT hour_ms, tier, bytes FROM cost_history WHERE user_id = ? AND hour_ms >= ? ORDER BY hour_ms',
      )
      .all(userId, sinceMs) as { hour_ms: number; tier: Tier; bytes: number }[];
    const out: { timeMs: number; fsBytes: number; objectsBytes: number }[] = [];
    for (const r of rows) {
      let last = out[out.length - 1];
      if (!last || last.timeMs !== r.hour_ms) {
        last = { timeMs: r.hour_ms, fsBytes: 0, objectsBytes: 0 };
        out.push(last);
      }
      if (r.tier === 'fs') last.fsBytes = r.bytes;
      else last.objectsBytes = r.bytes;
    }
    return out;
  }

  /** Drop chart points older than `beforeMs` (the monthly rows are kept). */
  prune(beforeMs: number): void {
    this.db.prepare('DELETE FROM cost_history WHERE hour_ms < ?').run(beforeMs);
  }
}

/**
 * The bytes each tier holds now, from the metadata tables: per user the logical bytes of
 * their files on each tier; for the proxy the physical bytes (an object shared by several
 * users counted once).
 */
export function readStorage(db: Database.Database): StorageReading[] {
  const out: StorageReading[] = [];
  const perUser = db
    .prepare(
      `SELECT user_id, tier, COALESCE(SUM(size), 0) AS bytes FROM entries
       WHERE kind = 'file' AND tier IS NOT NULL GROUP BY user_id, tier`,
    )
    .all() as { user_id: string; tier: 'small' | 'large'; bytes: number }[];
  const users = new Map<string, { fs: number; objects: number }>();
  for (const u of db.prepare('SELECT id FROM users').all() as { id: string }[])
    users.set(u.id, { fs: 0, objects: 0 });
  let fsTotal = 0;
  for (const r of perUser) {
    const u = users.get(r.user_id) ?? { fs: 0, objects: 0 };
    if (r.tier === 'small') {
      u.fs += r.bytes;
      fsTotal += r.bytes;
    } else u.objects += r.bytes;
    users.set(r.user_id, u);
  }
  // Kept versions (migration 007) are held for their users too: small ones on the filesystem
  // tier (each content once for the proxy), large ones as objects (already in `objects`).
  const kept = db
    .prepare('SELECT user_id, tier, COALESCE(SUM(size), 0) AS bytes FROM versions GROUP BY user_id, tier')
    .all() as { user_id: string; tier: 'small' | 'large'; bytes: number }[];
  for (const r of kept) {
    const u = users.get(r.user_id) ?? { fs: 0, objects: 0 };
    if (r.tier === 'small') u.fs += r.bytes;
    else u.objects += r.bytes;
    users.set(r.user_id, u);
  }
  const keptSmall = db
    .prepare(
      `SELECT COALESCE(SUM(size), 0) AS bytes FROM (SELECT DISTINCT sha256, size FROM versions WHERE tier = 'small')`,
    )
    .get() as { bytes: number };
  fsTotal += keptSmall.bytes;
  for (const [userId, u] of users) {
    out.push({ userId, tier: 'fs', bytes: u.fs }, { userId, tier: 'objects', bytes: u.objects });
  }
  // The object tier holds the large objects and the packs (whole, dead entries included);
  // the filesystem tier no longer holds a small file whose copy was dropped for its pack.
  const objects = db
    .prepare(
      `SELECT (SELECT COALESCE(SUM(size), 0) FROM objects) + (SELECT COALESCE(SUM(size), 0) FROM packs) AS bytes`,
    )
    .get() as { bytes: number };
  const dropped = db
    .prepare(
      `SELECT COALESCE(SUM(size), 0) AS bytes FROM entries
       WHERE kind = 'file' AND tier = 'small' AND sha256 IN (SELECT sha256 FROM fs_dropped)`,
    )
    .get() as { bytes: number };
  fsTotal -= dropped.bytes;
  out.push(
    { userId: PROXY, tier: 'fs', bytes: fsTotal },
    { userId: PROXY, tier: 'objects', bytes: objects.bytes },
  );
  return out;
}
