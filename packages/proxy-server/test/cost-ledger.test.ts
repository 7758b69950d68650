import * as fs from 'node:fs';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { CostLedger, PROXY, readStorage } from '../src/cost/ledger.ts';
import { monthOf } from '../src/cost/model.ts';
import { CostConfig } from '../src/cost/prices.ts';
import { CostService } from '../src/cost/service.ts';
import { ProxyMetrics } from '../src/metrics.ts';

const MIGRATIONS = nodePath.resolve(fileURLToPath(import.meta.url), '../../src/migrations');
const HOUR = 3600 * 1000;

/** The proxy's schema (the migrations this ledger reads and writes) in memory. */
function schema(): Database.Database {
  const db = new Database(':memory:');
  for (const f of fs.readdirSync(MIGRATIONS).sort()) {
    db.exec(fs.readFileSync(nodePath.join(MIGRATIONS, f), 'utf8'));
  }
  return db;
}

function addFile(db: Database.Database, user: string, path: string, size: number, tier: 'small' | 'large') {
  db.prepare('INSERT OR IGNORE INTO users (id, seq, created_ms) VALUES (?, 0, 0)').run(user);
  db.prepare(
    `INSERT INTO entries (user_id, path, kind, size, mtime_ms, revision, sha256, tier, fs_revision)
     VALUES (?, ?, 'file', ?, 0, 'r', ?, ?, 'f')`,
  ).run(user, path, size, tier === 'large' ? path : null, tier);
}

describe('cost ledger', () => {
  it('integratesBytesHeldBetweenSamplesAndAcrossAMonthBoundary', () => {
    const ledger = new CostLedger(schema());
    const dec31 = Date.UTC(2026, 11, 31, 23);
    ledger.sample(dec31, [{ userId: 'a', tier: 'objects', bytes: 1000 }]);
    ledger.sample(dec31 + 2 * HOUR, [{ userId: 'a', tier: 'objects', bytes: 3000 }]);
    // December got 1000 B for the hour to midnight; January 1000 B for one hour so far.
    const dec = ledger.usage('a', Date.UTC(2026, 11, 31, 23, 30));
    expect(dec.tiers.objects.byteMs).toBe(1000 * HOUR);
    const jan = ledger.usage('a', dec31 + 3 * HOUR);
    expect(jan.tiers.objects.byteMs).toBe(1000 * HOUR + 3000 * HOUR);
    expect(jan.tiers.objects.bytesNow).toBe(3000);
    expect(monthOf(dec31 + 3 * HOUR).month).toBe('2027-01');
  });

  it('flushesRequestAndEgressCountsIntoTheMonthAndCountsPendingOnesToo', () => {
    const ledger = new CostLedger(schema());
    const t = Date.UTC(2026, 10, 10);
    ledger.countRequests('objects', 'put', 2, 100);
    ledger.countEgress('a', 50);
    expect(ledger.usage(PROXY, t).tiers.objects.requests.put).toEqual({ requests: 2, bytes: 100 });
    ledger.flush(t);
    ledger.countRequests('objects', 'put', 1, 10);
    ledger.countEgress('b', 5);
    const u = ledger.usage(PROXY, t);
    expect(u.tiers.objects.requests.put).toEqual({ requests: 3, bytes: 110 });
    expect(u.egressBytes).toBe(55);
    expect(ledger.usage('a', t).egressBytes).toBe(50);
    ledger.flush(t);
    expect(ledger.usage(PROXY, t).tiers.objects.requests.put).toEqual({ requests: 3, bytes: 110 });
  });

  it('readsPhysicalBytesForTheProxyAndLogicalBytesPerUser', () => {
    const db = schema();
    addFile(db, 'a', 'x', 10, 'small');
    addFile(db, 'a', 'big', 5000, 'large');
    addFile(db, 'b', 'y', 7, 'small');
    db.prepare('INSERT INTO objects (sha256, size, refcount, created_ms) VALUES (?, ?, 1, 0)').run(
      'big',
      4000,
    );
    const r = readStorage(db);
    expect(r).toContainEqual({ userId: 'a', tier: 'fs', bytes: 10 });
    expect(r).toContainEqual({ userId: 'a', tier: 'objects', bytes: 5000 });
    expect(r).toContainEqual({ userId: 'b', tier: 'objects', bytes: 0 });
    expect(r).toContainEqual({ userId: PROXY, tier: 'fs', bytes: 17 });
    expect(r).toContainEqual({ userId: PROXY, tier: 'objects', bytes: 4000 });
  });

  it('billsAUserTheirBytesAndTheirShareOfRequests', () => {
    const db = schema();
    const start = Date.UTC(2026, 10, 1);
    let now = start;
    const svc = new CostService(
      db,
      CostConfig.parse({}),
      new ProxyMetrics(),
      pino({ level: 'silent' }),
      () => now,
    );
    addFile(db, 'a', 'x', 2 ** 30, 'large');
    addFile(db, 'b', 'y', 3 * 2 ** 30, 'large');
    const obj = db.prepare('INSERT INTO objects (sha256, size, refcount, created_ms) VALUES (?, ?, 1, 0)');
    obj.run('x', 2 ** 30);
    obj.run('y', 3 * 2 ** 30);
    svc.sample();
    svc.sink('objects')('put', 1000, 0);
    now = start + 73 * HOUR; // a tenth of a 730-hour billing month
    const a = svc.report('a');
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
