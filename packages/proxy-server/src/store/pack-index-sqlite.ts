/**
 * The pack tables on SQLite (migrations 004 and 006; pack-index.ts): the embedded store, one
 * process. Claims are kept in memory (LocalClaims), with the rules of the shared store.
 */
import type Database from 'better-sqlite3';
import type { PackEntry } from '@weft/wire';
import {
  type DeadPackRow,
  type FsRevisionChange,
  LocalClaims,
  type PackIndex,
  type PackRowStats,
} from './pack-index.ts';
import type { PackLocation, PendingContent } from './pack-types.ts';

export interface LocationSql {
  sha256: string;
  pack_id: string;
  offset: number;
  length: number;
  raw_length: number;
  compression: number;
}

export function toLocation(r: LocationSql): PackLocation {
  return {
    sha256: r.sha256,
    packId: r.pack_id,
    offset: r.offset,
    length: r.length,
    rawLength: r.raw_length,
    compression: r.compression === 1 ? 1 : 0,
  };
}

const PENDING = `SELECT user_id AS userId, path, sha256, size, fs_revision AS fsRevision, mtime_ms AS mtimeMs
  FROM entries e
  WHERE tier = 'small' AND sha256 IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = e.sha256)`;

/**
 * Small files looked at per step of a full listing (`pending`): only the index (content hash,
 * namespace, path) and whether the content is packed; the whole row of an unpacked one. A
 * turn of the event loop between steps: at 1,000,000 packed files one statement over them all
 * held the proxy for ~6 CPU-seconds — it stopped answering its agents (issue #16).
 */
export const PENDING_STEP = 2_000;
/** Packs whose dead-byte sums markDead recomputes between two turns of the loop. */
const SUM_STEP = 50;

export class SqlitePackIndex implements PackIndex {
  /** Index rows examined by `pending` (tests). */
  examined = 0;
  /** Steps `markDead` took (tests). */
  markSteps = 0;

  private readonly claims = new LocalClaims();

  constructor(private readonly db: Database.Database) {}

  async locate(sha256: string): Promise<PackLocation | undefined> {
    const r = this.db.prepare('SELECT * FROM pack_entries WHERE sha256 = ?').get(sha256) as
      LocationSql | undefined;
    return r ? toLocation(r) : undefined;
  }

  async pending(limit: number): Promise<PendingContent[]> {
    // In content-hash order (entries_small_sha256, which holds the key (user_id, path) too),
    // a step at a time from where the last one ended.
    const step = this.db.prepare(
      `SELECT sha256, user_id, path, EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = e.sha256)
         FROM entries e INDEXED BY entries_small_sha256
        WHERE tier = 'small' AND sha256 IS NOT NULL AND (sha256, user_id, path) > (?, ?, ?)
        ORDER BY sha256, user_id, path LIMIT ?`,
    );
    step.raw(true);
    const whole = this.db.prepare(`${PENDING} AND user_id = ? AND path = ?`);
    const out: PendingContent[] = [];
    let after: [string, string, string] = ['', '', ''];
    for (;;) {
      const rows = step.all(...after, PENDING_STEP) as [string, string, string, number][];
      this.examined += rows.length;
      for (const [, userId, path, packed] of rows) {
        if (packed) continue;
        const row = whole.get(userId, path) as PendingContent | undefined;
        if (row) out.push(row);
        if (out.length >= limit) return out;
      }
      const last = rows.at(-1);
      if (last === undefined || rows.length < PENDING_STEP) return out;
      after = [last[0], last[1], last[2]];
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  async pendingAt(paths: readonly { userId: string; path: string }[]): Promise<PendingContent[]> {
    const one = this.db.prepare(`${PENDING} AND user_id = ? AND path = ?`);
    const out: PendingContent[] = [];
    for (const q of paths) {
      const row = one.get(q.userId, q.path) as PendingContent | undefined;
      if (row) out.push(row);
    }
    return out;
  }

  /**
   * One row kept by triggers (migration 010) with every change of a small entry or of the
   * global index: the metrics scrape asks this, and counting 1,000,000 small files held the
   * proxy's loop ~0.7 CPU-seconds a scrape (issue #16).
   */
  async pendingCount(): Promise<number> {
    const r = this.db.prepare('SELECT n FROM pack_pending WHERE id = 1').get() as { n: number } | undefined;
    return r?.n ?? 0;
  }

  async claim(keys: readonly string[], owner: string, nowMs: number, ttlMs: number): Promise<Set<string>> {
    return this.claims.claim(keys, owner, nowMs, ttlMs);
  }

  async release(keys: readonly string[], owner: string): Promise<void> {
    this.claims.release(keys, owner);
  }

  async addPack(
    packId: string,
    size: number,
    entries: readonly PackEntry[],
    move: boolean,
    nowMs: number,
  ): Promise<void> {
    const db = this.db;
    const insert = db.prepare(
      `INSERT INTO pack_entries (sha256, pack_id, offset, length, raw_length, compression)
       VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (sha256) DO ${move ? 'UPDATE SET pack_id = excluded.pack_id, offset = excluded.offset, length = excluded.length, raw_length = excluded.raw_length, compression = excluded.compression, dead_since_ms = NULL' : 'NOTHING'}`,
    );
    db.transaction(() => {
      db.prepare(
        'INSERT OR REPLACE INTO packs (pack_id, size, entry_count, created_ms) VALUES (?, ?, ?, ?)',
      ).run(packId, size, entries.length, nowMs);
      for (const e of entries) insert.run(e.sha256, packId, e.offset, e.length, e.rawLength, e.compression);
    })();
  }

  async packIds(): Promise<Set<string>> {
    return new Set(
      (this.db.prepare('SELECT pack_id FROM packs').all() as { pack_id: string }[]).map((r) => r.pack_id),
    );
  }

  async clear(): Promise<void> {
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM pack_entries').run();
      this.db.prepare('DELETE FROM packs').run();
    })();
  }

