/**
 * The index of kept versions (migration 007): every file version that stopped being current —
 * overwritten with other content, or deleted — stays listed here, restorable, until the
 * retention period has passed. Rows are per namespace and are only ever looked up with the
 * caller's own user id, so a user sees its own versions only.
 *
 * Content stays content-addressed: a large version holds one reference on its object
 * (`objects.refcount` counts version rows as well as entries, so the object GC keeps it); a
 * small version's bytes live on the filesystem tier under `versions/<aa>/<sha256>`, shared
 * by every row naming that hash (version-gc.ts sweeps them once no row does).
 */
import type Database from 'better-sqlite3';

/** One kept version as stored. */
export interface VersionRow {
  readonly id: number;
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
  readonly tier: 'small' | 'large';
  readonly mtimeMs: number;
  readonly writtenMs: number | null;
  readonly device: string | null;
  readonly deviceName: string | null;
  readonly replacedMs: number;
  readonly replacedBy: string | null;
  readonly replacedByName: string | null;
  readonly deleted: boolean;
}

/** The file row a version is taken from. */
export interface KeptFile {
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
  readonly tier: 'small' | 'large';
  readonly mtimeMs: number;
  readonly writtenMs: number | null;
  readonly device: string | null;
}

export interface VersionSql {
  id: number;
  path: string;
  size: number;
  sha256: string;
  tier: 'small' | 'large';
  mtime_ms: number;
  written_ms: number | null;
  device: string | null;
  device_name: string | null;
  replaced_ms: number;
  replaced_by: string | null;
  replaced_by_name: string | null;
  deleted: number | boolean;
}

function toRow(r: VersionSql): VersionRow {
  return {
    id: r.id,
    path: r.path,
    size: r.size,
    sha256: r.sha256,
    tier: r.tier,
    mtimeMs: r.mtime_ms,
    writtenMs: r.written_ms,
    device: r.device,
    deviceName: r.device_name,
    replacedMs: r.replaced_ms,
    replacedBy: r.replaced_by,
    replacedByName: r.replaced_by_name,
    deleted: Number(r.deleted) === 1,
  };
}

const SELECT = `SELECT v.*, d.name AS device_name, r.name AS replaced_by_name
  FROM versions v LEFT JOIN devices d ON d.id = v.device LEFT JOIN devices r ON r.id = v.replaced_by`;

/** The key of a small version's bytes on the filesystem tier. */
export function versionContentKey(sha256: string): string {
  return `versions/${sha256.slice(0, 2)}/${sha256}`;
}

/** Kept versions as the rest of the proxy uses them (SQLite: VersionIndex; PostgreSQL: postgres.ts). */
export interface VersionStore {
  /** Who wrote the current entry at `path` and when (null: not known). */
  written(userId: string, path: string): Promise<{ writtenMs: number | null; deviceName: string | null }>;
  /** The kept versions of `path`, newest first. */
  list(userId: string, path: string): Promise<VersionRow[]>;
  get(userId: string, path: string, id: number): Promise<VersionRow | undefined>;
  /**
   * Files deleted under `dir` ('' = everywhere) that nothing has replaced since: per path, its
   * latest version when that one records a delete and the path holds nothing now. Path order.
   */
  deleted(userId: string, dir: string, limit: number): Promise<VersionRow[]>;
  /** Bytes of the user's kept versions on each tier (what retention costs them). */
  bytes(userId: string): Promise<{ small: number; large: number }>;
  /** Whether any kept version names this small content (its bytes must stay). */
  holdsSmall(sha256: string): Promise<boolean>;
  /**
   * Forget versions replaced before `cutoffMs` (retention passed): their object references
   * are released, in one transaction. Returns how many were dropped.
   */
  purge(cutoffMs: number, nowMs: number): Promise<number>;
}

/** SQLite rows shared by both stores' SQL (the PostgreSQL store maps its rows the same way). */
export function versionRow(r: VersionSql): VersionRow {
  return toRow(r);
}

export class VersionIndex implements VersionStore {
  constructor(private readonly db: Database.Database) {}

  private refDelta(sha256: string, size: number, delta: number, nowMs: number): void {
    this.db
      .prepare(
        'INSERT OR IGNORE INTO objects (sha256, size, refcount, unreferenced_since_ms, created_ms) VALUES (?, ?, 0, ?, ?)',
      )
      .run(sha256, size, nowMs, nowMs);
    this.db
      .prepare(
        `UPDATE objects SET refcount = refcount + ?,
           unreferenced_since_ms = CASE WHEN refcount + ? <= 0 THEN ? ELSE NULL END
         WHERE sha256 = ?`,
      )
      .run(delta, delta, nowMs, sha256);
  }

