/**
 * Reads per content (store/read-counts.ts, migration 008) and the cost model's keep-or-drop
 * decision of a packed small file's filesystem-tier copy (`packs.fsCopy: 'cost'`, docs/cost.md):
 * counted in memory and written in batches; a content read often keeps its copy, one never
 * read is dropped for a stub and served from its pack.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeBundle } from '@weft/wire';
import { MONTH_MS } from '../src/cost/prices.ts';
import { ReadCounter } from '../src/store/read-counts.ts';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient } from './helpers.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

function table(): Database.Database {
  const db = new Database(':memory:');
  db.exec(
    'CREATE TABLE content_reads (sha256 TEXT PRIMARY KEY, reads INTEGER NOT NULL, first_ms INTEGER NOT NULL, last_ms INTEGER NOT NULL) STRICT, WITHOUT ROWID',
  );
  return db;
}
const rows = (db: Database.Database): unknown[] =>
  db
    .prepare(
      'SELECT sha256, reads, first_ms AS firstMs, last_ms AS lastMs FROM content_reads ORDER BY sha256',
    )
    .all();

describe('ReadCounter', () => {
  it('keepsCountsInMemoryUntilABatchIsFullThenWritesThemInOneGo', () => {
    const db = table();
    let now = 1_000;
    const c = new ReadCounter(db, { batchSize: 3, flushMs: 0, now: () => now });
    c.count('a');
    now = 2_000;
    c.count('a');
    c.count('b');
    expect(rows(db)).toEqual([]);
    // Waiting counts are already answered.
    expect(c.reads('a')).toEqual({ reads: 2, firstMs: 1_000 });
    now = 3_000;
    c.count('c'); // the third content: the batch is written
    expect(rows(db)).toEqual([
      { sha256: 'a', reads: 2, firstMs: 1_000, lastMs: 2_000 },
      { sha256: 'b', reads: 1, firstMs: 2_000, lastMs: 2_000 },
      { sha256: 'c', reads: 1, firstMs: 3_000, lastMs: 3_000 },
    ]);
    now = 4_000;
    c.count('a');
    expect(c.reads('a')).toEqual({ reads: 3, firstMs: 1_000 });
    c.close(); // written on close
    expect(rows(db)).toContainEqual({ sha256: 'a', reads: 3, firstMs: 1_000, lastMs: 4_000 });
    // A counter on the same table later goes on from there.
    const again = new ReadCounter(db, { flushMs: 0, now: () => now });
    expect(again.reads('a')).toEqual({ reads: 3, firstMs: 1_000 });
    expect(again.reads('z')).toEqual({ reads: 0, firstMs: now });
    again.close();
  });

  it('projectsReadsPerMonthOverAtLeastAMonth', () => {
    const db = table();
    let now = 0;
    const c = new ReadCounter(db, { flushMs: 0, now: () => now });
    expect(c.readsPerMonth('x')).toBe(0);
    for (let i = 0; i < 10; i++) c.count('x');
    now = 60_000; // ten reads in a minute: ten this month
    expect(c.readsPerMonth('x')).toBeCloseTo(10, 9);
    now = 2 * MONTH_MS; // the same ten over two months
    expect(c.readsPerMonth('x')).toBeCloseTo(5, 9);
    c.close();
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

    const db = server.packer!['o'].db;
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