  async markDropped(sha256s: readonly string[], nowMs: number): Promise<void> {
    const mark = this.db.prepare('INSERT OR IGNORE INTO fs_dropped (sha256, dropped_ms) VALUES (?, ?)');
    this.db.transaction(() => {
      for (const h of sha256s) mark.run(h, nowMs);
    })();
  }

  async droppedLocations(sha256s: readonly string[]): Promise<PackLocation[]> {
    const q = this.db.prepare(
      'SELECT p.* FROM pack_entries p JOIN fs_dropped d ON d.sha256 = p.sha256 WHERE p.sha256 = ?',
    );
    const out: PackLocation[] = [];
    for (const h of new Set(sha256s)) {
      const r = q.get(h) as LocationSql | undefined;
      if (r) out.push(toLocation(r));
    }
    return out;
  }

  async stats(packId?: string): Promise<PackRowStats[]> {
    return this.db
      .prepare(
        `SELECT k.pack_id AS packId, k.size, k.entry_count AS entries, k.created_ms AS createdMs,
           COALESCE(SUM(CASE WHEN EXISTS (SELECT 1 FROM entries e WHERE e.tier = 'small' AND e.sha256 = p.sha256)
             THEN p.length END), 0) AS liveBytes,
           COALESCE(SUM(CASE WHEN EXISTS (SELECT 1 FROM entries e WHERE e.tier = 'small' AND e.sha256 = p.sha256)
             THEN 1 END), 0) AS liveEntries
         FROM packs k LEFT JOIN pack_entries p ON p.pack_id = k.pack_id
         ${packId ? 'WHERE k.pack_id = ?' : ''}
         GROUP BY k.pack_id ORDER BY k.pack_id`,
      )
      .all(...(packId ? [packId] : [])) as PackRowStats[];
  }

  async liveLocations(packId: string): Promise<PackLocation[]> {
    return (
      this.db
        .prepare(
          `SELECT p.* FROM pack_entries p WHERE p.pack_id = ? AND EXISTS
             (SELECT 1 FROM entries e WHERE e.tier = 'small' AND e.sha256 = p.sha256) ORDER BY p.offset`,
        )
        .all(packId) as LocationSql[]
    ).map(toLocation);
  }

