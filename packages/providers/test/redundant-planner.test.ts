import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  estimateSeconds,
  harmonicMean,
  place,
  planRead,
  planStripedRead,
  SLOW_FACTOR,
  type BackendStats,
} from '../src/redundant/planner.ts';

const backendArb = (id: string): fc.Arbitrary<BackendStats> =>
  fc.record({
    id: fc.constant(id),
    available: fc.constant(true),
    latencyMs: fc.array(fc.integer({ min: 1, max: 500 }), { minLength: 1, maxLength: 4 }),
    throughputBps: fc.array(fc.integer({ min: 1_000, max: 100_000_000 }), { minLength: 1, maxLength: 4 }),
    pricePerGbMonth: fc.double({ min: 0.001, max: 0.1, noNaN: true }),
  });

const setArb = fc
  .integer({ min: 3, max: 8 })
  .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => backendArb(`b${i}`))));

describe('redundant planner', () => {
  it('harmonic mean is pulled down by a slow sample', () => {
    expect(harmonicMean([100, 100])).toBe(100);
    expect(harmonicMean([100, 1])).toBeCloseTo(200 / 101);
    expect(harmonicMean([])).toBe(0);
  });

  it('bad layouts are refused', () => {
    const one: BackendStats = {
      id: 'a',
      available: true,
      latencyMs: [1],
      throughputBps: [1e6],
      pricePerGbMonth: 0.02,
    };
    expect(() => place(10, [one], { thresholdBytes: 100, k: 1, m: 0 })).toThrow(/2 replicas need 2 backends/);
    expect(() => place(1000, [one], { thresholdBytes: 100, k: 3, m: 2 })).toThrow(/RS\(3, 2\) needs 5/);
    expect(() => place(1000, [one], { thresholdBytes: 100, k: 0, m: 2 })).toThrow(/bad RS/);
  });

  it('placement uses distinct backends and survives any m (or r-1) failures', () => {
    fc.assert(
      fc.property(
        setArb,
        fc.integer({ min: 0, max: 1 << 24 }),
        fc.integer({ min: 1, max: 3 }),
        (set, size, mWanted) => {
          const m = Math.min(mWanted, set.length - 1);
          const k = Math.min(3, set.length - m);
          const p = place(size, set, { thresholdBytes: 1 << 20, k, m });
          expect(new Set(p.backends).size).toBe(p.backends.length);
          const need = p.kind === 'striped' ? p.k : 1;
          const tolerate = p.kind === 'striped' ? p.m : p.backends.length - 1;
          expect(p.backends.length).toBe(p.kind === 'striped' ? k + m : 2);
          // every subset of `tolerate` failed holders still leaves a readable plan
          const holders = p.backends.map((id) => set.find((b) => b.id === id)!);
          for (const down of subsets(holders.length, tolerate)) {
            const h = holders.map((b, i) => (down.includes(i) ? { ...b, available: false } : b));
            const plan = planRead(h, need, 1 << 16);
            expect(plan.primary.length).toBe(need);
            for (const i of plan.primary) expect(down).not.toContain(i);
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it('the planner picks the fastest k available, spares are the rest', () => {
    fc.assert(
      fc.property(
        setArb,
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 1 << 22 }),
        (set, k, bytes) => {
          fc.pre(k <= set.length);
          const plan = planRead(set, k, bytes);
          const t = (i: number): number => estimateSeconds(set[i]!, bytes);
          const slowestChosen = Math.max(...plan.primary.map(t));
          for (const s of plan.spares) expect(t(s)).toBeGreaterThanOrEqual(slowestChosen);
          expect(new Set([...plan.primary, ...plan.spares]).size).toBe(set.length);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('a striped read starts with the k data fragments when all are up and none is slow, else with every available one', () => {
    fc.assert(
      fc.property(
        setArb,
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 1 << 22 }),
        fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }),
        fc.integer({ min: 0, max: 1000 }),
        (set, k, bytes, down, seed) => {
          fc.pre(k < set.length);
          const holders = set.map((b, i) => ({ ...b, available: !down[i] || i === 0 }));
          // Any assignment of shard slots to holders (a rotation).
          const slots = holders.map((_, i) => (i + seed) % holders.length);
          const t = (i: number): number => estimateSeconds(holders[i]!, bytes);
          const avail = holders.map((_, i) => i).filter((i) => Number.isFinite(t(i)));
          fc.pre(avail.length >= k);
          const plan = planStripedRead(holders, slots, k, bytes);
          expect(new Set([...plan.primary, ...plan.spares])).toEqual(new Set(avail));
          const kth = [...avail.map(t)].sort((a, b) => a - b)[k - 1]!;
          const data = avail.filter((i) => slots[i]! < k);
          const dataFirst = data.length === k && data.every((i) => t(i) <= SLOW_FACTOR * kth);
          expect(plan.dataFirst).toBe(dataFirst);
          if (dataFirst) {
            expect(new Set(plan.primary)).toEqual(new Set(data));
            expect(plan.spares.every((i) => slots[i]! >= k)).toBe(true);
          } else {
            // The fastest-k choice: every available fragment, fastest first.
            expect(plan.spares).toEqual([]);
            expect(plan.primary.map(t)).toEqual([...plan.primary.map(t)].sort((a, b) => a - b));
          }
          for (const list of [plan.primary, plan.spares])
            for (let j = 1; j < list.length; j++) expect(t(list[j]!)).toBeGreaterThanOrEqual(t(list[j - 1]!));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('data first: parity comes in when a data backend is down or slow, not when it is a little slower', () => {
    const b = (id: string, bps: number, available = true): BackendStats => ({
      id,
      available,
      latencyMs: [5],
      throughputBps: [bps],
      pricePerGbMonth: 0.02,
    });
    const slots = [0, 1, 2, 3, 4];
    const MB = 1 << 20;
    const alike = [b('d0', 1e8), b('d1', 1e8), b('d2', 1e8), b('p0', 1e8), b('p1', 1e8)];
    expect(planStripedRead(alike, slots, 3, 8 * MB)).toMatchObject({ dataFirst: true, spares: [3, 4] });
    expect(new Set(planStripedRead(alike, slots, 3, 8 * MB).primary)).toEqual(new Set([0, 1, 2]));
    const littleSlower = [b('d0', 1e8), b('d1', 0.9e8), b('d2', 1e8), b('p0', 1e8), b('p1', 1e8)];
    expect(planStripedRead(littleSlower, slots, 3, 8 * MB).dataFirst).toBe(true);
    const slow = [b('d0', 1e8), b('d1', 1e7), b('d2', 1e8), b('p0', 1e8), b('p1', 1e8)];
    expect(planStripedRead(slow, slots, 3, 8 * MB)).toEqual({
      dataFirst: false,
      primary: [0, 2, 3, 4, 1],
      spares: [],
    });
    const down = [b('d0', 1e8), b('d1', 1e8, false), b('d2', 1e8), b('p0', 1e8), b('p1', 1e8)];
    expect(planStripedRead(down, slots, 3, 8 * MB)).toEqual({
      dataFirst: false,
      primary: [0, 2, 3, 4],
      spares: [],
    });
    expect(() => planStripedRead(down, slots, 5, 8 * MB)).toThrow(/need 5 fragments, only 4/);
  });

  it('too few available backends is a clear error', () => {
    const b = (id: string, available: boolean): BackendStats => ({
      id,
      available,
      latencyMs: [5],
      throughputBps: [1e6],
      pricePerGbMonth: 0.02,
    });
    expect(() => planRead([b('a', true), b('b', false), b('c', false)], 2, 10)).toThrow(
      /need 2 fragments, only 1/,
    );
  });
});

function subsets(n: number, size: number): number[][] {
  if (size === 0) return [[]];
  const out: number[][] = [];
  const rec = (start: number, acc: number[]): void => {
    if (acc.length === size) return void out.push([...acc]);
    for (let i = start; i < n; i++) rec(i + 1, [...acc, i]);
  };
  rec(0, []);
  return out;
}
