/**
 * The metrics' pending count (weft_pack_pending_files, issue #16) is a counter kept by
 * triggers (SQLite migration 010, PostgreSQL pg-migrations/011) instead of a count of every
 * small file at each scrape. The test starts from a database at the version before, with
 * files in it (the migration counts them), then drives every transition a small file's
 * content goes through — written, overwritten (same / other content, other tier), moved,
 * deleted, packed, packed again elsewhere (a repack's move), its pack removed (GC), the whole
 * index cleared (rebuild from footers), a statement that fails half-way — and after each
 * checks the counter against a recount. The triggers run in the statement that changes the
 * rows, so there is no step between the two to crash in; the failed statement stands in for
 * that. Both databases are real (PostgreSQL from src/testing/postgres.ts; skipped with the
 * reason only where the machine has none).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import Database from 'better-sqlite3';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { migrate } from '@weft/providers/sqlite-migrations';
import type { PackEntry } from '@weft/wire';
import type { PackIndex } from '../src/store/pack-index.ts';
import { PostgresPackIndex } from '../src/store/pack-index-postgres.ts';
import { SqlitePackIndex } from '../src/store/pack-index-sqlite.ts';
import { migratePostgres, PG_MIGRATIONS_DIR } from '../src/store/postgres-db.ts';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { adminSql } from './pg-admin.ts';

const SQLITE_MIGRATIONS = nodePath.resolve(import.meta.dirname, '../src/migrations');
const RECOUNT = `SELECT COUNT(*) AS n FROM entries e WHERE tier = 'small' AND sha256 IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM pack_entries p WHERE p.sha256 = e.sha256)`;

/** A copy of a migrations folder with only the files before version `upTo`. */
function migrationsBefore(dir: string, upTo: number): string {
  const out = fs.mkdtempSync(nodePath.join(os.tmpdir(), 'weft-migrations-'));
  onTestFinished(() => fs.rmSync(out, { recursive: true, force: true }));
  for (const f of fs.readdirSync(dir))
    if (f.endsWith('.sql') && Number(f.slice(0, 3)) < upTo)
      fs.copyFileSync(nodePath.join(dir, f), nodePath.join(out, f));
  return out;
}

/** What the scenario needs of one database. */
interface Db {
  /** Write an entry as the metadata store does (replacing one at the same path). */
  put(user: string, path: string, sha256: string | null, tier: string | null): Promise<void>;
  /** A plain INSERT (a move's new row): fails if the path is taken. */
  insert(user: string, path: string, sha256: string, tier: string): Promise<void>;
  /** DELETE FROM entries WHERE … */
  remove(where: string): Promise<void>;
  /** UPDATE entries SET … */
  update(set: string, where: string): Promise<void>;
  recount(): Promise<number>;
  /** Bring the schema to the newest version (the counter's migration). */
  migrateAll(): Promise<void>;
  index(): PackIndex;
}

const hex = (i: number): string => i.toString(16).padStart(64, '0');
const entry = (i: number, offset = 0): PackEntry => ({
  sha256: hex(i),
  offset,
  length: 10,
  rawLength: 10,
  compression: 0,
});

async function scenario(db: Db): Promise<void> {
  // Before the migration: 30 small files (3 a content), contents 0..4 packed, a large file,
  // a folder and a small file not yet hashed.
  for (let i = 0; i < 30; i++) await db.put(i % 2 ? 'u' : 'v', `f${i}`, hex(Math.floor(i / 3)), 'small');
  await db.put('u', 'big', hex(500), 'large');
  await db.put('u', 'dir', null, null);
  await db.put('u', 'nohash', null, 'small');
  const idx0 = await (async () => {
    await db.migrateAll();
    return db.index();
  })();
  await idx0.addPack(
    'p0',
    100,
    [0, 1, 2, 3, 4].map((c) => entry(c, c * 10)),
    false,
    1,
  );
  const index = db.index();
  const check = async (what: string): Promise<void> => {
    expect(await index.pendingCount(), what).toBe(await db.recount());
  };
  await check('after the migration and a first pack');
  expect(await index.pendingCount()).toBe(15);

  await db.put('u', 'new1', hex(20), 'small');
  await check('a new pending file');
  await db.put('u', 'new2', hex(1), 'small');
  await check('a new file whose content is packed');
  await db.put('u', 'f1', hex(21), 'small');
  await check('packed → pending by an overwrite');
  await db.put('v', 'f20', hex(2), 'small');
  await check('pending → packed by an overwrite');
  await db.put('v', 'f22', hex(7), 'small');
  await check('pending → pending (other content) by an overwrite');
  await db.put('u', 'f21', hex(7), 'large');
  await check('small → large');
  await db.update(`tier = 'small'`, `user_id = 'u' AND path = 'big'`);
  await check('large → small by an update');
  await db.update(`sha256 = '${hex(3)}'`, `path IN ('f23', 'f24', 'f25')`);
  await check('content changed by an update');
  await db.remove(`path = 'f26'`);
  await check('a pending file deleted');
  await db.remove(`path = 'f0'`);
  await check('a packed file deleted');
  await db.remove(`user_id = 'v'`);
  await check('a namespace deleted');
  await expect(db.insert('u', 'f3', hex(30), 'small')).rejects.toThrow();
  await check('an INSERT that failed (its trigger rolled back with it)');
  await db.insert('u', 'moved', hex(31), 'small');
  await check('a moved file');

  await index.addPack(
    'p1',
    100,
    [5, 6, 7, 20, 31].map((c) => entry(c)),
    false,
    2,
  );
  await check('contents packed');
  await index.addPack(
    'p2',
    100,
    [0, 1, 5, 21].map((c) => entry(c)),
    false,
    3,
  );
  await check('contents packed, some already in a pack (kept there)');
  await index.addPack(
    'p3',
    100,
    [0, 1, 2, 500].map((c) => entry(c)),
    true,
    4,
  );
  await check('a repack moves contents');
  await index.markDead(5);
  await check('dead entries marked');
  await index.removePack('p0');
  await check('a pack removed (its remaining entries with it)');
  await index.clear();
  await check('the index cleared (rebuild from the footers next)');
  const pendingAll = await index.pendingCount();
  expect(pendingAll).toBeGreaterThan(0);
  await index.addPack(
    'p4',
    100,
    Array.from({ length: 600 }, (_, c) => entry(c)),
    true,
    6,
  );
  await check('the rebuild');
  expect(await index.pendingCount()).toBe(0);
}

