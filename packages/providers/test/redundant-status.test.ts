/**
 * The redundant tier's status and risk report (issue #17, src/redundant/status.ts): the
 * pure `assessRisk` against a brute-force count for random holdings (property test), and
 * `tierStatus` on five memory backends through a sustained outage: states available →
 * down since the failure → degraded while its log waits → available after the replay, and
 * what one more failure would do with one and with two backends down.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryProvider } from '../src/adapters/memory.ts';
import {
  assessRisk,
  RedundantProvider,
  scrub,
  tierStatus,
  type ObjectHolding,
} from '../src/redundant/index.ts';
import { OutageProvider } from '../src/testing/outage.ts';

const KiB = 1024;
const open: RedundantProvider[] = [];
afterEach(async () => {
  for (const t of open.splice(0)) await t.close().catch(() => undefined);
});

const IDS = ['b0', 'b1', 'b2', 'b3', 'b4'];

/** Good holders of `o` on backends in `up`. */
function avail(o: ObjectHolding, up: ReadonlySet<string>): number {
  return o.holders.filter((h) => h.ok && up.has(h.backend)).length;
}

describe('assessRisk', () => {
  it('countsEveryObjectOnceAndMatchesABruteForceCountForEveryBackend', () => {
    const holding = fc
      .record({
        need: fc.integer({ min: 1, max: 3 }),
        extra: fc.integer({ min: 0, max: 2 }),
        start: fc.integer({ min: 0, max: 4 }),
        ok: fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }),
        weight: fc.integer({ min: 1, max: 3 }),
      })
      .map(({ need, extra, start, ok, weight }): ObjectHolding => {
        const n = Math.min(5, need + extra);
        return {
          need,
          weight,
          holders: Array.from({ length: n }, (_, i) => ({ backend: IDS[(start + i) % 5]!, ok: ok[i]! })),
        };
      });
    fc.assert(
      fc.property(fc.array(holding, { maxLength: 30 }), fc.subarray(IDS), (objects, upList) => {
        const up = new Set(upList);
        const r = assessRisk(objects, up, IDS);
        const total = objects.reduce((a, o) => a + o.weight!, 0);
        expect(r.objects).toBe(total);
        expect(r.whole + r.reduced + r.atMinimum + r.unreadable).toBe(total);
        expect(Object.keys(r.ifFails).sort()).toEqual([...up].sort());
        for (const b of up) {
          const after = new Set([...up].filter((x) => x !== b));
          let lost = 0;
          let minimum = 0;
          for (const o of objects) {
            if (avail(o, up) < o.need) continue;
            if (avail(o, after) < o.need) lost += o.weight!;
            else if (avail(o, after) === o.need) minimum += o.weight!;
          }
          expect(r.ifFails[b]).toEqual({ unreadable: lost, atMinimum: minimum });
        }
      }),
      { numRuns: 300 },
    );
  });

  it('classesAnObjectByItsGoodHoldersOnBackendsThatAreUp', () => {
    const o = (need: number, ...holders: [string, boolean][]): ObjectHolding => ({
      need,
      holders: holders.map(([backend, ok]) => ({ backend, ok })),
    });
    const r = assessRisk(
      [
        o(3, ['b0', true], ['b1', true], ['b2', true], ['b4', true]), // whole
        o(3, ['b0', true], ['b1', true], ['b2', true], ['b3', false], ['b4', true]), // reduced (bad)
        o(1, ['b0', true], ['b3', true]), // at minimum (b3 down)
        o(1, ['b3', true], ['b4', false]), // unreadable
      ],
      new Set(['b0', 'b1', 'b2', 'b4']),
      IDS,
    );
    expect(r).toMatchObject({ objects: 4, whole: 1, reduced: 1, atMinimum: 1, unreadable: 1 });
    expect(r.ifFails.b0).toEqual({ unreadable: 1, atMinimum: 2 });
    // The replica already at minimum stays so: it counts too.
    expect(r.ifFails.b4).toEqual({ unreadable: 0, atMinimum: 3 });
    expect(r.ifFails.b3).toBeUndefined();
  });
});

