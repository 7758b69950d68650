/**
 * The cost ledger (docs/cost.md) on both of its stores: SQLite (migration 005, in memory) and
 * PostgreSQL (pg-migrations/002, a real cluster: src/testing/postgres.ts; skipped with the
 * reason only where the machine has no PostgreSQL server). One suite, two implementations;
 * on PostgreSQL also two ledgers (two pools, as two proxy processes) on one database.
 */
import * as fs from 'node:fs';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CostLedger, PROXY } from '../src/cost/ledger.ts';
import { PostgresCostStore } from '../src/cost/ledger-postgres.ts';
import { type CostStore, SqliteCostStore } from '../src/cost/ledger-store.ts';
import { monthOf } from '../src/cost/model.ts';
import { CostConfig } from '../src/cost/prices.ts';
import { CostService } from '../src/cost/service.ts';
import { ProxyMetrics } from '../src/metrics.ts';
import { PostgresMetadataStore } from '../src/store/postgres.ts';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { adminSql } from './pg-admin.ts';

const MIGRATIONS = nodePath.resolve(fileURLToPath(import.meta.url), '../../src/migrations');
const HOUR = 3600 * 1000;

/** A ledger's store on a new, empty database, and the index rows it reads. */
interface Fixture {
  readonly store: CostStore;
  /** A second store on the same database (another process); PostgreSQL only. */
  readonly other?: CostStore;
  addFile(user: string, path: string, size: number, tier: 'small' | 'large'): Promise<void>;
  addObject(sha256: string, size: number): Promise<void>;
  close(): Promise<void>;
}

function sqliteFixture(): Fixture {
  const db = new Database(':memory:');
  for (const f of fs.readdirSync(MIGRATIONS).sort())
    db.exec(fs.readFileSync(nodePath.join(MIGRATIONS, f), 'utf8'));
  return {
    store: new SqliteCostStore(db),
    async addFile(user, path, size, tier) {
      db.prepare('INSERT OR IGNORE INTO users (id, seq, created_ms) VALUES (?, 0, 0)').run(user);
      db.prepare(
        `INSERT INTO entries (user_id, path, kind, size, mtime_ms, revision, sha256, tier, fs_revision)
         VALUES (?, ?, 'file', ?, 0, 'r', ?, ?, 'f')`,
      ).run(user, path, size, tier === 'large' ? path : null, tier);
    },
    async addObject(sha256, size) {
      db.prepare('INSERT INTO objects (sha256, size, refcount, created_ms) VALUES (?, ?, 1, 0)').run(
        sha256,
        size,
      );
    },
    async close() {
      db.close();
    },
  };
}

const pg = postgresBinaries();
let cluster: RunningPostgres | undefined;
beforeAll(async () => {
  if (!('missing' in pg)) cluster = await startPostgres(adminSql);
});
afterAll(async () => {
  await cluster?.stop();
});

async function postgresFixture(): Promise<Fixture> {
  const url = await cluster!.createDatabase();
  const a = await PostgresMetadataStore.open(url, { maxConnections: 4 });
  const b = await PostgresMetadataStore.open(url, { maxConnections: 4 });
  const sql = a.connection;
  return {
    store: new PostgresCostStore(sql),
    other: new PostgresCostStore(b.connection),
    async addFile(user, path, size, tier) {
      await sql`INSERT INTO users (id, seq, created_ms) VALUES (${user}, 0, 0) ON CONFLICT DO NOTHING`;
      await sql`INSERT INTO entries (user_id, path, kind, size, mtime_ms, revision, sha256, tier, fs_revision)
        VALUES (${user}, ${path}, 'file', ${size}, 0, 'r', ${tier === 'large' ? path : null}, ${tier}, 'f')`;
    },
    async addObject(sha256, size) {
      await sql`INSERT INTO objects (sha256, size, refcount, created_ms) VALUES (${sha256}, ${size}, 1, 0)`;
    },
    async close() {
      await a.close();
      await b.close();
    },
  };
}

const STORES = [
  { name: 'sqlite', open: async () => sqliteFixture(), skip: false },
  {
    name: `postgres${'missing' in pg ? ` (skipped: ${pg.missing})` : ''}`,
    open: postgresFixture,
    skip: 'missing' in pg,
  },
];

