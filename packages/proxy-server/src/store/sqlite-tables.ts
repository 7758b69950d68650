/**
 * The SQLite metadata store's connection and its large-object and transfer tables (sqlite.ts;
 * moved out of it to keep it short): SqliteMetadataStore extends SqliteTables.
 */
import Database from 'better-sqlite3';
import { privateDatabaseFile } from '../private-files.ts';
import type { ObjectRow, TransferRow } from './metadata.ts';

/** Open the metadata database (created private to the proxy's user) and set its pragmas. */
export function openMetadataDatabase(file: string, trace?: (sql: string) => void): Database.Database {
  privateDatabaseFile(file);
  const db = new Database(file, trace ? { verbose: (sql) => trace(String(sql)) } : {});
  db.pragma('journal_mode = WAL');
  // NORMAL in WAL mode survives a process crash; after a power loss the last commits may
  // be lost, which startup reconciliation repairs from the (fsynced) filesystem tier and
  // clients see as a feed reset or unacknowledged blocks to resend.
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  return db;
}

export class SqliteTables {
  protected readonly db: Database.Database;

  constructor(db: Database.Database) {
    this.db = db;
  }

  /** Prepared statements, compiled once: preparing costs more than running these small queries. */
  private readonly statements = new Map<string, Database.Statement>();

  protected stmt(sql: string): Database.Statement {
    let st = this.statements.get(sql);
    if (!st) {
      st = this.db.prepare(sql);
      this.statements.set(sql, st);
    }
    return st;
  }

  async getObject(sha256: string): Promise<ObjectRow | undefined> {
    const r = this.stmt('SELECT * FROM objects WHERE sha256 = ?').get(sha256) as
      { sha256: string; size: number; refcount: number; unreferenced_since_ms: number | null } | undefined;
    return r
      ? { sha256: r.sha256, size: r.size, refcount: r.refcount, unreferencedSinceMs: r.unreferenced_since_ms }
      : undefined;
  }

  async addObject(sha256: string, size: number, nowMs: number): Promise<void> {
    this.stmt(
      'INSERT OR IGNORE INTO objects (sha256, size, refcount, unreferenced_since_ms, created_ms) VALUES (?, ?, 0, ?, ?)',
    ).run(sha256, size, nowMs, nowMs);
  }

  async collectableObjects(cutoffMs: number): Promise<ObjectRow[]> {
    const rows = this.stmt(
      'SELECT * FROM objects WHERE refcount <= 0 AND unreferenced_since_ms IS NOT NULL AND unreferenced_since_ms < ?',
    ).all(cutoffMs) as {
      sha256: string;
      size: number;
      refcount: number;
      unreferenced_since_ms: number | null;
    }[];
    return rows.map((r) => ({
      sha256: r.sha256,
      size: r.size,
      refcount: r.refcount,
      unreferencedSinceMs: r.unreferenced_since_ms,
    }));
  }

  async deleteObject(sha256: string): Promise<boolean> {
    return this.db.transaction(() => {
      const gone = this.stmt('DELETE FROM objects WHERE sha256 = ? AND refcount <= 0').run(sha256);
      if (gone.changes > 0) this.stmt('DELETE FROM user_objects WHERE sha256 = ?').run(sha256);
      return gone.changes > 0;
    })();
  }

  async recomputeRefcounts(nowMs: number): Promise<void> {
    this.db.transaction(() => {
      // A referenced object must have a row, or the orphan sweep would collect it.
      this.stmt(
        `INSERT OR IGNORE INTO objects (sha256, size, refcount, unreferenced_since_ms, created_ms)
           SELECT sha256, size, 0, NULL, ? FROM entries WHERE tier = 'large' AND sha256 IS NOT NULL`,
      ).run(nowMs);
      // Kept versions hold references too (version-index.ts).
      this.stmt(
        `INSERT OR IGNORE INTO objects (sha256, size, refcount, unreferenced_since_ms, created_ms)
           SELECT sha256, size, 0, NULL, ? FROM versions WHERE tier = 'large'`,
      ).run(nowMs);
      this.db.exec(
        `UPDATE objects SET refcount = (SELECT COUNT(*) FROM entries e WHERE e.tier = 'large' AND e.sha256 = objects.sha256)
           + (SELECT COUNT(*) FROM versions v WHERE v.tier = 'large' AND v.sha256 = objects.sha256)`,
      );
      this.stmt(
        'UPDATE objects SET unreferenced_since_ms = COALESCE(unreferenced_since_ms, ?) WHERE refcount = 0',
      ).run(nowMs);
      this.db.exec('UPDATE objects SET unreferenced_since_ms = NULL WHERE refcount > 0');
    })();
  }

