/**
 * The scaling rule of `weft-proxy cluster` (src/cluster/scale.ts; HyCloud Eq. 7–8) as a pure
 * function: it adds only when every active instance has been congested for the sustain
 * window, drains only when every one has been idle for it, stays within [min, max], and — the
 * hysteresis — under any steady load the instance count moves one way only (no add after a
 * drain, no drain after an add), whatever the thresholds, capacities and windows.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  congested,
  decideScale,
  drainTarget,
  idle,
  type ScaleMemory,
  type ScaleParams,
  type ScaleReading,
} from '../src/cluster/scale.ts';
import { LoadMeter } from '../src/cluster/load.ts';

const P: ScaleParams = {
  thetaCongested: 0.2,
  thetaIdle: 0.7,
  sustainMs: 3000,
  cooldownMs: 5000,
  min: 2,
  max: 4,
};

const r = (id: string, availableBps: number, measuredBps = 100, extra: Partial<ScaleReading> = {}) =>
  ({
    id,
    state: 'active',
    availableBps,
    measuredBps,
    activeTransfers: 0,
    startedMs: 0,
    ...extra,
  }) as ScaleReading;

/** Run the rule every second from t = 0 to `ms` on readings that may depend on time. */
function run(readings: (t: number) => ScaleReading[], ms: number, p = P) {
  let memory: ScaleMemory = {};
  const out: { t: number; action: string; id?: string }[] = [];
  for (let t = 0; t <= ms; t += 1000) {
    const d = decideScale(readings(t), memory, t, p);
    memory = d.memory;
    if (d.decision.action !== 'none')
      out.push({ t, action: d.decision.action, ...('id' in d.decision ? { id: d.decision.id } : {}) });
  }
  return out;
}

