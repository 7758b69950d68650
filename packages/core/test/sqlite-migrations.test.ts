// The shared migration runner (@weft/providers/sqlite-migrations) and the journal's use of
// it. Tested here because better-sqlite3 is a dependency of the packages that use the
// runner, not of @weft/providers (which types the database by the methods it calls).
import { copyFileSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { migrate, readMigrations } from '@weft/providers/sqlite-migrations';
import { Journal } from '../src/journal/journal.ts';

const JOURNAL_SQL = fileURLToPath(new URL('../src/journal/sql/', import.meta.url));

function dir(files: Record<string, string>): string {
  const d = mkdtempSync(join(tmpdir(), 'weft-migrations-'));
  for (const [name, sql] of Object.entries(files)) writeFileSync(join(d, name), sql);
  return d;
}

const version = (db: Database.Database): number => Number(db.pragma('user_version', { simple: true }));

describe('sqlite migrations', () => {
  it('applies each file once, in order, and names the version it produces', () => {
    const d = dir({
      '001_a.sql': 'CREATE TABLE a (x INTEGER NOT NULL) STRICT;',
      '002_b.sql': 'INSERT INTO a VALUES (1);',
    });
    const db = new Database(':memory:');
    expect(migrate(db, d, 'test')).toBe(2);
    expect(migrate(db, d, 'test')).toBe(2);
    expect(db.prepare('SELECT count(*) AS n FROM a').get()).toEqual({ n: 1 });
    writeFileSync(join(d, '003_c.sql'), 'INSERT INTO a VALUES (3);');
    expect(migrate(db, d, 'test')).toBe(3);
    expect(db.prepare('SELECT sum(x) AS s FROM a').get()).toEqual({ s: 4 });
  });

  it('refuses a gap, a repeated number and a name off the scheme', () => {
    expect(() => readMigrations(dir({ '001_a.sql': '', '003_c.sql': '' }))).toThrow(/expected migration 002/);
    expect(() => readMigrations(dir({ '001_a.sql': '', '001_b.sql': '' }))).toThrow(/expected migration 002/);
    expect(() => readMigrations(dir({ '001.sql': '' }))).toThrow(/named NNN_name\.sql/);
  });

  it('leaves the database as it was when a file fails', () => {
    const d = dir({
      '001_a.sql': 'CREATE TABLE a (x INTEGER) STRICT;',
      '002_bad.sql': "CREATE TABLE b (y TEXT) STRICT; INSERT INTO a VALUES ('not a number');",
    });
    const db = new Database(':memory:');
    expect(() => migrate(db, d, 'test')).toThrow(/cannot store TEXT/);
    expect(version(db)).toBe(1);
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'b'").all()).toEqual([]);
  });

  it('rebuilds a parent table under enforced foreign keys without cascading, and checks them after', () => {
    const d = dir({
      '001_a.sql': `CREATE TABLE p (id TEXT PRIMARY KEY);
        CREATE TABLE c (p TEXT NOT NULL REFERENCES p (id) ON DELETE CASCADE);`,
    });
    const db = new Database(':memory:');
    db.pragma('foreign_keys = ON');
    migrate(db, d, 'test');
    db.exec("INSERT INTO p VALUES ('x'); INSERT INTO c VALUES ('x');");
    writeFileSync(
      join(d, '002_rebuild.sql'),
      `CREATE TABLE p2 (id TEXT PRIMARY KEY) STRICT;
        INSERT INTO p2 SELECT id FROM p; DROP TABLE p; ALTER TABLE p2 RENAME TO p;`,
    );
    expect(migrate(db, d, 'test')).toBe(2);
    expect(db.prepare('SELECT count(*) AS n FROM c').get()).toEqual({ n: 1 });
    expect(Number(db.pragma('foreign_keys', { simple: true }))).toBe(1);
    // A file that leaves a dangling reference is refused.
    writeFileSync(join(d, '003_orphan.sql'), "DELETE FROM p WHERE id = 'x';");
    expect(() => migrate(db, d, 'test')).toThrow(/broken foreign key/);
    expect(version(db)).toBe(2);
    expect(Number(db.pragma('foreign_keys', { simple: true }))).toBe(1);
  });

  it('upgrades a journal made by the version-3 schema, rows kept, every table STRICT', () => {
    const old = mkdtempSync(join(tmpdir(), 'weft-journal-sql3-'));
    for (const f of readdirSync(JOURNAL_SQL).filter((n) => /^00[1-3]_/.test(n)))
      copyFileSync(join(JOURNAL_SQL, f), join(old, f));
    const file = join(mkdtempSync(join(tmpdir(), 'weft-journal-up-')), 'journal.db');
    const db = new Database(file);
    expect(migrate(db, old, 'journal')).toBe(3);
    db.exec(`INSERT INTO meta VALUES ('device', 'd1');
      INSERT INTO files (path, kind, size, hash) VALUES ('a.txt', 'file', 3, 'aa');
      INSERT INTO activity (at_ms, kind, path) VALUES (5, 'upload', 'a.txt');`);
    db.close();
    const j = new Journal(file);
    expect(j.getMeta('device')).toBe('d1');
    expect(j.getFile('a.txt')?.hash).toBe('aa');
    expect(j.fileCount()).toBe(1); // the count table starts from the rows already there (sql/006)
    const newest = readMigrations(JOURNAL_SQL).at(-1)?.version;
    expect(Number(j.db.pragma('user_version', { simple: true }))).toBe(newest);
    const tables = j.db
      .prepare(
        "SELECT name, strict FROM pragma_table_list WHERE schema = 'main' AND name NOT LIKE 'sqlite_%'",
      )
      .all() as { name: string; strict: bigint | number }[];
    expect(tables.length).toBeGreaterThanOrEqual(8);
    for (const t of tables)
      expect({ name: t.name, strict: Number(t.strict) }).toEqual({ name: t.name, strict: 1 });
    j.close();
  });
});