  async addTransfer(t: TransferRow): Promise<void> {
    this.stmt(
      'INSERT INTO transfers (id, user_id, path, size, sha256, mtime_ms, created_ms, active_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ).run(t.id, t.userId, t.path, t.size, t.sha256, t.mtimeMs, t.createdMs, t.createdMs);
  }

  async getTransfer(id: string): Promise<TransferRow | undefined> {
    const r = this.stmt('SELECT * FROM transfers WHERE id = ?').get(id) as
      | {
          id: string;
          user_id: string;
          path: string;
          size: number;
          sha256: string;
          mtime_ms: number;
          created_ms: number;
        }
      | undefined;
    return r
      ? {
          id: r.id,
          userId: r.user_id,
          path: r.path,
          size: r.size,
          sha256: r.sha256,
          mtimeMs: r.mtime_ms,
          createdMs: r.created_ms,
        }
      : undefined;
  }

  async addTransferRange(id: string, offset: number, length: number, nowMs: number): Promise<boolean> {
    return this.db.transaction(() => {
      if (!this.touch(id, nowMs)) return false;
      this.stmt('INSERT OR REPLACE INTO transfer_ranges (transfer_id, offset, length) VALUES (?, ?, ?)').run(
        id,
        offset,
        length,
      );
      return true;
    })();
  }

  private touch(id: string, nowMs: number): boolean {
    return (
      this.stmt('UPDATE transfers SET active_ms = MAX(active_ms, ?) WHERE id = ?').run(nowMs, id).changes > 0
    );
  }

  async touchTransfer(id: string, nowMs: number): Promise<boolean> {
    return this.touch(id, nowMs);
  }

  async transferRanges(id: string): Promise<{ offset: number; length: number }[]> {
    return this.stmt('SELECT offset, length FROM transfer_ranges WHERE transfer_id = ? ORDER BY offset').all(
      id,
    ) as {
      offset: number;
      length: number;
    }[];
  }

  async deleteTransfer(id: string): Promise<void> {
    this.db.transaction(() => {
      this.stmt('DELETE FROM transfer_ranges WHERE transfer_id = ?').run(id);
      this.stmt('DELETE FROM transfers WHERE id = ?').run(id);
    })();
  }

  async idleTransfers(cutoffMs: number): Promise<TransferRow[]> {
    const ids = this.stmt('SELECT id FROM transfers WHERE active_ms < ?').all(cutoffMs) as {
      id: string;
    }[];
    const out: TransferRow[] = [];
    for (const r of ids) {
      const t = await this.getTransfer(r.id);
      if (t) out.push(t);
    }
    return out;
  }

  async deleteIdleTransfer(id: string, cutoffMs: number): Promise<boolean> {
    return this.db.transaction(() => {
      if (this.stmt('DELETE FROM transfers WHERE id = ? AND active_ms < ?').run(id, cutoffMs).changes === 0)
        return false;
      this.stmt('DELETE FROM transfer_ranges WHERE transfer_id = ?').run(id);
      return true;
    })();
  }

  async openTransferBytes(userId: string, exceptPath: string): Promise<number> {
    const r = this.stmt(
      'SELECT COALESCE(SUM(size), 0) AS bytes FROM transfers WHERE user_id = ? AND path != ?',
    ).get(userId, exceptPath) as { bytes: number };
    return r.bytes;
  }
}
