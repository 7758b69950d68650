/**
 * The relay cache on both books (relay-book.ts): in memory (one process owns the directory)
 * and PostgreSQL (proxy instances sharing the filesystem tier), the same tests for each; then,
 * on PostgreSQL, two caches on one directory and one database, as two instances would be. A
 * real cluster (src/testing/postgres.ts), skipped with the reason only where the machine has
 * no PostgreSQL server binaries.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsProvider } from '@weft/providers';
import { RelayCache } from '../src/store/relay-cache.ts';
import { LocalRelayBook, type RelayBook } from '../src/store/relay-book.ts';
import { PostgresRelayBook } from '../src/store/relay-book-postgres.ts';
import { connect, migratePostgres } from '../src/store/postgres-db.ts';
import { objectKey } from '../src/store/link-file.ts';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { pseudoRandom, sha, tempDir } from './helpers.ts';
import { adminSql } from './pg-admin.ts';

let dir: string;
let objects: FsProvider;
const blobs = [0, 1, 2, 3].map((i) => pseudoRandom(1000, i + 1));
const bins = postgresBinaries();
let cluster: RunningPostgres | undefined;
let made = 0;

beforeAll(async () => {
  dir = await tempDir('weft-relay-');
  objects = await FsProvider.open({ root: nodePath.join(dir, 'objects') });
  for (const b of blobs) await objects.write(objectKey(sha(b)), b);
  if (!('missing' in bins)) cluster = await startPostgres(adminSql);
});
afterAll(async () => {
  await cluster?.stop();
  await fsp.rm(dir, { recursive: true, force: true });
});

/** A migrated database of its own; `n` books on it (n pools, as n instances would have). */
async function pgBooks(n: number): Promise<RelayBook[]> {
  const url = await cluster!.createDatabase();
  const sql = connect(url, 1);
  await migratePostgres(sql);
  await sql.end();
  return Array.from({ length: n }, () => PostgresRelayBook.open(url));
}

const get = (relay: RelayCache, i: number) => relay.acquire(sha(blobs[i]!), objectKey(sha(blobs[i]!)), 1000);
const has = (relay: RelayCache, ...i: number[]) => Promise.all(i.map((x) => relay.has(sha(blobs[x]!))));

const kinds: { name: string; skip?: string; books: (n: number) => Promise<RelayBook[]> }[] = [
  { name: 'memory', books: async (n) => Array.from({ length: n }, () => new LocalRelayBook()) },
  {
    name: 'postgres',
    ...('missing' in bins ? { skip: bins.missing } : {}),
    books: pgBooks,
  },
];

