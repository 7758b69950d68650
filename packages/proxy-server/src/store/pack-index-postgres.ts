/**
 * The pack tables on PostgreSQL (pg-migrations/002; pack-index.ts), shared by every proxy
 * process on the database. What the SQLite store got from being one process holds here by
 * statements and row locks:
 *
 * - Claims are one INSERT ... ON CONFLICT DO UPDATE ... WHERE (the holder is us, or its claim
 *   expired) RETURNING: of two processes claiming the same content, exactly one gets it.
 *   Keys are claimed in sorted order, so two claims never wait on each other in a cycle.
 * - A pack and its entries are indexed in one transaction; an entry indexed by another
 *   process first keeps its place (ON CONFLICT DO NOTHING) unless the pack is a repack's.
 * - Dead entries are dated and revived by single UPDATE statements; the packs' sums are
 *   recomputed from the entries in the same transaction (a deadlock is retried).
 * - A repack rewrites only a pack its process claimed; the pack is forgotten (its row locked,
 *   its remaining entries and their fs_dropped rows deleted) in one transaction.
 */
import type { PackEntry } from '@weft/wire';
import { type DeadPackRow, type FsRevisionChange, type PackIndex, type PackRowStats } from './pack-index.ts';
import { type LocationSql, toLocation } from './pack-index-sqlite.ts';
import type { PackLocation, PendingContent } from './pack-types.ts';
import {
  foldPendingDeltas,
  keptPendingCount,
  type PendingReconcile,
  reconcilePostgresPending,
} from './pack-pending-reconcile.ts';
import { inTransaction, type Sql } from './postgres-db.ts';

interface PendingSql {
  user_id: string;
  path: string;
  sha256: string;
  size: number;
  fs_revision: string;
  mtime_ms: number;
}

function toPending(r: PendingSql): PendingContent {
  return {
    userId: r.user_id,
    path: r.path,
    sha256: r.sha256,
    size: r.size,
    fsRevision: r.fs_revision,
    mtimeMs: r.mtime_ms,
  };
}

export class PostgresPackIndex implements PackIndex {
  constructor(private readonly sql: Sql) {}

  async locate(sha256: string): Promise<PackLocation | undefined> {
    const [r] = await this.sql<LocationSql[]>`SELECT * FROM pack_entries WHERE sha256 = ${sha256}`;
    return r ? toLocation(r) : undefined;
  }

  async pending(limit: number): Promise<PendingContent[]> {
    const rows = await this.sql<PendingSql[]>`
      SELECT user_id, path, sha256, size, fs_revision, mtime_ms FROM entries e
      WHERE tier = 'small' AND sha256 IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = e.sha256)
      LIMIT ${limit}`;
    return rows.map(toPending);
  }

  async pendingAt(paths: readonly { userId: string; path: string }[]): Promise<PendingContent[]> {
    if (paths.length === 0) return [];
    const q = JSON.stringify(paths.map((p) => ({ user_id: p.userId, path: p.path })));
    const rows = await this.sql<PendingSql[]>`
      SELECT e.user_id, e.path, e.sha256, e.size, e.fs_revision, e.mtime_ms
      FROM jsonb_to_recordset(${q}::text::jsonb) AS q(user_id TEXT, path TEXT)
      JOIN entries e ON e.user_id = q.user_id AND e.path = q.path
      WHERE e.tier = 'small' AND e.sha256 IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = e.sha256)`;
    return rows.map(toPending);
  }

  /**
   * The count triggers keep (pg-migrations/011, 013: one delta row per statement, folded here
   * first) and the reconcile corrects (012): no count of the small files.
   */
  async pendingCount(): Promise<number> {
    await foldPendingDeltas(this.sql);
    return keptPendingCount(this.sql);
  }

  /** The kept count corrected by any drift concurrent commits left (pack-pending-reconcile.ts). */
  reconcilePending(): Promise<PendingReconcile> {
    return reconcilePostgresPending(this.sql);
  }

