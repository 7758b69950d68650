/**
 * Cost-driven garbage collection of REAL packs through the server (docs/cost.md), on the
 * embedded object directory and on s3proxy: small files uploaded through the API are packed,
 * a quarter of each pack is overwritten and another quarter deleted, and the server's pack
 * collector runs every virtual hour on an injected clock and price table. Each pack must be
 * repacked at the first pass at or after Coral's crossover (computed here from first
 * principles), never before; the month's bill the ledger measures after GC must be what the
 * model predicted within 1 %.
 */
import { afterAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { coalescePackRanges } from '@weft/wire';
import { PROXY } from '../src/cost/ledger.ts';
import { cleanCost } from '../src/cost/policy.ts';
import { GIB, MONTH_MS, resolvePrices, CostConfig } from '../src/cost/prices.ts';
import { startProxyServer, type RunningProxyServer } from '../src/index.ts';
import type { PackLocation } from '../src/store/packs.ts';
import { pseudoRandom, sha, tempDir, TestClient, packTiers } from './helpers.ts';

const HOUR = 3600 * 1000;
const PACKS = 4;
const FILES = 16; // per pack
const FILE_BYTES = 32 * 1024;

function tiers(): ReturnType<typeof packTiers> {
  return packTiers(`packs-gc-${Date.now()}`);
}

const started: RunningProxyServer[] = [];
afterAll(async () => {
  for (const s of started) await s.close().catch(() => undefined);
});

// The injected price table: S3 Standard's requests, five times its storage price (the
// crossover ~6 days in, well inside the month); a free fs tier,
// so the whole proxy's bill is the object tier's (packs) alone.
const COST = {
  tiers: { fs: 'local', objects: 's3-standard' },
  prices: { 's3-standard': { storagePerGbMonth: 0.115 } },
  sampleIntervalMs: 0,
} as const;

describe.each(tiers())('pack GC on $name', ({ objectTier }) => {
  it('repacksAtTheCrossoverNotBeforeAndTheBillIsWhatTheModelPredicted', async () => {
    const start = Date.UTC(2026, 10, 1);
    let now = start;
    const server = await startProxyServer(
      {
        dataDir: await tempDir(),
        gcIntervalMs: 0,
        packs: { targetBytes: 64 * 1024 * 1024, timeoutMs: 2_000_000_000, gcIntervalMs: 0 },
        cost: COST,
        ...(objectTier ? { objectTier } : {}),
      },
      { logger: pino({ level: 'silent' }), now: () => now },
    );
    started.push(server);
    const packer = server.packer!;
    const prices = resolvePrices(CostConfig.parse(COST)).objects;
    const perByteMs = prices.storagePerGbMonth / GIB / MONTH_MS;
    const requestUsd = (puts: number, gets: number, deletes: number): number =>
      (puts * prices.putPer1000 + gets * prices.getPer1000 + deletes * prices.deletePer1000) / 1000;

    // The model's prediction, kept beside the workload: byte-time of every pack and requests.
    let predictedStorageUsd = 0;
    let predictedRequestUsd = 0;
    const held = new Map<string, number>(); // pack → size
    const advance = async (to: number): Promise<void> => {
      const bytes = [...held.values()].reduce((n, s) => n + s, 0);
      predictedStorageUsd += bytes * (to - now) * perByteMs;
      now = to;
      await server.cost.sample();
    };
    await server.cost.sample();
    const baseline = (await server.cost.bill(PROXY, now)).soFar.total; // startup requests (the pack listing)
    expect(baseline).toBeLessThan(requestUsd(2, 2, 0));

    const alice = await TestClient.enrol(server, 'alice');
    const flush = async (): Promise<string> => {
      const before = new Set((await packer.stats()).map((s) => s.packId));
      expect(await packer.flush()).toBe(1);
      const [made] = (await packer.stats()).filter((s) => !before.has(s.packId));
      held.set(made!.packId, made!.size);
      predictedRequestUsd += requestUsd(1, 0, 0);
      await server.cost.sample();
      return made!.packId;
    };

    // Create: PACKS packs of FILES files (pseudo-random: stored, not deflated).
    const packFiles = new Map<string, string[]>(); // pack → paths, in offset order
    const content = new Map<string, Buffer>();
    for (let p = 0; p < PACKS; p++) {
      const files: Record<string, Buffer> = {};
      for (let i = 0; i < FILES; i++) files[`p${p}/f${i}.bin`] = pseudoRandom(FILE_BYTES, p * 1000 + i + 1);
      for (const r of await alice.putSmall(files)) expect(r.result.status).toBe('applied');
      for (const [k, v] of Object.entries(files)) content.set(k, v);
      const id = await flush();
      const offsets = new Map<string, number>();
      for (const p of Object.keys(files)) offsets.set(p, (await packer.locate(sha(content.get(p)!)))!.offset);
      const paths = Object.keys(files).sort((a, b) => offsets.get(a)! - offsets.get(b)!);
      expect((await packer.locate(sha(content.get(paths[0]!)!)))!.packId).toBe(id);
      packFiles.set(id, paths);
    }
    const deadOf = new Map<string, { bytes: number; since: number }[]>();

    // An hour later: overwrite the first quarter (by offset) of each pack; the new versions
    // go to a new pack. The collector runs at once (dating the deaths) and keeps everything.
    await advance(start + HOUR);
    const over: Record<string, Buffer> = {};
    for (const [id, paths] of packFiles) {
      for (const path of paths.slice(0, FILES / 4)) {
        over[path] = Buffer.concat([Buffer.from(path), pseudoRandom(FILE_BYTES - path.length, path.length)]);
        deadOf.set(id, [
          ...(deadOf.get(id) ?? []),
          { bytes: (await packer.locate(sha(content.get(path)!)))!.length, since: now },
        ]);
      }
    }
    for (const r of await alice.putSmall(over)) expect(r.result.status).toBe('applied');
    // (Deaths are dated by the pass or by the marking a delete schedules, whichever first:
    // both at this virtual time.)
    expect((await server.packGc!()).repacked).toHaveLength(0);
    await flush();

    // Another hour: delete the second quarter. Half of every original pack is dead.
    await advance(start + 2 * HOUR);
    for (const [id, paths] of packFiles)
      for (const path of paths.slice(FILES / 4, FILES / 2)) {
        const [r] = await alice.ops({ op: 'delete', path });
        expect(r?.status).toBe('applied');
        deadOf.get(id)!.push({ bytes: (await packer.locate(sha(content.get(path)!)))!.length, since: now });
      }
    expect((await server.packGc!()).repacked).toHaveLength(0);

    // Coral's crossover per pack, from first principles: C_store(τ) = p_s Σ s_j (τ − t_j)
    // reaches C_clean = one ranged GET of the live half, one PUT, one DELETE (no transfer fee).
    const crossover = new Map<string, number>();
    const liveBytesOf = new Map<string, number>();
    for (const [id, paths] of packFiles) {
      const live: PackLocation[] = [];
      for (const p of paths.slice(FILES / 2)) live.push((await packer.locate(sha(content.get(p)!)))!);
      expect(coalescePackRanges(live)).toHaveLength(1); // adjacent: one Range GET
      const liveBytes = live.reduce((n, l) => n + l.length, 0);
      liveBytesOf.set(id, liveBytes);
      const cClean = cleanCost(prices, liveBytes, 1);
      expect(cClean).toBeCloseTo(requestUsd(1, 1, 1), 15);
      const d = deadOf.get(id)!;
      const D = d.reduce((n, e) => n + e.bytes, 0);
      crossover.set(id, (cClean / perByteMs + d.reduce((n, e) => n + e.bytes * e.since, 0)) / D);
      const cand = (await packer.gcCandidates()).find((c) => c.packId === id)!;
      expect(cand).toMatchObject({ deadBytes: D, liveBytes, liveRanges: 1 });
    }

    // The collector every virtual hour until every original pack is repacked.
    const repackedAt = new Map<string, number>();
    for (let hour = 3; hour < 24 * 29 && repackedAt.size < PACKS; hour++) {
      await advance(start + hour * HOUR);
      const pass = await server.packGc!();
      for (const [id, x] of crossover) {
        const done = pass.repacked.find((r) => r.packId === id);
        if (now < x) expect(done, `${id} repacked before its crossover at hour ${hour}`).toBeUndefined();
        else if (!repackedAt.has(id)) {
          expect(done, `${id} not repacked at hour ${hour}, past its crossover`).toBeDefined();
          expect(now - x).toBeLessThan(HOUR);
          repackedAt.set(id, now);
          held.delete(id);
          const [made] = await packer.stats(done!.into);
          expect(made!.deadBytes).toBe(0);
          held.set(done!.into, made!.size);
          expect(done!.rewrittenBytes).toBe(liveBytesOf.get(id));
          predictedRequestUsd += cleanCost(prices, liveBytesOf.get(id)!, 1);
        }
      }
      await server.cost.sample();
    }
    expect(repackedAt.size).toBe(PACKS);
    // The crossover is days away at these prices, not hours: GC waited for it.
    for (const t of repackedAt.values()) expect(t - start).toBeGreaterThan(24 * HOUR);

    // The month's bill after GC, measured by the ledger, against the model's prediction.
    await advance(start + 30 * 24 * HOUR - 1);
    const bill = await server.cost.bill(PROXY, now);
    const predicted = baseline + predictedStorageUsd + predictedRequestUsd;
    expect(Math.abs(bill.soFar.total - predicted) / predicted).toBeLessThan(0.01);

    // Metrics, and every live file still reads back right (from the fs tier and the packs).
    const text = await server.app.inject({ method: 'GET', url: '/metrics' }).then((r) => r.body);
    expect(text).toContain(`weft_pack_gc_repacks_total ${PACKS}`);
    expect(text).toContain(`weft_pack_gc_decisions_total{decision="repack"} ${PACKS}`);
    expect(text).toMatch(/weft_pack_gc_dead_bytes 0\b/);
    for (const [id, paths] of packFiles)
      for (const path of paths.slice(FILES / 2)) {
        const body = content.get(path)!;
        const loc = (await packer.locate(sha(body)))!;
        expect(loc.packId).not.toBe(id);
        expect(Buffer.from(await packer.read(loc)).equals(body)).toBe(true);
        expect((await alice.bytes(path)).equals(body)).toBe(true);
      }
    for (const [path, body] of Object.entries(over))
      expect((await alice.bytes(path)).equals(body)).toBe(true);
  });
});