describe.each(STORES)('cost ledger on $name', ({ open, skip }) => {
  const opened: Fixture[] = [];
  afterAll(async () => {
    for (const x of opened) await x.close();
  });
  const fixture = async (): Promise<Fixture> => {
    const x = await open();
    opened.push(x);
    return x;
  };

  it.skipIf(skip)('integratesBytesHeldBetweenSamplesAndAcrossAMonthBoundary', async () => {
    const ledger = new CostLedger((await fixture()).store);
    const dec31 = Date.UTC(2026, 11, 31, 23);
    await ledger.sample(dec31, [{ userId: 'a', tier: 'objects', bytes: 1000 }]);
    await ledger.sample(dec31 + 2 * HOUR, [{ userId: 'a', tier: 'objects', bytes: 3000 }]);
    // December got 1000 B for the hour to midnight; January 1000 B for one hour so far.
    const dec = await ledger.usage('a', Date.UTC(2026, 11, 31, 23, 30));
    expect(dec.tiers.objects.byteMs).toBe(1000 * HOUR);
    const jan = await ledger.usage('a', dec31 + 3 * HOUR);
    expect(jan.tiers.objects.byteMs).toBe(1000 * HOUR + 3000 * HOUR);
    expect(jan.tiers.objects.bytesNow).toBe(3000);
    expect(monthOf(dec31 + 3 * HOUR).month).toBe('2027-01');
  });

  it.skipIf(skip)('flushesRequestAndEgressCountsIntoTheMonthAndCountsPendingOnesToo', async () => {
    const ledger = new CostLedger((await fixture()).store);
    const t = Date.UTC(2026, 10, 10);
    ledger.countRequests('objects', 'put', 2, 100);
    ledger.countEgress('a', 50);
    expect((await ledger.usage(PROXY, t)).tiers.objects.requests.put).toEqual({ requests: 2, bytes: 100 });
    await ledger.flush(t);
    ledger.countRequests('objects', 'put', 1, 10);
    ledger.countEgress('b', 5);
    const u = await ledger.usage(PROXY, t);
    expect(u.tiers.objects.requests.put).toEqual({ requests: 3, bytes: 110 });
    expect(u.egressBytes).toBe(55);
    expect((await ledger.usage('a', t)).egressBytes).toBe(50);
    await ledger.flush(t);
    expect((await ledger.usage(PROXY, t)).tiers.objects.requests.put).toEqual({ requests: 3, bytes: 110 });
  });

  it.skipIf(skip)('readsPhysicalBytesForTheProxyAndLogicalBytesPerUser', async () => {
    const db = await fixture();
    await db.addFile('a', 'x', 10, 'small');
    await db.addFile('a', 'big', 5000, 'large');
    await db.addFile('b', 'y', 7, 'small');
    await db.addObject('big', 4000);
    const r = await db.store.readStorage();
    expect(r).toContainEqual({ userId: 'a', tier: 'fs', bytes: 10 });
    expect(r).toContainEqual({ userId: 'a', tier: 'objects', bytes: 5000 });
    expect(r).toContainEqual({ userId: 'b', tier: 'objects', bytes: 0 });
    expect(r).toContainEqual({ userId: PROXY, tier: 'fs', bytes: 17 });
    expect(r).toContainEqual({ userId: PROXY, tier: 'objects', bytes: 4000 });
  });

  it.skipIf(skip)('billsAUserTheirBytesAndTheirShareOfRequests', async () => {
    const db = await fixture();
    const start = Date.UTC(2026, 10, 1);
    let now = start;
    const svc = new CostService(
      db.store,
      CostConfig.parse({}),
      new ProxyMetrics(),
      pino({ level: 'silent' }),
      () => now,
    );
    await db.addFile('a', 'x', 2 ** 30, 'large');
    await db.addFile('b', 'y', 3 * 2 ** 30, 'large');
    await db.addObject('x', 2 ** 30);
    await db.addObject('y', 3 * 2 ** 30);
    await svc.sample();
    svc.sink('objects')('put', 1000, 0);
    now = start + 73 * HOUR; // a tenth of a 730-hour billing month
    const a = await svc.report('a');
    // 1 GiB on S3 ($0.023/GB-month) for 73 h: $0.0023; a quarter of the bytes: 250 PUTs ($0.00125).
    expect(a.mine.soFar.storage).toBeCloseTo(0.0023, 10);
    expect(a.mine.soFar.requests).toBeCloseTo(0.00125, 10);
    expect(a.proxy.soFar.storage).toBeCloseTo(0.0092, 10);
    expect(a.proxy.soFar.requests).toBeCloseTo(0.005, 10);
    expect(a.proxy.requests.put).toBe(1000);
    expect(a.mine.requests.put).toBe(250);
    expect(a.mine.objectsBytes).toBe(2 ** 30);
    expect(a.tables).toEqual({ fs: 'efs-standard', objects: 's3-standard' });
    expect(a.history).toEqual([{ timeMs: start, fsBytes: 0, objectsBytes: 2 ** 30 }]);
    // The policies the packer asks, on this proxy's prices.
    expect(svc.packTargetSize()).toBe(Math.ceil(((0.000005 / (0.01 * 0.023)) * 2 ** 30) / 4096) * 4096);
    expect(svc.keepFsCopy(4096, 1).keep).toBe(false);
    expect(svc.keepFsCopy(4096, 1000).keep).toBe(true);
  });
});

describe.skipIf('missing' in pg)('cost ledger: two processes on one PostgreSQL', () => {
  it('addsBothProcessesCountsAndChargesEachIntervalOnceWhenTheySampleTogether', async () => {
    const db = await postgresFixture();
    try {
      const one = new CostLedger(db.store);
      const two = new CostLedger(db.other!);
      const t = Date.UTC(2026, 10, 10);
      // Counted by both processes, flushed at once, many times over: every count lands.
      for (let round = 0; round < 5; round++) {
        one.countRequests('objects', 'put', 1, 10);
        two.countRequests('objects', 'put', 2, 20);
        one.countEgress('a', 3);
        two.countEgress('a', 4);
        await Promise.all([one.flush(t), two.flush(t)]);
      }
      const u = await one.usage(PROXY, t);
      expect(u.tiers.objects.requests.put).toEqual({ requests: 15, bytes: 150 });
      expect(u.egressBytes).toBe(35);
      expect((await two.usage('a', t)).egressBytes).toBe(35);
      // Both sample the same bytes held at the same moments: the month is charged as if one did.
      const readings = [{ userId: 'a', tier: 'fs' as const, bytes: 1000 }];
      await one.sample(t, readings);
      for (let i = 1; i <= 4; i++)
        await Promise.all([one.sample(t + i * HOUR, readings), two.sample(t + i * HOUR, readings)]);
      expect((await two.usage('a', t + 4 * HOUR)).tiers.fs.byteMs).toBe(1000 * 4 * HOUR);
    } finally {
      await db.close();
    }
  });
});