  async claim(keys: readonly string[], owner: string, nowMs: number, ttlMs: number): Promise<Set<string>> {
    const sorted = [...new Set(keys)].sort();
    if (sorted.length === 0) return new Set();
    const rows = await inTransaction(
      this.sql,
      (tx) => tx<{ key: string }[]>`
        INSERT INTO pack_claims (key, owner, expires_ms)
        SELECT k, ${owner}, ${nowMs + ttlMs} FROM jsonb_array_elements_text(${JSON.stringify(sorted)}::text::jsonb) AS k
        ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_ms = excluded.expires_ms
          WHERE pack_claims.owner = excluded.owner OR pack_claims.expires_ms <= ${nowMs}
        RETURNING key`,
    );
    return new Set(rows.map((r) => r.key));
  }

  async release(keys: readonly string[], owner: string): Promise<void> {
    if (keys.length === 0) return;
    await this.sql`
      DELETE FROM pack_claims WHERE owner = ${owner}
        AND key IN (SELECT jsonb_array_elements_text(${JSON.stringify([...keys])}::text::jsonb))`;
  }

  async addPack(
    packId: string,
    size: number,
    entries: readonly PackEntry[],
    move: boolean,
    nowMs: number,
  ): Promise<void> {
    const rows = JSON.stringify(
      entries.map((e) => ({
        sha256: e.sha256,
        offset: e.offset,
        length: e.length,
        raw_length: e.rawLength,
        compression: e.compression,
      })),
    );
    await inTransaction(this.sql, async (tx) => {
      await tx`
        INSERT INTO packs (pack_id, size, entry_count, created_ms)
          VALUES (${packId}, ${size}, ${entries.length}, ${nowMs})
        ON CONFLICT (pack_id) DO UPDATE SET size = excluded.size, entry_count = excluded.entry_count,
          created_ms = excluded.created_ms, dead_bytes = 0, dead_byte_since_ms = 0, gc_checked_ms = NULL`;
      const select = tx`
        SELECT x.sha256, ${packId}, x."offset", x.length, x.raw_length, x.compression
        FROM jsonb_to_recordset(${rows}::text::jsonb)
          AS x(sha256 TEXT, "offset" BIGINT, length BIGINT, raw_length BIGINT, compression SMALLINT)
        ORDER BY x.sha256`;
      if (move)
        await tx`
          INSERT INTO pack_entries (sha256, pack_id, "offset", length, raw_length, compression) ${select}
          ON CONFLICT (sha256) DO UPDATE SET pack_id = excluded.pack_id, "offset" = excluded."offset",
            length = excluded.length, raw_length = excluded.raw_length,
            compression = excluded.compression, dead_since_ms = NULL`;
      else
        await tx`
          INSERT INTO pack_entries (sha256, pack_id, "offset", length, raw_length, compression) ${select}
          ON CONFLICT (sha256) DO NOTHING`;
    });
  }

  async packIds(): Promise<Set<string>> {
    return new Set((await this.sql<{ pack_id: string }[]>`SELECT pack_id FROM packs`).map((r) => r.pack_id));
  }

  async clear(): Promise<void> {
    await inTransaction(this.sql, async (tx) => {
      await tx`DELETE FROM pack_entries`;
      await tx`DELETE FROM packs`;
    });
  }

  async markDropped(sha256s: readonly string[], nowMs: number): Promise<void> {
    if (sha256s.length === 0) return;
    const sorted = [...new Set(sha256s)].sort();
    await this.sql`
      INSERT INTO fs_dropped (sha256, dropped_ms)
      SELECT h, ${nowMs} FROM jsonb_array_elements_text(${JSON.stringify(sorted)}::text::jsonb) AS h
      ON CONFLICT (sha256) DO NOTHING`;
  }

  async droppedLocations(sha256s: readonly string[]): Promise<PackLocation[]> {
    if (sha256s.length === 0) return [];
    const rows = await this.sql<LocationSql[]>`
      SELECT p.* FROM pack_entries p JOIN fs_dropped d ON d.sha256 = p.sha256
      WHERE p.sha256 IN (SELECT jsonb_array_elements_text(${JSON.stringify([...new Set(sha256s)])}::text::jsonb))`;
    return rows.map(toLocation);
  }

