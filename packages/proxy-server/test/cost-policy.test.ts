import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { computeBill, monthOf, type Usage } from '../src/cost/model.ts';
import { cleanCost, deadSums, fsCopyDecision, gcDecision, packTargetSize } from '../src/cost/policy.ts';
import { CostConfig, PRICE_TABLES, resolvePrices } from '../src/cost/prices.ts';

const S3 = resolvePrices(CostConfig.parse({})).objects;
const EFS = resolvePrices(CostConfig.parse({})).fs;
const MiB = 1024 * 1024;
const HOUR = 3600 * 1000;

describe('cost policy: garbage collection (Coral Theorem 1)', () => {
  it('repacksAtTheCrossoverAndNotBefore', () => {
    // 10 MiB live in 3 ranges, 10 MiB dead since t0 = 0 on S3 Standard. Worked by hand:
    // C_clean = (3 GETs × $0.0004 + 1 PUT × $0.005) / 1000 = $6.2e-6 (transfer in-region free);
    // the dead bytes cost 10/1024 GB × $0.023 per 730 h, so C_store reaches C_clean after
    // 6.2e-6 / (0.023 × 10/1024) × 730 h = 20.15 h.
    const pack = {
      packId: 'p',
      liveBytes: 10 * MiB,
      liveRanges: 3,
      ...deadSums([{ bytes: 10 * MiB, sinceMs: 0 }]),
    };
    const expectedMs = (6.2e-6 / ((0.023 * 10) / 1024)) * 730 * HOUR;
    const d = gcDecision(S3, pack, 0);
    expect(d.cClean).toBeCloseTo(6.2e-6, 12);
    expect(d.crossoverMs).toBeCloseTo(expectedMs, -1);
    expect(gcDecision(S3, pack, expectedMs - 60_000).repack).toBe(false);
    expect(gcDecision(S3, pack, expectedMs + 60_000).repack).toBe(true);
    const at = gcDecision(S3, pack, d.crossoverMs!);
    expect(at.repack).toBe(true);
    expect(at.cStore).toBeCloseTo(at.cClean, 15);
  });

  it('waitsLongerWhenLessIsDeadAndTheLaterDeathsCountFromTheirOwnTime', () => {
    const one = deadSums([{ bytes: MiB, sinceMs: 0 }]);
    const two = deadSums([
      { bytes: MiB, sinceMs: 0 },
      { bytes: MiB, sinceMs: 10 * HOUR },
    ]);
    const a = gcDecision(S3, { packId: 'a', liveBytes: MiB, liveRanges: 1, ...one }, 0).crossoverMs!;
    const b = gcDecision(S3, { packId: 'b', liveBytes: MiB, liveRanges: 1, ...two }, 0).crossoverMs!;
    expect(b).toBeLessThan(a);
    // Two MiB dead from the average of their deaths (5 h) reach C_clean in half the time one MiB does.
    expect(b).toBeCloseTo(5 * HOUR + a / 2, -1);
  });

  it('deletesAPackWithNothingLiveAtOnce', () => {
    const d = gcDecision(
      S3,
      { packId: 'x', liveBytes: 0, liveRanges: 0, ...deadSums([{ bytes: 5, sinceMs: 7 }]) },
      7,
    );
    expect(d).toMatchObject({ repack: true, cClean: 0, crossoverMs: 7 });
  });

  it('neverRepacksWithoutDeadBytesOrOnAFreeStore', () => {
    const none = { packId: 'n', liveBytes: MiB, liveRanges: 1, deadBytes: 0, deadByteSinceMs: 0 };
    expect(gcDecision(S3, none, 1e15)).toMatchObject({ repack: false, crossoverMs: null });
    const local = resolvePrices(CostConfig.parse({ tiers: { objects: 'local' } })).objects;
    const paidClean = { ...local, getPer1000: 1 };
    const dead = { ...none, ...deadSums([{ bytes: MiB, sinceMs: 0 }]) };
    expect(gcDecision(paidClean, dead, 1e15).repack).toBe(false);
    expect(() => gcDecision(S3, { ...none, liveBytes: -1 }, 0)).toThrow(RangeError);
  });

  it('decidesExactlyAtTheCrossoverForAnyPack', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1 << 30 }),
        fc.integer({ min: 1, max: 50 }),
        fc.array(
          fc.record({
            bytes: fc.integer({ min: 1, max: 1 << 26 }),
            sinceMs: fc.integer({ min: 0, max: 1e9 }),
          }),
          {
            minLength: 1,
            maxLength: 8,
          },
        ),
        (liveBytes, liveRanges, dead) => {
          const pack = { packId: 'q', liveBytes, liveRanges, ...deadSums(dead) };
          const t = gcDecision(S3, pack, 0).crossoverMs!;
          const before = gcDecision(S3, pack, t * (1 - 1e-9) - 1);
          const after = gcDecision(S3, pack, t * (1 + 1e-9) + 1);
          expect(before.repack).toBe(false);
          expect(before.cStore).toBeLessThan(before.cClean);
          expect(after.repack).toBe(true);
          expect(after.cStore).toBeGreaterThanOrEqual(after.cClean);
        },
      ),
    );
  });

  it('countsTransferAndRetrievalWhenTheCleanerPaysForThem', () => {
    const ia = resolvePrices(CostConfig.parse({ tiers: { objects: 's3-ia' } })).objects;
    // One GiB live on S3-IA: retrieval $0.01, PUT $0.01/1000, GET $0.001/1000.
    expect(cleanCost(ia, 1024 * MiB, 1)).toBeCloseTo(0.01 + 0.00001 + 0.000001, 12);
  });
});