describe('tierStatus', () => {
  async function rig(): Promise<{ tier: RedundantProvider; outage: OutageProvider[] }> {
    const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-redundant-status-'));
    const outage = IDS.map(() => new OutageProvider(new MemoryProvider()));
    // Without onBackendUp: a probe marks a backend up and leaves its log to the scrub.
    const tier = new RedundantProvider({
      backends: outage.map((p, i) => ({ id: IDS[i]!, provider: p, pricePerGbMonth: i / 100 })),
      dir,
      thresholdBytes: 64 * KiB,
      maxShardBytes: 64 * KiB,
      hedgeAfterMs: 50,
      probeIntervalMs: 0,
    });
    open.push(tier);
    return { tier, outage };
  }

  it('reportsStatesSinceWhenAndWhatOneMoreFailureWouldDo', async () => {
    const { tier, outage } = await rig();
    await tier.write('small-1', Buffer.from('one'));
    await tier.write('large-1', Buffer.alloc(200 * KiB, 7));
    let s = await tierStatus(tier);
    expect(s.backends.map((b) => b.state)).toEqual([
      'available',
      'available',
      'available',
      'available',
      'available',
    ]);
    expect(s.backends.map((b) => b.pricePerGbMonth)).toEqual([0, 0.01, 0.02, 0.03, 0.04]);
    expect(new Set(s.backends.map((b) => b.class))).toEqual(new Set(['performance', 'cost']));
    expect(s.backends.reduce((a, b) => a + b.blobs, 0)).toBe(2 + 5);
    expect(s.risk).toMatchObject({ objects: 2, whole: 2, atMinimum: 0, unreadable: 0 });
    // RS(3, 2) and two replicas: no single failure loses anything.
    for (const id of IDS) expect(s.risk.ifFails[id]!.unreadable).toBe(0);

    // The small file's first replica holder goes down and a write fails on it.
    const replicaHolder = (await tier.store.locations((await tier.store.objectOf('small-1'))!))[0]!.backend;
    const down = IDS.indexOf(replicaHolder);
    outage[down]!.goDown();
    const before = Date.now();
    await tier.write('large-2', Buffer.alloc(200 * KiB, 9));
    s = await tierStatus(tier);
    const d = s.backends.find((b) => b.id === replicaHolder)!;
    expect(d.state).toBe('down');
    expect(d.since).toBeGreaterThanOrEqual(before);
    expect(d.outageLog).toBe(1);
    expect(s.outageLog).toBe(1);
    expect(s.risk.ifFails[replicaHolder]).toBeUndefined();
    // The small file is down to one replica: losing its other holder loses it.
    const other = (await tier.store.locations((await tier.store.objectOf('small-1'))!))[1]!.backend;
    expect(s.risk.atMinimum).toBe(1);
    expect(s.risk.ifFails[other]!.unreadable).toBe(1);
    // The striped files keep a spare with one backend down: after one more, at minimum.
    for (const id of IDS.filter((x) => x !== replicaHolder))
      expect(s.risk.ifFails[id]!.atMinimum).toBeGreaterThanOrEqual(2);

    // Back up: degraded (since its first missed write) until its log is replayed.
    outage[down]!.restore();
    await tier.probe(replicaHolder); // this tier replays only in the scrub (no onBackendUp)
    s = await tierStatus(tier);
    expect(s.backends.find((b) => b.id === replicaHolder)).toMatchObject({ state: 'degraded', outageLog: 1 });
    expect(s.backends.find((b) => b.id === replicaHolder)!.since).toBeGreaterThanOrEqual(before);
    const report = await scrub(tier);
    expect(report.unrepairable).toBe(0);
    s = await tierStatus(tier);
    expect(s.backends.every((b) => b.state === 'available')).toBe(true);
    expect(s.risk).toMatchObject({ objects: 3, whole: 3, unreadable: 0 });

    // A blob found bad (by a read) makes its backend degraded until the scrub repairs it.
    const loc = (await tier.store.locations((await tier.store.objectOf('large-1'))!))[0]!;
    await tier.store.setLocation(loc.object_id, loc.slot, { state: 'bad' });
    s = await tierStatus(tier);
    expect(s.backends.find((b) => b.id === loc.backend)).toMatchObject({ state: 'degraded', bad: 1 });
    expect(s.backends.find((b) => b.id === loc.backend)!.since).toBeUndefined();
    expect(s.risk).toMatchObject({ whole: 2, reduced: 1 });
    await scrub(tier);
    expect((await tierStatus(tier)).backends.find((b) => b.id === loc.backend)!.state).toBe('available');
  });

  it('showsABackendThatHoldsPlacementButIsNotInTheSetAsDown', async () => {
    const { tier } = await rig();
    await tier.write('large', Buffer.alloc(200 * KiB, 3));
    await tier.dropBackend('b4'); // as after a restart with b4 left out of the configuration
    const s = await tierStatus(tier);
    expect(s.backends.map((b) => b.id)).toEqual(['b0', 'b1', 'b2', 'b3', 'b4']);
    expect(s.backends[4]).toMatchObject({
      state: 'down',
      blobs: 1,
      name: 'b4 (not in the configured backends)',
    });
    expect(s.risk).toMatchObject({ objects: 1, reduced: 1 });
    expect(s.risk.ifFails.b4).toBeUndefined();
  });

  it('countsOnlyTheWeightedObjectsWhenGivenWeights', async () => {
    const { tier } = await rig();
    await tier.write('a', Buffer.from('a'));
    await tier.write('b', Buffer.alloc(100 * KiB, 1));
    const s = await tierStatus(tier, new Map([[(await tier.store.objectOf('b'))!, 3]]));
    expect(s.risk.objects).toBe(3);
    expect(s.risk.whole).toBe(3);
    // The backends' own figures still cover every blob.
    expect(s.backends.reduce((a, b) => a + b.blobs, 0)).toBe(2 + 5);
  });
});
