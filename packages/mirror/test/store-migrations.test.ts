import { copyFileSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { migrate as runMigrations } from '@weft/providers/sqlite-migrations';
import { PeerCache } from '../src/interproxy/cache.ts';
import { migrate, openDatabase } from '../src/store.ts';

const SQL_DIR = fileURLToPath(new URL('../src/sql/', import.meta.url));

/** A database as the mirror before version 7 left it: the files up to 006 only. */
function version6(file: string): Database.Database {
  const old = mkdtempSync(join(tmpdir(), 'weft-mirror-sql6-'));
  for (const f of readdirSync(SQL_DIR).filter((n) => /^00[1-6]_/.test(n)))
    copyFileSync(join(SQL_DIR, f), join(old, f));
  const db = new Database(file);
  runMigrations(db, old, 'mirror database');
  return db;
}

function strictTables(db: Database.Database): Map<string, number> {
  const rows = db.prepare("SELECT name, strict FROM pragma_table_list WHERE schema = 'main'").all() as {
    name: string;
    strict: number;
  }[];
  return new Map(rows.filter((r) => !r.name.startsWith('sqlite_')).map((r) => [r.name, r.strict]));
}

describe('mirror schema', () => {
  it('has every table STRICT on a new database', () => {
    const db = new Database(':memory:');
    migrate(db);
    const tables = strictTables(db);
    expect(tables.size).toBeGreaterThanOrEqual(12);
    for (const [name, strict] of tables) expect({ name, strict }).toEqual({ name, strict: 1 });
  });

  it('upgrades a version-6 database to STRICT tables with every row kept', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'weft-mirror-up-')), 'mirror.db');
    const db = version6(file);
    expect(db.pragma('user_version', { simple: true })).toBe(6);
    expect(strictTables(db).get('log')).toBe(0);
    db.exec(`
      INSERT INTO replica_cursor VALUES ('s', 'r1', 'c-1');
      INSERT INTO known VALUES ('s', 'r1', 'a.txt', 'file', 'rev1', 'aa');
      INSERT INTO head VALUES ('s', 'a.txt', 'file', 'aa');
      INSERT INTO touched VALUES ('s', 'r1', 'a.txt', 3);
      INSERT INTO shares VALUES ('s', 'Team', 'alice', 10);
      INSERT INTO share_members VALUES ('s', 'alice', 'gdrive', 'acc1', '/Team', 'owner', 11);
      INSERT INTO share_invites VALUES ('tok', 's', 'alice', 99, NULL);
      INSERT INTO provider_accounts (account_id, owner, provider, key_id, iv, ciphertext, tag, label, connected_ms)
        VALUES ('acc1', 'alice', 'gdrive', 'k1', x'0102', x'0304', x'0506', 'Work', 12);
      INSERT INTO conflict_copies VALUES ('s', 'a (conflict).txt', 4);
      INSERT INTO replica_outage VALUES ('s', 'r1', 'full', 1, 2, 3, 'quota');
    `);
    const addLog = db.prepare(
      "INSERT INTO log (share_id, origin, op, data, created_ms) VALUES ('s', 'r1', 'put', ?, 20)",
    );
    for (let i = 0; i < 5; i++) addLog.run(Buffer.from([i]));
    db.exec('DELETE FROM log WHERE seq >= 4'); // pruned: the next seq must still be 6
    const before = (t: string): unknown[] => db.prepare(`SELECT * FROM ${t} ORDER BY 1, 2`).all();
    const names = [...strictTables(db).keys()];
    const snapshot = new Map(names.map((t) => [t, before(t)]));
    db.close();

    const upgraded = openDatabase(file);
    expect(upgraded.pragma('user_version', { simple: true })).toBe(7);
    const tables = strictTables(upgraded);
    expect([...tables.keys()].sort()).toEqual([...names].sort());
    for (const [name, strict] of tables) expect({ name, strict }).toEqual({ name, strict: 1 });
    for (const t of names) {
      expect(upgraded.prepare(`SELECT * FROM ${t} ORDER BY 1, 2`).all(), t).toEqual(snapshot.get(t));
    }
    const next = upgraded
      .prepare(
        "INSERT INTO log (share_id, origin, op, created_ms) VALUES ('s', 'r1', 'put', 21) RETURNING seq",
      )
      .get() as { seq: number };
    expect(next.seq).toBe(6);
    const indexes = upgraded
      .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
      .all();
    expect(indexes.map((r) => (r as { name: string }).name).sort()).toEqual([
      'conflict_copies_seq',
      'log_pending',
    ]);
    // STRICT now refuses what the old tables took, and the members still follow their share.
    expect(() => upgraded.exec("INSERT INTO touched VALUES ('s', 'r2', 'b', 'not a number')")).toThrow(
      /cannot store TEXT/,
    );
    upgraded.pragma('foreign_keys = ON');
    upgraded.exec("DELETE FROM shares WHERE id = 's'");
    expect(upgraded.prepare('SELECT count(*) AS n FROM share_members').get()).toEqual({ n: 0 });
    expect(upgraded.prepare('SELECT count(*) AS n FROM share_invites').get()).toEqual({ n: 0 });
    upgraded.close();
  });

  it('refuses a database newer than its files, unchanged', () => {
    const db = new Database(':memory:');
    migrate(db);
    db.pragma('user_version = 99');
    expect(() => migrate(db)).toThrow(/mirror database schema 99 is newer than this Weft understands \(7\)/);
    expect(db.pragma('user_version', { simple: true })).toBe(99);
  });

  it('opens a peer cache made before its schema had numbered files, rows kept', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'weft-peer-cache-'));
    const db = new Database(join(dir, 'cache.sqlite'));
    db.exec(`CREATE TABLE cached (path TEXT PRIMARY KEY, sha256 TEXT NOT NULL, size INTEGER NOT NULL) STRICT;
      CREATE INDEX cached_sha ON cached(sha256);
      CREATE TABLE block_history (path TEXT PRIMARY KEY, probs TEXT NOT NULL, n INTEGER NOT NULL) STRICT;
      INSERT INTO cached VALUES ('a.bin', 'aa', 7);`);
    db.close();
    const cache = await PeerCache.open(dir);
    expect(cache.get('a.bin')).toEqual({ sha256: 'aa', size: 7 });
    cache.close();
    const after = new Database(join(dir, 'cache.sqlite'), { readonly: true });
    expect(after.pragma('user_version', { simple: true })).toBe(1);
    after.close();
  });
});