describe('cost policy: the filesystem-tier copy and the pack size', () => {
  it('dropsAColdCopyAndKeepsAHotOne', () => {
    // 4 KiB on EFS: $0.3 × 4 KiB/GiB ≈ $1.1e-6 a month; a Range GET of it costs $4e-7.
    const cold = fsCopyDecision(EFS, S3, { size: 4096, readsPerMonth: 1 });
    expect(cold.keep).toBe(false);
    const hot = fsCopyDecision(EFS, S3, { size: 4096, readsPerMonth: 1000 });
    expect(hot.keep).toBe(true);
    expect(hot.keepCost).toBeLessThan(hot.dropCost);
    expect(fsCopyDecision(EFS, S3, { size: 4096, readsPerMonth: 0 }).keep).toBe(false);
    expect(() => fsCopyDecision(EFS, S3, { size: -1, readsPerMonth: 0 })).toThrow(RangeError);
  });

  it('suggestsAPackWhosePutCostsOnePercentOfAMonthOfItsStorage', () => {
    // $0.005/1000 / (1 % × $0.023 per GiB-month) = 0.021739 GiB = 23,342,214 bytes, to 4 KiB.
    expect(packTargetSize(S3)).toBe(Math.ceil(((0.000005 / (0.01 * 0.023)) * 2 ** 30) / 4096) * 4096);
    expect(packTargetSize(S3, { putShare: 0.1 })).toBe(4 * MiB);
    expect(packTargetSize(S3, { putShare: 0.0001 })).toBe(128 * MiB);
    expect(packTargetSize({ ...PRICE_TABLES.local })).toBe(4 * MiB);
  });
});

describe('cost model: the bill', () => {
  const zero = {
    put: { requests: 0, bytes: 0 },
    get: { requests: 0, bytes: 0 },
    delete: { requests: 0, bytes: 0 },
  };

  it('billsStorageRequestsAndEgressSoFarAndProjectsToTheMonthEnd', () => {
    const start = Date.UTC(2026, 10, 1); // November: 30 days
    const now = start + 15 * 24 * HOUR; // half way
    const GiB = 2 ** 30;
    const usage: Usage = {
      tiers: {
        // 1 GiB held on S3 for the whole half month; 1,000 PUTs, 10,000 GETs.
        objects: {
          byteMs: GiB * 15 * 24 * HOUR,
          bytesNow: GiB,
          requests: { ...zero, put: { requests: 1000, bytes: GiB }, get: { requests: 10_000, bytes: 0 } },
        },
        fs: { byteMs: 0, bytesNow: 0, requests: zero },
      },
      egressBytes: GiB,
    };
    const bill = computeBill(usage, { fs: EFS, objects: S3 }, now);
    expect(bill.month).toBe('2026-11');
    expect(bill.elapsed).toBeCloseTo(0.5, 12);
    const storage = (0.023 * 360) / 730;
    expect(bill.soFar.storage).toBeCloseTo(storage, 12);
    expect(bill.soFar.requests).toBeCloseTo(0.005 + 0.004, 12);
    expect(bill.soFar.egress).toBeCloseTo(0.09, 12);
    expect(bill.soFar.total).toBeCloseTo(storage + 0.009 + 0.09, 12);
    expect(bill.projected.storage).toBeCloseTo(2 * storage, 12);
    expect(bill.projected.requests).toBeCloseTo(0.018, 12);
    expect(bill.projected.egress).toBeCloseTo(0.18, 12);
    expect(monthOf(Date.UTC(2026, 11, 31, 23, 59)).month).toBe('2026-12');
  });

  it('takesOperatorOverridesAndRefusesUnknownTables', () => {
    const p = resolvePrices(CostConfig.parse({ prices: { 's3-standard': { storagePerGbMonth: 0.021 } } }));
    expect(p.objects.storagePerGbMonth).toBe(0.021);
    expect(p.objects.putPer1000).toBe(0.005);
    expect(() => CostConfig.parse({ prices: { s4: { storagePerGbMonth: 1 } } })).toThrow(
      /price table is one of/,
    );
    expect(() => CostConfig.parse({ prices: { 's3-standard': { storagePerGbMonth: -1 } } })).toThrow();
    expect(() => CostConfig.parse({ tiers: { fs: 'floppy' } })).toThrow();
  });
});