describe('pack pending count kept by triggers', () => {
  it('sqlite: the counter equals a recount through every transition', async () => {
    const dir = fs.mkdtempSync(nodePath.join(os.tmpdir(), 'weft-pending-count-'));
    const sqlite = new Database(nodePath.join(dir, 'metadata.sqlite'));
    onTestFinished(() => {
      sqlite.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });
    migrate(sqlite, migrationsBefore(SQLITE_MIGRATIONS, 10), 'proxy metadata');
    const cols = `(user_id, path, kind, size, mtime_ms, revision, sha256, tier, fs_revision)`;
    await scenario({
      put: async (u, p, h, t) => {
        sqlite
          .prepare(`INSERT OR REPLACE INTO entries ${cols} VALUES (?, ?, ?, 1, 1, 'r', ?, ?, 'f')`)
          .run(u, p, h === null && t === null ? 'dir' : 'file', h, t);
      },
      insert: async (u, p, h, t) => {
        sqlite
          .prepare(`INSERT INTO entries ${cols} VALUES (?, ?, 'file', 1, 1, 'r', ?, ?, 'f')`)
          .run(u, p, h, t);
      },
      remove: async (where) => void sqlite.prepare(`DELETE FROM entries WHERE ${where}`).run(),
      update: async (set, where) => void sqlite.prepare(`UPDATE entries SET ${set} WHERE ${where}`).run(),
      recount: async () => (sqlite.prepare(RECOUNT).get() as { n: number }).n,
      migrateAll: async () => void migrate(sqlite, SQLITE_MIGRATIONS, 'proxy metadata'),
      index: () => new SqlitePackIndex(sqlite),
    });
  });

  const bins = postgresBinaries();
  describe.skipIf('missing' in bins)(
    `postgres${'missing' in bins ? ` (skipped: ${bins.missing})` : ''}`,
    () => {
      let cluster: RunningPostgres | undefined;
      beforeAll(async () => {
        cluster = await startPostgres(adminSql);
      });
      afterAll(async () => {
        await cluster?.stop();
      });

      it('the counter equals a recount through every transition', async () => {
        const sql = postgres(await cluster!.createDatabase(), { max: 2, onnotice: () => undefined });
        onTestFinished(() => sql.end());
        await migratePostgres(sql, migrationsBefore(PG_MIGRATIONS_DIR, 11));
        await scenario({
          put: async (u, p, h, t) => {
            await sql`INSERT INTO entries (user_id, path, kind, size, mtime_ms, revision, sha256, tier, fs_revision)
              VALUES (${u}, ${p}, ${h === null && t === null ? 'dir' : 'file'}, 1, 1, 'r', ${h}, ${t}, 'f')
              ON CONFLICT (user_id, path) DO UPDATE SET kind = EXCLUDED.kind, sha256 = EXCLUDED.sha256, tier = EXCLUDED.tier`;
          },
          insert: async (u, p, h, t) => {
            await sql`INSERT INTO entries (user_id, path, kind, size, mtime_ms, revision, sha256, tier, fs_revision)
              VALUES (${u}, ${p}, 'file', 1, 1, 'r', ${h}, ${t}, 'f')`;
          },
          remove: async (where) => void (await sql.unsafe(`DELETE FROM entries WHERE ${where}`)),
          update: async (set, where) => void (await sql.unsafe(`UPDATE entries SET ${set} WHERE ${where}`)),
          recount: async () => Number((await sql.unsafe(RECOUNT))[0]!.n),
          migrateAll: async () => void (await migratePostgres(sql)),
          index: () => new PostgresPackIndex(sql),
        });
      });
    },
  );
});
