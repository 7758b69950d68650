/**
 * The packer's full listing on SQLite (store/pack-index-sqlite.ts `pending`, issue #16): in
 * steps of PENDING_STEP index rows with a turn of the event loop between them — one statement
 * over 1,000,000 packed files held the proxy ~6 CPU-seconds and its agents saw it stop
 * answering. Same files in the same order as the single statement, across steps that split
 * runs of one content hash; turns counted, never timed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { PENDING_STEP, SqlitePackIndex } from '../src/store/pack-index-sqlite.ts';
import { SqliteMetadataStore } from '../src/store/sqlite.ts';

describe('sqlite pack index: pending', () => {
  it('lists in steps that yield, the same files in the same order as one statement', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'weft-pending-'));
    const file = join(dir, 'metadata.sqlite');
    await new SqliteMetadataStore(file).close(); // the schema
    const db = new Database(file);
    try {
      const files = 2 * PENDING_STEP + 700;
      const hex = (i: number): string => i.toString(16).padStart(64, '0');
      const insert = db.prepare(
        `INSERT INTO entries (user_id, path, kind, size, mtime_ms, revision, sha256, tier, fs_revision)
         VALUES (?, ?, 'file', 10, 1, 'r', ?, 'small', 'f')`,
      );
      const pack = db.prepare(
        `INSERT INTO pack_entries (sha256, pack_id, offset, length, raw_length, compression) VALUES (?, 'p', 0, 10, 10, 0)`,
      );
      db.prepare(`INSERT INTO packs (pack_id, size, entry_count, created_ms) VALUES ('p', 0, 0, 0)`).run();
      db.transaction(() => {
        // Three paths (two users) a content, a third of the contents packed.
        for (let i = 0; i < files; i++) insert.run(i % 2 === 0 ? 'u' : 'v', `f${i}`, hex(Math.floor(i / 3)));
        for (let c = 0; c < files / 3; c += 3) pack.run(hex(c));
      })();
      const one = db
        .prepare(
          `SELECT user_id AS userId, path, sha256, size, fs_revision AS fsRevision, mtime_ms AS mtimeMs
             FROM entries e WHERE tier = 'small' AND sha256 IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = e.sha256) LIMIT ?`,
        )
        .all(1_000_000);
      const index = new SqlitePackIndex(db);
      let turns = 0;
      let counting = true;
      const tick = (): void => {
        turns += 1;
        if (counting) setImmediate(tick);
      };
      setImmediate(tick);
      const listed = await index.pending(1_000_000);
      counting = false;
      expect(listed).toEqual(one);
      expect(listed.length).toBeGreaterThan(PENDING_STEP);
      expect(index.examined).toBe(files);
      // A turn of the loop between steps (three steps here).
      expect(turns).toBeGreaterThanOrEqual(2);
      // A limit stops early, at the first files in the same order.
      expect(await index.pending(5)).toEqual(one.slice(0, 5));
      // The metrics' count reads the same steps, turns between them, and agrees with COUNT(*).
      turns = 0;
      counting = true;
      setImmediate(tick);
      const counted = await index.pendingCount();
      counting = false;
      expect(counted).toBe(one.length);
      expect(index.countSteps).toBe(Math.ceil(files / PENDING_STEP));
      expect(turns).toBeGreaterThanOrEqual(2);
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
