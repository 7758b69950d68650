/**
 * The packer's full listing on SQLite (store/pack-index-sqlite.ts `pending`, issue #16): in
 * steps of PENDING_STEP index rows with a turn of the event loop between them — one statement
 * over 1,000,000 packed files held the proxy ~6 CPU-seconds and its agents saw it stop
 * answering. Same files in the same order as the single statement, across steps that split
 * runs of one content hash; turns counted, never timed. The marking of dead pack entries
 * takes the same steps (its single statement held the loop ~0.7 CPU-seconds at 1,000,000);
 * the metrics' pending count is a row kept by triggers (pack-pending-count.test.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { PENDING_STEP, SqlitePackIndex } from '../src/store/pack-index-sqlite.ts';
import { SqliteMetadataStore } from '../src/store/sqlite.ts';

/** A proxy metadata database with its schema, closed and removed when the test ends. */
async function schemaDb(prefix: string): Promise<Database.Database> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const file = join(dir, 'metadata.sqlite');
  await new SqliteMetadataStore(file).close(); // the schema
  const db = new Database(file);
  onTestFinished(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return db;
}

/** `run`'s result and the turns the event loop took while it ran (counted, never timed). */
async function countTurns<T>(run: () => Promise<T>): Promise<{ value: T; turns: number }> {
  let turns = 0;
  let counting = true;
  const tick = (): void => {
    turns += 1;
    if (counting) setImmediate(tick);
  };
  setImmediate(tick);
  try {
    const value = await run();
    return { value, turns };
  } finally {
    counting = false;
  }
}

/** Content hash number `i`. */
const hex = (i: number): string => i.toString(16).padStart(64, '0');

describe('sqlite pack index: pending', () => {
  it('lists in steps that yield, the same files in the same order as one statement', async () => {
    const db = await schemaDb('weft-pending-');
    const files = 2 * PENDING_STEP + 700;
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
    const { value: listed, turns } = await countTurns(() => index.pending(1_000_000));
    expect(listed).toEqual(one);
    expect(listed.length).toBeGreaterThan(PENDING_STEP);
    expect(index.examined).toBe(files);
    // A turn of the loop between steps (three steps here).
    expect(turns).toBeGreaterThanOrEqual(2);
    // A limit stops early, at the first files in the same order.
    expect(await index.pending(5)).toEqual(one.slice(0, 5));
    // The metrics' count is a row kept by triggers (pack-pending-count.test.ts): the same.
    expect(await index.pendingCount()).toBe(one.length);
  });
});

describe('sqlite pack index: markDead', () => {
  it('dates and undates dead entries in steps that yield, with the sums one statement gives', async () => {
    const db = await schemaDb('weft-markdead-');
    const contents = 2 * PENDING_STEP + 300;
    const insert = db.prepare(
      `INSERT INTO entries (user_id, path, kind, size, mtime_ms, revision, sha256, tier, fs_revision)
         VALUES ('u', ?, 'file', 10, 1, 'r', ?, 'small', 'f')`,
    );
    const pack = db.prepare(
      `INSERT INTO pack_entries (sha256, pack_id, offset, length, raw_length, compression, dead_since_ms)
         VALUES (?, ?, 0, ?, 10, 0, ?)`,
    );
    for (const id of ['p0', 'p1'])
      db.prepare(`INSERT INTO packs (pack_id, size, entry_count, created_ms) VALUES (?, 0, 0, 0)`).run(id);
    db.transaction(() => {
      // Every content packed; a third referenced; a fifth already dated (some referenced again).
      for (let c = 0; c < contents; c++) {
        if (c % 3 === 0) insert.run(`f${c}`, hex(c));
        pack.run(hex(c), `p${c % 2}`, 10 + (c % 7), c % 5 === 0 ? 5 : null);
      }
    })();
    const index = new SqlitePackIndex(db);
    const { value: r, turns } = await countTurns(() => index.markDead(100));
    const dead = (c: number): boolean => c % 3 !== 0;
    let died = 0;
    let revived = 0;
    for (let c = 0; c < contents; c++) {
      if (dead(c) && c % 5 !== 0) died += 1;
      if (!dead(c) && c % 5 === 0) revived += 1;
    }
    expect(r).toEqual({ died, revived, entries: contents });
    expect(index.markSteps).toBe(Math.ceil(contents / PENDING_STEP));
    expect(turns).toBeGreaterThanOrEqual(2);
    const rows = db.prepare('SELECT sha256, dead_since_ms AS d FROM pack_entries ORDER BY sha256').all() as {
      sha256: string;
      d: number | null;
    }[];
    rows.forEach((row, c) => expect(row.d, `content ${c}`).toBe(dead(c) ? (c % 5 === 0 ? 5 : 100) : null));
    const sums = db
      .prepare(
        `SELECT pack_id AS id, dead_bytes AS bytes, dead_byte_since_ms AS since,
             (SELECT COALESCE(SUM(length), 0) FROM pack_entries p WHERE p.pack_id = packs.pack_id AND dead_since_ms IS NOT NULL) AS wantBytes,
             (SELECT TOTAL(CAST(length AS REAL) * dead_since_ms) FROM pack_entries p WHERE p.pack_id = packs.pack_id AND dead_since_ms IS NOT NULL) AS wantSince
           FROM packs ORDER BY pack_id`,
      )
      .all() as { id: string; bytes: number; since: number; wantBytes: number; wantSince: number }[];
    expect(sums).toHaveLength(2);
    for (const s of sums) expect([s.bytes, s.since]).toEqual([s.wantBytes, s.wantSince]);
    expect(sums.every((s) => s.bytes > 0)).toBe(true);
  });
});
