/**
 * A workload replayed against the cost model (docs/cost.md): small files packed into pack
 * blobs on an object tier (the in-memory provider, counted like the proxy's tiers),
 * overwritten and deleted until half of every pack is dead, with Coral's GC rule checked
 * every virtual hour. GC must trigger at the crossover C_store = C_clean and not before, and
 * the month's bill the ledger measures after GC must be what the model predicts within 1 %.
 *
 * The packs here are the test's own minimal ones (concatenated files, Range reads), to check
 * the model alone; packs-gc.test.ts replays the same workload on the proxy's real packs
 * through its pack collector, which calls the same `CostService.decideGc`.
 */
import * as fs from 'node:fs';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { CountingProvider, MemoryProvider, collect } from '@weft/providers';
import { PROXY } from '../src/cost/ledger.ts';
import { SqliteCostStore } from '../src/cost/ledger-store.ts';
import { cleanCost, deadSums } from '../src/cost/policy.ts';
import { CostConfig, GIB, MONTH_MS } from '../src/cost/prices.ts';
import { CostService } from '../src/cost/service.ts';
import { ProxyMetrics } from '../src/metrics.ts';

const MIGRATIONS = nodePath.resolve(fileURLToPath(import.meta.url), '../../src/migrations');
const HOUR = 3600 * 1000;
const KiB = 1024;
const FULL = process.env.WEFT_FULL === '1';
const FILES_PER_PACK = FULL ? 256 : 32;
const FILE_BYTES = 64 * KiB;
const PACKS = 4;

function schema(): Database.Database {
  const db = new Database(':memory:');
  for (const f of fs.readdirSync(MIGRATIONS).sort())
    db.exec(fs.readFileSync(nodePath.join(MIGRATIONS, f), 'utf8'));
  return db;
}

interface Extent {
  offset: number;
  length: number;
  deadSinceMs?: number;
}