  /**
   * Keep `f` as a version (inside the caller's transaction): it was replaced (or deleted, when
   * `deleted`) at `nowMs` by `device`. A large version takes a reference on its object.
   */
  keep(userId: string, f: KeptFile, deleted: boolean, device: string | undefined, nowMs: number): void {
    this.db
      .prepare(
        `INSERT INTO versions (user_id, path, size, sha256, tier, mtime_ms, written_ms, device, replaced_ms, replaced_by, deleted)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        userId,
        f.path,
        f.size,
        f.sha256,
        f.tier,
        f.mtimeMs,
        f.writtenMs,
        f.device,
        nowMs,
        device ?? null,
        deleted ? 1 : 0,
      );
    if (f.tier === 'large') this.refDelta(f.sha256, f.size, +1, nowMs);
  }

  /** Who wrote the current entry at `path` and when (null: not known). */
  async written(
    userId: string,
    path: string,
  ): Promise<{ writtenMs: number | null; deviceName: string | null }> {
    const r = this.db
      .prepare(
        'SELECT e.written_ms, d.name FROM entries e LEFT JOIN devices d ON d.id = e.device WHERE e.user_id = ? AND e.path = ?',
      )
      .get(userId, path) as { written_ms: number | null; name: string | null } | undefined;
    return { writtenMs: r?.written_ms ?? null, deviceName: r?.name ?? null };
  }

  /** The kept versions of `path`, newest first. */
  async list(userId: string, path: string): Promise<VersionRow[]> {
    return (
      this.db
        .prepare(`${SELECT} WHERE v.user_id = ? AND v.path = ? ORDER BY v.replaced_ms DESC, v.id DESC`)
        .all(userId, path) as VersionSql[]
    ).map(toRow);
  }

  async get(userId: string, path: string, id: number): Promise<VersionRow | undefined> {
    const r = this.db
      .prepare(`${SELECT} WHERE v.user_id = ? AND v.path = ? AND v.id = ?`)
      .get(userId, path, id) as VersionSql | undefined;
    return r ? toRow(r) : undefined;
  }

  /**
   * Files deleted under `dir` ('' = everywhere) that nothing has replaced since: per path, its
   * latest version when that one records a delete and the path holds nothing now. Path order.
   */
  async deleted(userId: string, dir: string, limit: number): Promise<VersionRow[]> {
    const [lo, hi] = dir === '' ? ['', '\u{10ffff}'] : [dir + '/', dir + '0'];
    const rows = this.db
      .prepare(
        `${SELECT} WHERE v.user_id = ? AND v.path >= ? AND v.path < ? AND v.deleted = 1
           AND v.id = (SELECT MAX(x.id) FROM versions x WHERE x.user_id = v.user_id AND x.path = v.path)
           AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.user_id = v.user_id AND e.path = v.path)
         ORDER BY v.path LIMIT ?`,
      )
      .all(userId, lo, hi, limit) as VersionSql[];
    return rows.map(toRow);
  }

  /** Bytes of the user's kept versions on each tier (what retention costs them). */
  async bytes(userId: string): Promise<{ small: number; large: number }> {
    const rows = this.db
      .prepare('SELECT tier, COALESCE(SUM(size), 0) AS bytes FROM versions WHERE user_id = ? GROUP BY tier')
      .all(userId) as { tier: 'small' | 'large'; bytes: number }[];
    return {
      small: rows.find((r) => r.tier === 'small')?.bytes ?? 0,
      large: rows.find((r) => r.tier === 'large')?.bytes ?? 0,
    };
  }

  /** Whether any kept version names this small content (its bytes must stay). */
  async holdsSmall(sha256: string): Promise<boolean> {
    return (
      this.db.prepare("SELECT 1 FROM versions WHERE sha256 = ? AND tier = 'small' LIMIT 1").get(sha256) !==
      undefined
    );
  }

  /**
   * Forget versions replaced before `cutoffMs` (retention passed): their object references
   * are released, in one transaction. Returns how many were dropped.
   */
  async purge(cutoffMs: number, nowMs: number): Promise<number> {
    return this.db.transaction(() => {
      const old = this.db
        .prepare('SELECT id, sha256, size, tier FROM versions WHERE replaced_ms < ?')
        .all(cutoffMs) as { id: number; sha256: string; size: number; tier: string }[];
      const del = this.db.prepare('DELETE FROM versions WHERE id = ?');
      for (const v of old) {
        del.run(v.id);
        if (v.tier === 'large') this.refDelta(v.sha256, v.size, -1, nowMs);
      }
      return old.length;
    })();
  }
}
