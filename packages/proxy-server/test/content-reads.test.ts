/**
 * Reads per content (store/read-counts.ts, migration 008) and the cost model's keep-or-drop
 * decision of a packed small file's filesystem-tier copy (`packs.fsCopy: 'cost'`, docs/cost.md):
 * counted in memory and written in batches; a content read often keeps its copy, one never
 * read is dropped for a stub and served from its pack.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeBundle } from '@weft/wire';
import { MONTH_MS } from '../src/cost/prices.ts';
import type { SqlitePackIndex } from '../src/store/pack-index-sqlite.ts';
import { PostgresMetadataStore } from '../src/store/postgres.ts';
import {
  PostgresReadCounts,
  ReadCounter,
  type ReadCountStore,
  SqliteReadCounts,
} from '../src/store/read-counts.ts';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient } from './helpers.ts';
import { adminSql } from './pg-admin.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

/** The content_reads table of one store: its ReadCountStore and its rows as written. */
interface Table {
  readonly store: ReadCountStore;
  readonly url?: string;
  rows(): Promise<unknown[]>;
}

function sqliteTable(): Table {
  const db = new Database(':memory:');
  db.exec(
    'CREATE TABLE content_reads (sha256 TEXT PRIMARY KEY, reads INTEGER NOT NULL, first_ms INTEGER NOT NULL, last_ms INTEGER NOT NULL) STRICT, WITHOUT ROWID',
  );
  return {
    store: new SqliteReadCounts(db),
    rows: async () =>
      db
        .prepare(
          'SELECT sha256, reads, first_ms AS firstMs, last_ms AS lastMs FROM content_reads ORDER BY sha256',
        )
        .all(),
  };
}

const pg = postgresBinaries();
let cluster: RunningPostgres | undefined;
const pgStores: PostgresMetadataStore[] = [];
beforeAll(async () => {
  if (!('missing' in pg)) cluster = await startPostgres(adminSql);
});
afterAll(async () => {
  for (const s of pgStores) await s.close();
  await cluster?.stop();
});

async function postgresTable(): Promise<Table & { url: string }> {
  const url = await cluster!.createDatabase();
  const meta = await PostgresMetadataStore.open(url, { maxConnections: 2 });
  pgStores.push(meta);
  const sql = meta.connection;
  return {
    url,
    store: new PostgresReadCounts(sql),
    rows: async () => [
      ...(await sql`SELECT sha256, reads, first_ms AS "firstMs", last_ms AS "lastMs" FROM content_reads ORDER BY sha256`),
    ],
  };
}

describe.each([
  { name: 'sqlite', open: async () => sqliteTable(), skip: false },
  {
    name: `postgres${'missing' in pg ? ` (skipped: ${pg.missing})` : ''}`,
    open: postgresTable,
    skip: 'missing' in pg,
  },
])('ReadCounter on $name', ({ open, skip }) => {
  it.skipIf(skip)('keepsCountsInMemoryUntilABatchIsFullThenWritesThemInOneGo', async () => {
    const t = await open();
    let now = 1_000;
    const c = new ReadCounter(t.store, { batchSize: 3, flushMs: 0, now: () => now });
    c.count('a');
    now = 2_000;
    c.count('a');
    c.count('b');
    await c.settled();
    expect(await t.rows()).toEqual([]);
    // Waiting counts are already answered.
    expect(await c.reads('a')).toEqual({ reads: 2, firstMs: 1_000 });
    now = 3_000;
    c.count('c'); // the third content: the batch is written
    await c.settled();
    expect(await t.rows()).toEqual([
      { sha256: 'a', reads: 2, firstMs: 1_000, lastMs: 2_000 },
      { sha256: 'b', reads: 1, firstMs: 2_000, lastMs: 2_000 },
      { sha256: 'c', reads: 1, firstMs: 3_000, lastMs: 3_000 },
    ]);
    now = 4_000;
    c.count('a');
    expect(await c.reads('a')).toEqual({ reads: 3, firstMs: 1_000 });
    await c.close(); // written on close
    expect(await t.rows()).toContainEqual({ sha256: 'a', reads: 3, firstMs: 1_000, lastMs: 4_000 });
    // A counter on the same table later (or in another process) goes on from there.
    const again = new ReadCounter(t.store, { flushMs: 0, now: () => now });
    expect(await again.reads('a')).toEqual({ reads: 3, firstMs: 1_000 });
    expect(await again.reads('z')).toEqual({ reads: 0, firstMs: now });
    await again.close();
  });

  it.skipIf(skip)('projectsReadsPerMonthOverAtLeastAMonth', async () => {
    const t = await open();
    let now = 0;
    const c = new ReadCounter(t.store, { flushMs: 0, now: () => now });
    expect(await c.readsPerMonth('x')).toBe(0);
    for (let i = 0; i < 10; i++) c.count('x');
    now = 60_000; // ten reads in a minute: ten this month
    expect(await c.readsPerMonth('x')).toBeCloseTo(10, 9);
    now = 2 * MONTH_MS; // the same ten over two months
    expect(await c.readsPerMonth('x')).toBeCloseTo(5, 9);
    await c.close();
  });
});