  /**
   * Date the entries no file refers to any more, undate those referred to again, and sum
   * each touched pack's dead bytes — in steps of PENDING_STEP pack entries (a keyset on the
   * content hash, each step its own transaction) with a turn of the loop between steps: one
   * statement over 1,000,000 entries held the proxy's loop ~0.7 CPU-seconds (issue #16). The
   * marks only steer the cost model: a repack keeps whatever is referenced when it runs
   * (liveLocations), so a file linked between two steps loses nothing.
   */
  async markDead(nowMs: number): Promise<{ died: number; revived: number; entries: number }> {
    const db = this.db;
    const referenced = `EXISTS (SELECT 1 FROM entries e WHERE e.tier = 'small' AND e.sha256 = pack_entries.sha256)`;
    const end = db.prepare(
      'SELECT sha256 FROM pack_entries WHERE sha256 > ? ORDER BY sha256 LIMIT 1 OFFSET ?',
    );
    end.pluck(true);
    const range = (upper: boolean): string => `sha256 > ?${upper ? ' AND sha256 <= ?' : ''}`;
    const die = (upper: boolean): Database.Statement =>
      db.prepare(
        `UPDATE pack_entries SET dead_since_ms = ? WHERE ${range(upper)} AND dead_since_ms IS NULL AND NOT ${referenced}`,
      );
    const revive = (upper: boolean): Database.Statement =>
      db.prepare(
        `UPDATE pack_entries SET dead_since_ms = NULL WHERE ${range(upper)} AND dead_since_ms IS NOT NULL AND ${referenced}`,
      );
    const [dieStep, dieRest, reviveStep, reviveRest] = [die(true), die(false), revive(true), revive(false)];
    const count = db.prepare('SELECT COUNT(*) FROM pack_entries WHERE sha256 > ?');
    count.pluck(true);
    let died = 0;
    let revived = 0;
    let entries = 0;
    let after = '';
    for (;;) {
      this.markSteps += 1;
      const last = end.get(after, PENDING_STEP - 1) as string | undefined;
      db.transaction(() => {
        if (last === undefined) {
          died += dieRest.run(nowMs, after).changes;
          revived += reviveRest.run(after).changes;
        } else {
          died += dieStep.run(nowMs, after, last).changes;
          revived += reviveStep.run(after, last).changes;
        }
      })();
      if (last === undefined) {
        entries += Number(count.get(after));
        break;
      }
      entries += PENDING_STEP;
      after = last;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    if (died + revived === 0) return { died, revived, entries };
    // Every pack's sums from its dead entries (TOTAL: Σ s·t exceeds 2^63; the partial index
    // pack_entries_dead holds just those), a step of packs at a time.
    const sums = db.prepare(
      `UPDATE packs SET
         dead_bytes = (SELECT COALESCE(SUM(length), 0) FROM pack_entries p
                       WHERE p.pack_id = packs.pack_id AND p.dead_since_ms IS NOT NULL),
         dead_byte_since_ms = (SELECT TOTAL(CAST(length AS REAL) * dead_since_ms) FROM pack_entries p
                               WHERE p.pack_id = packs.pack_id AND p.dead_since_ms IS NOT NULL)
       WHERE pack_id = ?`,
    );
    const ids = db.prepare('SELECT pack_id FROM packs ORDER BY pack_id').pluck(true).all() as string[];
    for (let k = 0; k < ids.length; k += SUM_STEP) {
      db.transaction(() => {
        for (const id of ids.slice(k, k + SUM_STEP)) sums.run(id);
      })();
      if (k + SUM_STEP < ids.length) await new Promise<void>((resolve) => setImmediate(resolve));
    }
    return { died, revived, entries };
  }

  async deadPacks(): Promise<DeadPackRow[]> {
    return this.db
      .prepare(
        `SELECT pack_id AS packId, dead_bytes AS deadBytes, dead_byte_since_ms AS deadByteSinceMs
         FROM packs WHERE dead_bytes > 0 ORDER BY pack_id`,
      )
      .all() as DeadPackRow[];
  }

  async gcChecked(packId: string, nowMs: number): Promise<void> {
    this.db.prepare('UPDATE packs SET gc_checked_ms = ? WHERE pack_id = ?').run(nowMs, packId);
  }

  async removePack(packId: string): Promise<void> {
    const db = this.db;
    db.transaction(() => {
      // Contents dropped from the index leave the fs_dropped set: their reads go to the fs tier.
      db.prepare(
        `DELETE FROM fs_dropped WHERE sha256 IN (SELECT sha256 FROM pack_entries WHERE pack_id = ?)`,
      ).run(packId);
      db.prepare('DELETE FROM pack_entries WHERE pack_id = ?').run(packId);
      db.prepare('DELETE FROM packs WHERE pack_id = ?').run(packId);
    })();
  }

  async replaceFsRevisions(rows: readonly FsRevisionChange[]): Promise<void> {
    if (rows.length === 0) return;
    const one = this.db.prepare(
      'UPDATE entries SET fs_revision = ? WHERE user_id = ? AND path = ? AND fs_revision = ?',
    );
    this.db.transaction(() => {
      for (const r of rows) one.run(r.to, r.userId, r.path, r.from);
    })();
  }
}