describe('scale decision', () => {
  it('addsOnlyWhenEveryInstanceIsCongestedForTheSustainWindow', () => {
    // One of three still has room: nothing, however long.
    expect(run(() => [r('a', 10), r('b', 20), r('c', 50)], 60_000)).toEqual([]);
    // All three at or below θ_c·BW_o (Eq. 7 holds with equality too): one add after 3 s.
    expect(run(() => [r('a', 10), r('b', 20), r('c', 5)], 3000)).toEqual([{ t: 3000, action: 'add' }]);
    expect(run(() => [r('a', 10), r('b', 20), r('c', 5)], 2000)).toEqual([]);
    // Congestion that lapses restarts the window.
    expect(run((t) => [r('a', 10), r('b', t === 2000 ? 90 : 10)], 4000)).toEqual([]);
    // Never above max.
    expect(run(() => [r('a', 0), r('b', 0), r('c', 0), r('d', 0)], 60_000)).toEqual([]);
  });

  it('drainsOnlyWhenEveryInstanceIsIdleAndPicksTheLowestBandwidthThenTheNewest', () => {
    expect(run(() => [r('a', 90), r('b', 90), r('c', 50)], 60_000)).toEqual([]);
    // Eq. 8 for all three: the one with the lowest BW_o goes.
    expect(run(() => [r('a', 95, 100), r('b', 45, 50), r('c', 100, 100)], 3000)).toEqual([
      { t: 3000, action: 'drain', id: 'b' },
    ]);
    // Equal BW_o: fewest transfers, then the newest.
    expect(
      drainTarget([
        r('a', 100, 100, { startedMs: 1 }),
        r('b', 100, 100, { startedMs: 3 }),
        r('c', 100, 100, { startedMs: 2, activeTransfers: 1 }),
      ])?.id,
    ).toBe('b');
    // Never below min; draining instances count for nothing.
    expect(run(() => [r('a', 100), r('b', 100)], 60_000)).toEqual([]);
    expect(run(() => [r('a', 100), r('b', 100), r('c', 0, 100, { state: 'draining' })], 60_000)).toEqual([]);
  });

  it('doesNotDrainWhenTheRestWouldBeTooBusy', () => {
    // Each of two at 30 % use is idle (θ_l = 0.7), but one alone would be at 60 %: above the
    // midpoint between the thresholds (share left 0.4 < 0.45), so both stay.
    const p = { ...P, min: 1 };
    expect(run(() => [r('a', 70), r('b', 70)], 60_000, p)).toEqual([]);
    expect(run(() => [r('a', 80), r('b', 80)], 3000, p)).toEqual([{ t: 3000, action: 'drain', id: 'b' }]);
  });

  it('replacesAMissingInstanceButNotWithinTheCooldown', () => {
    expect(run(() => [r('a', 50)], 6000)).toEqual([
      { t: 0, action: 'add' },
      { t: 5000, action: 'add' },
    ]);
  });

  it('neverFlapsUnderASteadyLoadAndStaysWithinBounds', () => {
    fc.assert(
      fc.property(
        fc.record({
          thetaCongested: fc.double({ min: 0, max: 0.9, noNaN: true }),
          gap: fc.oneof(
            fc.double({ min: 0.01, max: 0.4, noNaN: true }),
            fc.double({ min: 0.01, max: 1, noNaN: true }),
          ),
          sustainMs: fc.integer({ min: 0, max: 5000 }),
          cooldownMs: fc.integer({ min: 0, max: 10_000 }),
          min: fc.integer({ min: 1, max: 3 }),
          extra: fc.integer({ min: 0, max: 4 }),
          start: fc.integer({ min: 0, max: 6 }),
          capacity: fc.integer({ min: 1, max: 1000 }),
          /** The steady load, as a multiple of one instance's capacity. */
          load: fc.oneof(
            fc.double({ min: 0, max: 2, noNaN: true }),
            fc.double({ min: 0, max: 8, noNaN: true }),
          ),
        }),
        (g) => {
          const p: ScaleParams = {
            thetaCongested: g.thetaCongested,
            thetaIdle: Math.min(1, g.thetaCongested + g.gap),
            sustainMs: g.sustainMs,
            cooldownMs: g.cooldownMs,
            min: g.min,
            max: g.min + g.extra,
          };
          fc.pre(p.thetaCongested < p.thetaIdle);
          // A simulated cluster: equal capacities, the load spread evenly (steering balances it).
          let ids = Array.from({ length: Math.min(Math.max(g.start, 0), p.max) }, (_, i) => `i${i}`);
          let next = ids.length;
          let memory: ScaleMemory = {};
          const moves: string[] = [];
          for (let t = 0; t <= 120_000; t += 1000) {
            const per = ids.length ? (g.load * g.capacity) / ids.length : 0;
            const readings = ids.map((id, i) =>
              r(id, Math.max(0, g.capacity - per), g.capacity, { startedMs: i }),
            );
            const d = decideScale(readings, memory, t, p);
            memory = d.memory;
            const dec = d.decision;
            if (dec.action === 'add') {
              // Eq. 7 held for every instance, or the minimum was not met.
              expect(ids.length < p.min || readings.every((x) => congested(x, p))).toBe(true);
              ids = [...ids, `i${next++}`];
              moves.push('add');
            } else if (dec.action === 'drain') {
              expect(readings.every((x) => idle(x, p))).toBe(true);
              ids = ids.filter((id) => id !== dec.id);
              moves.push('drain');
            }
          }
          // Once at or above min, the count moves one way: below min it first climbs to it.
          const afterMin = moves.slice(Math.max(0, p.min - Math.min(g.start, p.max)));
          expect(afterMin.includes('add') && afterMin.includes('drain')).toBe(false);
          expect(ids.length).toBeGreaterThanOrEqual(p.min);
          expect(ids.length).toBeLessThanOrEqual(p.max);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('load figures (BW_o, BW_a)', () => {
  it('averagesClientBytesOverTheWindowAndMeasuresCapacityAsThePeak', () => {
    const m = new LoadMeter({ windowMs: 1000, minCapacityBps: 100 });
    // Fresh: the floor, all of it available.
    m.sample(0, 0);
    expect([m.measuredBps(), m.availableBps(), m.throughputBps()]).toEqual([100, 100, 0]);
    // 500 bytes a second for two seconds (samples every 250 ms): BW_o rises to what was moved.
    let total = 0;
    for (let t = 250; t <= 2000; t += 250) m.sample((total += 125), t);
    expect(m.throughputBps()).toBe(500);
    expect(m.measuredBps()).toBe(500);
    expect(m.availableBps()).toBe(0);
    // Quiet again: the window empties, BW_o stays at the peak.
    for (let t = 2250; t <= 3500; t += 250) m.sample(total, t);
    expect([m.throughputBps(), m.measuredBps(), m.availableBps()]).toEqual([0, 500, 500]);
  });

  it('usesADeclaredCapacityAsIs', () => {
    const m = new LoadMeter({ windowMs: 1000, capacityBps: 1000, minCapacityBps: 5000 });
    m.sample(0, 0);
    m.sample(600, 1000);
    expect([m.measuredBps(), m.throughputBps(), m.availableBps()]).toEqual([1000, 600, 400]);
    m.sample(5600, 2000);
    expect(m.availableBps()).toBe(0);
  });
});