describe.skipIf('missing' in pg)('ReadCounter: two processes on one PostgreSQL', () => {
  it('addsBothProcessesCountsToOneRow', async () => {
    const t = await postgresTable();
    const second = await PostgresMetadataStore.open(t.url, { maxConnections: 2 });
    pgStores.push(second);
    let now = 1_000;
    const one = new ReadCounter(t.store, { flushMs: 0, now: () => now });
    const two = new ReadCounter(new PostgresReadCounts(second.connection), { flushMs: 0, now: () => now });
    for (let round = 0; round < 5; round++) {
      now += 1_000;
      for (const h of ['a', 'b', 'c']) one.count(h);
      now += 1_000;
      for (const h of ['c', 'b', 'a']) two.count(h);
      await Promise.all([one.flush(), two.flush()]);
    }
    expect(await t.rows()).toEqual(
      ['a', 'b', 'c'].map((h) => ({ sha256: h, reads: 10, firstMs: 2_000, lastMs: 11_000 })),
    );
    expect(await two.reads('a')).toEqual({ reads: 10, firstMs: 2_000 });
  });
});

describe("packs.fsCopy 'cost' with the reads counted", () => {
  const started: Server[] = [];
  afterAll(async () => {
    for (const s of started) await s.stop().catch(() => undefined);
  });

  it('keepsTheCopyOfAContentReadOftenAndDropsTheOneNeverRead', async () => {
    const dataDir = await tempDir();
    const server = await startTestServer({
      dataDir,
      packs: { targetBytes: 64 * 1024 * 1024, timeoutMs: 2_000_000_000, gcIntervalMs: 0, fsCopy: 'cost' },
    });
    started.push(server);
    const alice = await TestClient.enrol(server, 'alice');
    const hot = pseudoRandom(4096, 1);
    const cold = pseudoRandom(4096, 2);
    const copy = pseudoRandom(4096, 3);
    const warm = pseudoRandom(4096, 4);
    await alice.putSmall({
      'hot.bin': hot,
      'cold.bin': cold,
      'warm.bin': warm,
      'a/copy.bin': copy,
      'b/copy.bin': copy,
    });
    // hot.bin: 5 whole downloads, 3 ranged, 2 in a bundle — 10 reads this month; copy: read 6
    // times through its second path (the count is per content); cold: never. At S3 Standard
    // and EFS Standard prices a 4 KiB copy is worth keeping from about 4 reads a month.
    for (let i = 0; i < 5; i++) expect((await alice.bytes('hot.bin')).equals(hot)).toBe(true);
    for (let i = 0; i < 3; i++) expect((await alice.get('hot.bin', 'bytes=0-99')).status).toBe(206);
    for (let i = 0; i < 2; i++) {
      const res = await alice.req('POST', '/v1/bundles/download', { paths: ['hot.bin'], compress: false });
      expect(decodeBundle(new Uint8Array(await res.arrayBuffer())).entries).toHaveLength(1);
    }
    for (let i = 0; i < 6; i++) expect((await alice.bytes('b/copy.bin')).equals(copy)).toBe(true);
    // warm.bin: twice — below the crossover, dropped like one never read.
    for (let i = 0; i < 2; i++) expect((await alice.bytes('warm.bin')).equals(warm)).toBe(true);
    expect(await server.packer!.flush()).toBe(1);

    const db = (server.packer!['o'].index as SqlitePackIndex)['db'];
    const dropped = new Set(
      (db.prepare('SELECT sha256 FROM fs_dropped').all() as { sha256: string }[]).map((r) => r.sha256),
    );
    expect(dropped.has(sha(cold))).toBe(true);
    expect(dropped.has(sha(warm))).toBe(true);
    expect(dropped.has(sha(hot))).toBe(false);
    expect(dropped.has(sha(copy))).toBe(false);
    const onFs = (p: string): Promise<Buffer> => fsp.readFile(nodePath.join(dataDir, 'fs', 'ns', 'alice', p));
    expect((await onFs('hot.bin')).equals(hot)).toBe(true);
    expect((await onFs('a/copy.bin')).equals(copy)).toBe(true);
    expect((await onFs('cold.bin')).subarray(0, 12).toString()).toBe('WEFTPACKED1\n');
    // Every file still reads back whole.
    expect((await alice.bytes('cold.bin')).equals(cold)).toBe(true);
    expect((await alice.bytes('hot.bin')).equals(hot)).toBe(true);

    // The counts were written (on close at the latest) and survive a restart.
    await server.close();
    const check = new Database(nodePath.join(dataDir, 'metadata.sqlite'), { readonly: true });
    try {
      const r = (sha256: string): number =>
        (
          check.prepare('SELECT reads FROM content_reads WHERE sha256 = ?').get(sha256) as
            { reads: number } | undefined
        )?.reads ?? 0;
      expect(r(sha(hot))).toBe(11);
      expect(r(sha(copy))).toBe(6);
      expect(r(sha(cold))).toBe(1);
    } finally {
      check.close();
    }
  });
});