  async stats(packId?: string): Promise<PackRowStats[]> {
    const live = this.sql`EXISTS (SELECT 1 FROM entries e WHERE e.tier = 'small' AND e.sha256 = p.sha256)`;
    return this.sql<PackRowStats[]>`
      SELECT k.pack_id AS "packId", k.size, k.entry_count AS entries, k.created_ms AS "createdMs",
        COALESCE(SUM(CASE WHEN ${live} THEN p.length END), 0)::bigint AS "liveBytes",
        COUNT(CASE WHEN ${live} THEN 1 END) AS "liveEntries"
      FROM packs k LEFT JOIN pack_entries p ON p.pack_id = k.pack_id
      ${packId ? this.sql`WHERE k.pack_id = ${packId}` : this.sql``}
      GROUP BY k.pack_id ORDER BY k.pack_id`;
  }

  async liveLocations(packId: string): Promise<PackLocation[]> {
    const rows = await this.sql<LocationSql[]>`
      SELECT p.* FROM pack_entries p WHERE p.pack_id = ${packId} AND EXISTS
        (SELECT 1 FROM entries e WHERE e.tier = 'small' AND e.sha256 = p.sha256) ORDER BY p."offset"`;
    return rows.map(toLocation);
  }

  async markDead(nowMs: number): Promise<{ died: number; revived: number; entries: number }> {
    return inTransaction(this.sql, async (tx) => {
      const referenced = tx`EXISTS (SELECT 1 FROM entries e WHERE e.tier = 'small' AND e.sha256 = p.sha256)`;
      const died = (
        await tx`UPDATE pack_entries p SET dead_since_ms = ${nowMs}
                 WHERE dead_since_ms IS NULL AND NOT ${referenced}`
      ).count;
      const revived = (
        await tx`UPDATE pack_entries p SET dead_since_ms = NULL
                 WHERE dead_since_ms IS NOT NULL AND ${referenced}`
      ).count;
      if (died + revived > 0)
        await tx`
          UPDATE packs k SET
            dead_bytes = (SELECT COALESCE(SUM(length), 0)::bigint FROM pack_entries p
                          WHERE p.pack_id = k.pack_id AND p.dead_since_ms IS NOT NULL),
            dead_byte_since_ms = (SELECT COALESCE(SUM(p.length::float8 * p.dead_since_ms), 0) FROM pack_entries p
                                  WHERE p.pack_id = k.pack_id AND p.dead_since_ms IS NOT NULL)`;
      const [count] = await tx<{ n: string }[]>`SELECT COUNT(*) AS n FROM pack_entries`;
      return { died, revived, entries: Number(count?.n ?? 0) };
    });
  }

  async deadPacks(): Promise<DeadPackRow[]> {
    return this.sql<DeadPackRow[]>`
      SELECT pack_id AS "packId", dead_bytes AS "deadBytes", dead_byte_since_ms AS "deadByteSinceMs"
      FROM packs WHERE dead_bytes > 0 ORDER BY pack_id`;
  }

  async gcChecked(packId: string, nowMs: number): Promise<void> {
    await this.sql`UPDATE packs SET gc_checked_ms = ${nowMs} WHERE pack_id = ${packId}`;
  }

  async removePack(packId: string): Promise<void> {
    await inTransaction(this.sql, async (tx) => {
      await tx`SELECT 1 FROM packs WHERE pack_id = ${packId} FOR UPDATE`;
      await tx`DELETE FROM fs_dropped WHERE sha256 IN (SELECT sha256 FROM pack_entries WHERE pack_id = ${packId})`;
      await tx`DELETE FROM pack_entries WHERE pack_id = ${packId}`;
      await tx`DELETE FROM packs WHERE pack_id = ${packId}`;
    });
  }

  async replaceFsRevisions(rows: readonly FsRevisionChange[]): Promise<void> {
    if (rows.length === 0) return;
    await this.sql`UPDATE entries e SET fs_revision = r.to_rev
      FROM unnest(${rows.map((r) => r.userId)}::text[], ${rows.map((r) => r.path)}::text[],
                  ${rows.map((r) => r.from)}::text[], ${rows.map((r) => r.to)}::text[])
           AS r(user_id, path, from_rev, to_rev)
      WHERE e.user_id = r.user_id AND e.path = r.path AND e.fs_revision = r.from_rev`;
  }
}