for (const kind of kinds) {
  describe.skipIf(kind.skip !== undefined)(
    `relay cache (${kind.name} books)${kind.skip ? ` (skipped: ${kind.skip})` : ''}`,
    () => {
      const open = async (max: number, book?: RelayBook) => {
        const relay = new RelayCache(nodePath.join(dir, `relay${++made}`), max, objects, {
          book: book ?? (await kind.books(1))[0]!,
        });
        await relay.init();
        return relay;
      };

      it('evictsTheLeastRecentlyUsedAndNeverAPinnedFile', async () => {
        const relay = await open(2500);
        const a = await get(relay, 0);
        a.release();
        const b = await get(relay, 1);
        b.release();
        (await get(relay, 0)).release(); // 0 is now more recent than 1
        const pinned = await get(relay, 2); // over the bound: 1 (least recently used) goes
        expect(await has(relay, 0, 1, 2)).toEqual([true, false, true]);
        (await get(relay, 3)).release(); // 0 goes; 2 is pinned and stays
        expect(await has(relay, 0, 2)).toEqual([false, true]);
        expect(await fsp.readFile(pinned.file)).toEqual(blobs[2]);
        pinned.release();
        expect(relay.stats.bytes).toBeLessThanOrEqual(2500);
        await relay.close();
      });

      it('refusesAnObjectOfTheWrongSize', async () => {
        const relay = await open(10_000);
        await expect(relay.acquire(sha(blobs[0]!), objectKey(sha(blobs[0]!)), 999)).rejects.toThrow(
          /expected 999/,
        );
        expect(await has(relay, 0)).toEqual([false]);
        await relay.close();
      });

      it('concurrentReadersShareOneStagingAndForgetWaitsForThem', async () => {
        const relay = await open(10_000);
        const handles = await Promise.all([0, 1, 2].map(() => get(relay, 1)));
        expect(relay.stats).toMatchObject({ misses: 1, hits: 2, files: 1 });
        expect(new Set(handles.map((h) => h.file)).size).toBe(1);
        await relay.forget(sha(blobs[1]!)); // read: kept
        expect(await has(relay, 1)).toEqual([true]);
        for (const h of handles) h.release();
        await (await get(relay, 0)).release(); // the releases are in order before this
        await relay.forget(sha(blobs[1]!));
        expect(await has(relay, 1)).toEqual([false]);
        await expect(fsp.access(handles[0]!.file)).rejects.toThrow();
        await relay.close();
      });

      it('restagesACopyWhoseFileIsGone', async () => {
        const relay = await open(10_000);
        const h = await get(relay, 3);
        h.release();
        await fsp.rm(h.file);
        const again = await get(relay, 3);
        expect(await fsp.readFile(again.file)).toEqual(blobs[3]);
        expect(relay.stats.misses).toBe(2);
        again.release();
        await relay.close();
      });
    },
  );
}

describe.skipIf('missing' in bins)('relay cache shared by two instances on PostgreSQL', () => {
  const two = async (max: number, staleMs?: number) => {
    const [b1, b2] = await pgBooks(2);
    const shared = nodePath.join(dir, `shared${++made}`);
    const mk = (book: RelayBook) =>
      new RelayCache(shared, max, objects, { book, ...(staleMs !== undefined ? { staleMs } : {}) });
    const one = mk(b1!);
    await one.init();
    return { one, mk: () => mk(b2!), shared };
  };

  it('aCopyStagedByOneIsAHitForTheOtherAndSurvivesItsStart', async () => {
    const { one, mk } = await two(10_000);
    const h = await get(one, 0);
    h.release();
    // The second instance starts on the same directory: it keeps what the first recorded.
    const other = mk();
    await other.init();
    const seen = await get(other, 0);
    expect(seen.file).toBe(h.file);
    expect(await fsp.readFile(seen.file)).toEqual(blobs[0]);
    expect(other.stats).toMatchObject({ hits: 1, misses: 0 });
    seen.release();
    await one.close();
    await other.close();
  });

  it('theBoundIsTheDirectorysAndACopyOneReadsIsNotEvictedByTheOther', async () => {
    const { one, mk, shared } = await two(2500);
    const other = mk();
    await other.init();
    const reading = await get(one, 0); // pinned by one
    (await get(other, 1)).release();
    (await get(other, 2)).release(); // 3000 bytes: the oldest copy nobody reads (1) goes
    expect(await has(other, 0, 1, 2)).toEqual([true, false, true]);
    expect(await fsp.readFile(reading.file)).toEqual(blobs[0]);
    const names = (await fsp.readdir(shared)).filter((n) => !n.startsWith('.tmp-'));
    expect(names).toHaveLength(2);
    reading.release();
    (await get(one, 3)).release(); // now 0 is the oldest and nobody reads it
    expect(await has(one, 0, 2, 3)).toEqual([false, true, true]);
    await one.close();
    await other.close();
  });

  it('thePinsOfAnInstanceThatDiedStopCountingOnceStale', async () => {
    const { one, mk } = await two(1500, 1);
    const other = mk();
    await other.init();
    await get(one, 0); // never released: the instance "dies" holding it (no renewals)
    await new Promise((r) => setTimeout(r, 5));
    (await get(other, 1)).release(); // over the bound: 0's pin is stale, so 0 goes
    expect(await has(other, 0, 1)).toEqual([false, true]);
    await one.close();
    await other.close();
  });
});
