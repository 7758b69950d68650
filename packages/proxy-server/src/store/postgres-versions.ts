/**
 * Kept versions on PostgreSQL (the `versions` table of src/pg-migrations/; what each call
 * means: version-index.ts). Versions are added inside applyChanges' transaction
 * (postgres.ts); purge releases object references in the transaction that deletes the rows.
 */
import { adjustRef, type Sql } from './postgres-db.ts';
import { type VersionRow, type VersionSql, type VersionStore, versionRow } from './version-index.ts';

export class PostgresVersions implements VersionStore {
  constructor(private readonly sql: Sql) {}

  private select(): ReturnType<Sql> {
    return this.sql`SELECT v.*, d.name AS device_name, r.name AS replaced_by_name
      FROM versions v LEFT JOIN devices d ON d.id = v.device LEFT JOIN devices r ON r.id = v.replaced_by`;
  }

  async written(
    userId: string,
    path: string,
  ): Promise<{ writtenMs: number | null; deviceName: string | null }> {
    const [r] = await this.sql<{ written_ms: number | null; name: string | null }[]>`
      SELECT e.written_ms, d.name FROM entries e LEFT JOIN devices d ON d.id = e.device
       WHERE e.user_id = ${userId} AND e.path = ${path}`;
    return { writtenMs: r?.written_ms ?? null, deviceName: r?.name ?? null };
  }

  async list(userId: string, path: string): Promise<VersionRow[]> {
    const rows = await this.sql<VersionSql[]>`${this.select()}
      WHERE v.user_id = ${userId} AND v.path = ${path} ORDER BY v.replaced_ms DESC, v.id DESC`;
    return rows.map(versionRow);
  }

  async get(userId: string, path: string, id: number): Promise<VersionRow | undefined> {
    const [r] = await this.sql<VersionSql[]>`${this.select()}
      WHERE v.user_id = ${userId} AND v.path = ${path} AND v.id = ${id}`;
    return r ? versionRow(r) : undefined;
  }

  async deleted(userId: string, dir: string, limit: number): Promise<VersionRow[]> {
    const [lo, hi] = dir === '' ? ['', '\u{10ffff}'] : [dir + '/', dir + '0'];
    const rows = await this.sql<VersionSql[]>`${this.select()}
      WHERE v.user_id = ${userId} AND v.path >= ${lo} AND v.path < ${hi} AND v.deleted
        AND v.id = (SELECT MAX(x.id) FROM versions x WHERE x.user_id = v.user_id AND x.path = v.path)
        AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.user_id = v.user_id AND e.path = v.path)
      ORDER BY v.path LIMIT ${limit}`;
    return rows.map(versionRow);
  }

  async bytes(userId: string): Promise<{ small: number; large: number }> {
    const rows = await this.sql<{ tier: 'small' | 'large'; bytes: number }[]>`
      SELECT tier, COALESCE(SUM(size), 0)::bigint AS bytes FROM versions WHERE user_id = ${userId} GROUP BY tier`;
    return {
      small: rows.find((r) => r.tier === 'small')?.bytes ?? 0,
      large: rows.find((r) => r.tier === 'large')?.bytes ?? 0,
    };
  }

  async holdsSmall(sha256: string): Promise<boolean> {
    const rows = await this.sql`SELECT 1 FROM versions WHERE sha256 = ${sha256} AND tier = 'small' LIMIT 1`;
    return rows.length > 0;
  }

  async purge(cutoffMs: number, nowMs: number): Promise<number> {
    return this.sql.begin(async (tx) => {
      const old = await tx<{ sha256: string; size: number; tier: string }[]>`
        DELETE FROM versions WHERE replaced_ms < ${cutoffMs} RETURNING sha256, size, tier`;
      for (const v of old) if (v.tier === 'large') await adjustRef(tx, v.sha256, v.size, -1, nowMs);
      return old.length;
    }) as Promise<number>;
  }
}
