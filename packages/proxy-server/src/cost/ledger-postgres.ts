/**
 * The cost ledger's tables on PostgreSQL (pg-migrations/002; ledger-store.ts), shared by every
 * proxy process on the database. Counts are added in one statement per row
 * (`requests = requests + n`); a sample reads each reading's latest row FOR UPDATE and writes
 * it in the same transaction, so two processes sampling at once charge each interval once.
 */
import { inTransaction, type Sql } from '../store/postgres-db.ts';
import {
  chargeSample,
  type CostStore,
  PROXY,
  type RequestCount,
  type StorageReading,
  type StorageRow,
  storageReadings,
} from './ledger-store.ts';
import type { RequestKind, Tier } from './model.ts';

export class PostgresCostStore implements CostStore {
  constructor(private readonly sql: Sql) {}

  async addCounts(
    month: string,
    requests: readonly RequestCount[],
    egress: ReadonlyMap<string, number>,
  ): Promise<void> {
    if (requests.length === 0 && egress.size === 0) return;
    // Sorted, so two processes adding at once lock the rows in the same order.
    const req = [...requests].sort((a, b) =>
      `${a.backend}\0${a.kind}` < `${b.backend}\0${b.kind}` ? -1 : 1,
    );
    const eg = [...egress].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    await inTransaction(this.sql, async (tx) => {
      for (const r of req)
        await tx`
          INSERT INTO cost_requests (month, backend, kind, requests, bytes)
            VALUES (${month}, ${r.backend}, ${r.kind}, ${r.requests}, ${r.bytes})
          ON CONFLICT (month, backend, kind) DO UPDATE SET
            requests = cost_requests.requests + excluded.requests, bytes = cost_requests.bytes + excluded.bytes`;
      for (const [userId, bytes] of eg)
        await tx`
          INSERT INTO cost_egress (month, user_id, bytes) VALUES (${month}, ${userId}, ${bytes})
          ON CONFLICT (month, user_id) DO UPDATE SET bytes = cost_egress.bytes + excluded.bytes`;
    });
  }

  async sample(
    nowMs: number,
    span: { month: string; startMs: number },
    hourMs: number,
    readings: readonly StorageReading[],
  ): Promise<void> {
    const sorted = [...readings].sort((a, b) =>
      `${a.userId}\0${a.tier}` < `${b.userId}\0${b.tier}` ? -1 : 1,
    );
    await inTransaction(this.sql, async (tx) => {
      for (const r of sorted) {
        const [prev] = await tx<StorageRow[]>`
          SELECT month, byte_ms, last_bytes, last_ms FROM cost_storage
          WHERE user_id = ${r.userId} AND tier = ${r.tier} ORDER BY month DESC LIMIT 1 FOR UPDATE`;
        for (const row of chargeSample(prev, span, nowMs, r.bytes))
          await tx`
            INSERT INTO cost_storage (month, user_id, tier, byte_ms, last_bytes, last_ms)
              VALUES (${row.month}, ${r.userId}, ${r.tier}, ${row.byte_ms}, ${row.last_bytes}, ${row.last_ms})
            ON CONFLICT (month, user_id, tier) DO UPDATE SET
              byte_ms = excluded.byte_ms, last_bytes = excluded.last_bytes, last_ms = excluded.last_ms`;
        await tx`
          INSERT INTO cost_history (hour_ms, user_id, tier, bytes) VALUES (${hourMs}, ${r.userId}, ${r.tier}, ${r.bytes})
          ON CONFLICT (user_id, hour_ms, tier) DO UPDATE SET bytes = excluded.bytes`;
      }
    });
  }

  async storage(month: string, userId: string, tier: Tier): Promise<StorageRow | undefined> {
    const [r] = await this.sql<StorageRow[]>`
      SELECT month, byte_ms, last_bytes, last_ms FROM cost_storage
      WHERE month = ${month} AND user_id = ${userId} AND tier = ${tier}`;
    return r;
  }

  async requests(
    month: string,
    backend: Tier,
  ): Promise<{ kind: RequestKind; requests: number; bytes: number }[]> {
    return this.sql<{ kind: RequestKind; requests: number; bytes: number }[]>`
      SELECT kind, requests, bytes FROM cost_requests WHERE month = ${month} AND backend = ${backend}`;
  }

  async egress(month: string, userId: string): Promise<number> {
    const [r] = await this.sql<{ n: number }[]>`
      SELECT COALESCE(SUM(bytes), 0)::bigint AS n FROM cost_egress
      WHERE month = ${month} ${userId === PROXY ? this.sql`` : this.sql`AND user_id = ${userId}`}`;
    return r?.n ?? 0;
  }

  async history(userId: string, sinceMs: number): Promise<{ hour_ms: number; tier: Tier; bytes: number }[]> {
    return this.sql<{ hour_ms: number; tier: Tier; bytes: number }[]>`
      SELECT hour_ms, tier, bytes FROM cost_history
      WHERE user_id = ${userId} AND hour_ms >= ${sinceMs} ORDER BY hour_ms, tier`;
  }

  async prune(beforeMs: number): Promise<void> {
    await this.sql`DELETE FROM cost_history WHERE hour_ms < ${beforeMs}`;
  }

  async readStorage(): Promise<StorageReading[]> {
    type Row = { user_id: string; tier: 'small' | 'large'; bytes: number };
    // One snapshot for every figure (REPEATABLE READ): the totals agree with each other.
    return this.sql.begin('ISOLATION LEVEL REPEATABLE READ READ ONLY', async (tx) => {
      const users = await tx<{ id: string }[]>`SELECT id FROM users`;
      const perUser = await tx<Row[]>`
        SELECT user_id, tier, COALESCE(SUM(size), 0)::bigint AS bytes FROM entries
        WHERE kind = 'file' AND tier IS NOT NULL GROUP BY user_id, tier`;
      const kept = await tx<Row[]>`
        SELECT user_id, tier, COALESCE(SUM(size), 0)::bigint AS bytes FROM versions GROUP BY user_id, tier`;
      const [keptSmall] = await tx<{ bytes: number }[]>`
        SELECT COALESCE(SUM(size), 0)::bigint AS bytes
        FROM (SELECT DISTINCT sha256, size FROM versions WHERE tier = 'small') v`;
      const [objects] = await tx<{ bytes: number }[]>`
        SELECT ((SELECT COALESCE(SUM(size), 0) FROM objects) + (SELECT COALESCE(SUM(size), 0) FROM packs))::bigint AS bytes`;
      const [dropped] = await tx<{ bytes: number }[]>`
        SELECT COALESCE(SUM(size), 0)::bigint AS bytes FROM entries
        WHERE kind = 'file' AND tier = 'small' AND sha256 IN (SELECT sha256 FROM fs_dropped)`;
      return storageReadings(
        users.map((u) => u.id),
        perUser,
        kept,
        keptSmall?.bytes ?? 0,
        objects?.bytes ?? 0,
        dropped?.bytes ?? 0,
      );
    }) as Promise<StorageReading[]>;
  }
}
