/**
 * The redundant tier's placement store runs on the shared migration helper, and its tables
 * are STRICT like every Weft table (issue #15). A store made by version 1 (tables without
 * STRICT) is upgraded with every row kept, the outage log's counter included. Real SQLite
 * files in a temporary folder.
 */
import { copyFileSync, mkdtempSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { MemoryProvider } from '../src/adapters/memory.ts';
import { openRedundantProvider } from '../src/redundant/index.ts';
import { SqlitePlacementStore } from '../src/redundant/store.ts';
import { migrate } from '../src/sqlite-migrations.ts';

const SQL_DIR = fileURLToPath(new URL('../src/redundant/sql/', import.meta.url));

function strictTables(db: Database.Database): Map<string, number> {
  const rows = db.prepare("SELECT name, strict FROM pragma_table_list WHERE schema = 'main'").all() as {
    name: string;
    strict: number;
  }[];
  return new Map(rows.filter((r) => !r.name.startsWith('sqlite_')).map((r) => [r.name, r.strict]));
}

describe('redundant placement store schema', () => {
  it('has every table STRICT on a new store', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'weft-placement-'));
    await SqlitePlacementStore.open(dir).close();
    const db = new Database(join(dir, 'placement.sqlite'));
    const tables = strictTables(db);
    expect([...tables.keys()].sort()).toEqual([
      'backend_state',
      'entries',
      'job_records',
      'locations',
      'objects',
      'outage_log',
    ]);
    for (const [name, strict] of tables) expect({ name, strict }).toEqual({ name, strict: 1 });
    db.close();
  });

  it('upgrades a version-1 store to STRICT tables with every row and the log counter kept', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'weft-placement-up-'));
    const v1 = join(dir, 'sql-v1');
    mkdirSync(v1);
    copyFileSync(join(SQL_DIR, '001_placement.sql'), join(v1, '001_placement.sql'));
    const file = join(dir, 'placement.sqlite');
    const db = new Database(file);
    db.pragma('foreign_keys = ON');
    migrate(db, v1, 'redundant placement store');
    expect(strictTables(db).get('objects')).toBe(0);
    db.exec(`
      INSERT INTO objects VALUES ('o1', 5, 'aa', 'striped', 2, 1, 3, x'0102', 1, 7);
      INSERT INTO entries VALUES ('', '', 'dir', 0, 1, 'r0', NULL);
      INSERT INTO entries VALUES ('a.bin', '', 'file', 5, 2, 'r1', 'o1');
      INSERT INTO locations VALUES ('o1', 0, 'b0', 'bb', 'ok');
      INSERT INTO locations VALUES ('o1', 1, 'b1', 'cc', 'owed');
      INSERT INTO outage_log (backend, op, object_id, slot, blob_key, at_ms) VALUES ('b1', 'put', 'o1', 1, 'k1', 8);
      INSERT INTO outage_log (backend, op, object_id, slot, blob_key, at_ms) VALUES ('b1', 'put', 'o1', 2, 'k2', 9);
      DELETE FROM outage_log WHERE seq = 2;
      INSERT INTO backend_state VALUES ('b1', 6);
    `);
    db.close();

    await SqlitePlacementStore.open(dir).close();
    const up = new Database(file);
    // Version 3 (job_records) follows on the same open.
    expect(up.pragma('user_version', { simple: true })).toBe(3);
    for (const [name, strict] of strictTables(up)) expect({ name, strict }).toEqual({ name, strict: 1 });
    expect(up.prepare('SELECT * FROM objects').all()).toEqual([
      {
        id: 'o1',
        size: 5,
        sha256: 'aa',
        layout: 'striped',
        k: 2,
        m: 1,
        shard_bytes: 3,
        shard_sha: Buffer.from([1, 2]),
        refs: 1,
        created_ms: 7,
      },
    ]);
    expect(up.prepare('SELECT path, object_id FROM entries ORDER BY path').all()).toEqual([
      { path: '', object_id: null },
      { path: 'a.bin', object_id: 'o1' },
    ]);
    expect(up.prepare('SELECT slot, backend, state FROM locations ORDER BY slot').all()).toEqual([
      { slot: 0, backend: 'b0', state: 'ok' },
      { slot: 1, backend: 'b1', state: 'owed' },
    ]);
    expect(up.prepare('SELECT seq, blob_key FROM outage_log').all()).toEqual([{ seq: 1, blob_key: 'k1' }]);
    expect(up.prepare('SELECT * FROM backend_state').all()).toEqual([{ backend: 'b1', down_since: 6 }]);
    // The deleted entry's number is not given out again; the references still hold.
    up.prepare(
      "INSERT INTO outage_log (backend, op, object_id, slot, blob_key, at_ms) VALUES ('b1', 'delete', 'o1', 0, 'k3', 10)",
    ).run();
    expect(up.prepare("SELECT seq FROM outage_log WHERE blob_key = 'k3'").get()).toEqual({ seq: 3 });
    expect(up.pragma('foreign_key_check')).toEqual([]);
    // STRICT refuses what the old tables took.
    expect(() => up.prepare("UPDATE objects SET size = 'five'").run()).toThrow(/cannot store TEXT/);
    // The indexes were made again.
    const indexes = up
      .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%'")
      .all();
    expect(indexes.map((r) => (r as { name: string }).name).sort()).toEqual([
      'entries_parent',
      'locations_backend',
      'outage_log_backend',
    ]);
    up.close();
  });

  it('takes a modification time with a fraction of a millisecond (as fs stat gives), kept to the millisecond', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'weft-placement-mtime-'));
    const tier = openRedundantProvider({
      dir,
      backends: [0, 1, 2].map((i) => ({ id: `b${i}`, provider: new MemoryProvider() })),
      probeIntervalMs: 0,
    });
    try {
      // STRICT INTEGER columns refuse a REAL with a fraction: the tier rounds it first.
      const written = await tier.write('d/a.txt', new TextEncoder().encode('x'), {
        modifiedMs: 1_700_000_000_123.6,
      });
      expect(written.modifiedMs).toBe(1_700_000_000_124);
      expect((await tier.stat('d/a.txt')).modifiedMs).toBe(1_700_000_000_124);
    } finally {
      await tier.close();
    }
  });
});