describe('cost-driven pack GC, replayed', () => {
  it('repacksAtTheCrossoverNotBeforeAndTheBillIsWhatTheModelPredicted', async () => {
    const db = schema();
    const start = Date.UTC(2026, 10, 1);
    let now = start;
    const metrics = new ProxyMetrics();
    const cost = new CostService(
      new SqliteCostStore(db),
      CostConfig.parse({}),
      metrics,
      pino({ level: 'silent' }),
      () => now,
    );
    const s3 = cost.prices.objects;
    const objects = new CountingProvider(new MemoryProvider(), cost.sink('objects'));
    const packs = new Map<string, Extent[]>();
    // Predicted: Σ bytes × time held, and the requests the workload makes.
    let predictedByteMs = 0;
    let predictedPuts = 0;
    let predictedGets = 0;
    let predictedDeletes = 0;
    let heldBytes = 0;
    const advance = (to: number): void => {
      predictedByteMs += heldBytes * (to - now);
      now = to;
    };
    const sample = (): Promise<void> =>
      cost.ledger.sample(now, [{ userId: PROXY, tier: 'objects', bytes: heldBytes }]);

    const writePack = async (id: string, files: Uint8Array[]): Promise<void> => {
      const body = Buffer.concat(files);
      await objects.write(id, body);
      predictedPuts++;
      let offset = 0;
      packs.set(
        id,
        files.map((f) => {
          const e = { offset, length: f.byteLength };
          offset += f.byteLength;
          return e;
        }),
      );
      heldBytes += body.byteLength;
      await sample();
    };
    const fileOf = (p: number, i: number): Uint8Array => new Uint8Array(FILE_BYTES).fill((p * 31 + i) & 0xff);

    // Create: PACKS packs of FILES_PER_PACK files.
    await sample();
    for (let p = 0; p < PACKS; p++) {
      await writePack(
        `pack-${p}`,
        Array.from({ length: FILES_PER_PACK }, (_, i) => fileOf(p, i)),
      );
    }
    // Overwrite a quarter of each pack after an hour (the new versions go to a new pack),
    // delete another quarter an hour later: half of every pack is dead.
    advance(now + HOUR);
    const rewritten: Uint8Array[] = [];
    for (const extents of packs.values())
      for (let i = 0; i < FILES_PER_PACK / 4; i++) {
        extents[i]!.deadSinceMs = now;
        rewritten.push(new Uint8Array(FILE_BYTES).fill(7));
      }
    await writePack('pack-new', rewritten);
    advance(now + HOUR);
    for (const [id, extents] of packs)
      if (id !== 'pack-new')
        for (let i = FILES_PER_PACK / 4; i < FILES_PER_PACK / 2; i++) extents[i]!.deadSinceMs = now;
    await sample();

    const gcInput = (id: string) => {
      const extents = packs.get(id)!;
      const live = extents.filter((e) => e.deadSinceMs === undefined);
      // Live extents are adjacent (the dead ones are the first half): one Range GET.
      return {
        packId: id,
        liveBytes: live.reduce((n, e) => n + e.length, 0),
        liveRanges: 1,
        ...deadSums(
          extents.flatMap((e) =>
            e.deadSinceMs === undefined ? [] : [{ bytes: e.length, sinceMs: e.deadSinceMs }],
          ),
        ),
      };
    };
    // The crossover, from first principles: dead D bytes, half since t1, half since t2.
    const dead = (FILES_PER_PACK / 2) * FILE_BYTES;
    const live = dead;
    const t1 = start + HOUR;
    const t2 = start + 2 * HOUR;
    const cClean = cleanCost(s3, live, 1);
    expect(cClean).toBeCloseTo((0.0004 + 0.005) / 1000, 12);
    const perByteMs = s3.storagePerGbMonth / GIB / MONTH_MS;
    const crossover = (cClean / perByteMs + (dead / 2) * t1 + (dead / 2) * t2) / dead;

    // Check every hour; repack what the model says to.
    const repackedAt = new Map<string, number>();
    for (let hour = 3; hour < 24 * 30 && repackedAt.size < PACKS; hour++) {
      advance(start + hour * HOUR);
      await sample();
      for (const id of [...packs.keys()]) {
        if (id === 'pack-new' || repackedAt.has(id)) continue;
        const d = cost.decideGc(gcInput(id));
        if (now < crossover) expect(d.repack, `${id} at hour ${hour}`).toBe(false);
        if (!d.repack) continue;
        expect(now).toBeGreaterThanOrEqual(crossover);
        expect(now - crossover).toBeLessThan(HOUR);
        const extents = packs.get(id)!;
        const liveExtents = extents.filter((e) => e.deadSinceMs === undefined);
        const first = liveExtents[0]!;
        const bytes = await collect(await objects.read(id, { offset: first.offset, length: live }));
        predictedGets++;
        const oldSize = extents.reduce((n, e) => n + e.length, 0);
        await objects.remove(id);
        predictedDeletes++;
        heldBytes -= oldSize;
        packs.delete(id);
        await writePack(`${id}-gc`, [bytes]);
        cost.gcDone(id, { freedBytes: dead, rewrittenBytes: live });
        repackedAt.set(id, now);
      }
    }
    expect(repackedAt.size).toBe(PACKS);

    // The month's bill after GC, measured by the ledger, against the model's prediction.
    advance(start + 30 * 24 * HOUR - 1);
    await cost.sample();
    const bill = await cost.bill(PROXY, now);
    const predicted =
      predictedByteMs * perByteMs +
      (predictedPuts * 0.005 + predictedGets * 0.0004) / 1000 +
      predictedDeletes * 0;
    expect(bill.soFar.total).toBeGreaterThan(0);
    expect(Math.abs(bill.soFar.total - predicted) / predicted).toBeLessThan(0.01);
    expect(bill.tiers.objects.soFar.requests).toBeCloseTo(
      (predictedPuts * 0.005 + predictedGets * 0.0004) / 1000,
      12,
    );
    const text = await metrics.registry.metrics();
    expect(text).toContain(`weft_pack_gc_decisions_total{decision="repack"} ${PACKS}`);
    expect(text).toContain(`weft_pack_gc_freed_bytes_total ${PACKS * dead}`);
  });
});
