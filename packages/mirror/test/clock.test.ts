/**
 * One injected clock drives every time the engine reads: here the clock stands still
 * unless the test moves it, while real time passes as it will. Outage probes, folders set
 * aside for removal and the drain budget follow the injected clock, never the system's.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryProvider, TransientError } from '@weft/providers';
import { FaultInjectingProvider } from '@weft/providers/testing';
import { MirrorEngine, type MirrorEngineOptions } from '../src/engine.ts';
import { migrate } from '../src/store.ts';
import { readText, text } from './helpers.ts';

const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

const WRITES = new Set(['write', 'remove', 'mkdir', 'move', 'copy']);
const START = Date.UTC(2030, 0, 1); // far from the system clock: mixing the two shows

function setup(options: Partial<MirrorEngineOptions> = {}) {
  const db = new Database(':memory:');
  open.push(db);
  migrate(db);
  const clock = { t: START };
  const ann = new MemoryProvider({ name: 'ann' });
  const benMem = new MemoryProvider({ name: 'ben' });
  const fault: { down?: boolean; retryAfterMs?: number; onWrite?: () => void } = {};
  const ben = new FaultInjectingProvider(benMem, {
    before(info) {
      if (!WRITES.has(info.op)) return undefined;
      fault.onWrite?.();
      return fault.down ? new TransientError('injected: 503', fault.retryAfterMs) : undefined;
    },
  });
  const engine = new MirrorEngine({
    shareId: 's',
    db,
    now: () => clock.t,
    probeBackoffMs: { first: 60_000, max: 600_000, jitter: 'none' },
    ...options,
    replicas: [
      { id: 'r0', member: 'ann', provider: ann, root: '', wrap: { retry: { maxAttempts: 1 } } },
      { id: 'r1', member: 'ben', provider: ben, root: '', wrap: { retry: { maxAttempts: 1 } } },
    ],
  });
  return { clock, ann, ben: benMem, fault, engine };
}

describe('the engine reads time from its injected clock only', () => {
  it('an unavailable replica is probed when the injected clock reaches its next try', async () => {
    const s = setup();
    await s.ann.write('a.txt', text('a1'));
    s.fault.down = true;
    await s.engine.step(); // ingest, the write to ben fails: unavailable, tried again next round
    expect((await s.engine.replicaStatus())[1]).toMatchObject({
      state: 'unavailable',
      sinceMs: START,
      nextProbeMs: START,
    });
    await s.engine.step(); // the probe fails: next try a minute later by the clock
    expect((await s.engine.replicaStatus())[1]).toMatchObject({
      state: 'unavailable',
      sinceMs: START,
      nextProbeMs: START + 60_000,
    });

    s.fault.down = false;
    for (let i = 0; i < 3; i++) await s.engine.step(); // the clock has not moved: no probe
    expect((await s.engine.replicaStatus())[1]).toMatchObject({ state: 'unavailable', waiting: 1 });
    await expect(readText(s.ben, 'a.txt')).rejects.toThrow();

    s.clock.t += 59_999;
    await s.engine.step();
    expect((await s.engine.replicaStatus())[1]).toMatchObject({ state: 'unavailable' });
    s.clock.t += 1;
    await s.engine.step(); // due: probed, through, its outage log replays
    expect((await s.engine.replicaStatus())[1]).toMatchObject({ state: 'available', waiting: 0 });
    expect(await readText(s.ben, 'a.txt')).toBe('a1');
  });

  it('a folder set aside for removal is removed once the injected clock has passed parkSettleMs', async () => {
    const s = setup({ parkSettleMs: 5000 });
    await s.ann.write('d/x.txt', text('x'));
    await s.engine.quiesce();
    expect((await s.ben.stat('d')).kind).toBe('dir');

    await s.ann.remove('d');
    await s.engine.step();
    const hidden = async (): Promise<string[]> => {
      const names: string[] = [];
      for await (const e of s.ben.list('')) names.push(e.path);
      return names.filter((n) => n.startsWith('.weft-removing-'));
    };
    expect(await hidden()).toHaveLength(1); // set aside, not yet removed
    for (let i = 0; i < 3; i++) await s.engine.step();
    expect(await hidden()).toHaveLength(1); // the clock stands still: still set aside

    s.clock.t += 5000;
    await s.engine.step();
    expect(await hidden()).toEqual([]);
  });

  it('one round stops starting entries when the injected clock has passed drainBudgetMs', async () => {
    const s = setup({ concurrency: 1, drainBudgetMs: 1000 });
    for (const n of ['a', 'b', 'c', 'd']) await s.ann.write(`${n}.txt`, text(n));
    // The clock stands still: the whole backlog goes in one round, however long it takes.
    await s.engine.step();
    expect(await s.engine.pendingCount()).toBe(0);

    // Each write to ben moves the clock by a second: one entry per round.
    s.fault.onWrite = () => {
      s.clock.t += 1000;
    };
    for (const n of ['e', 'f', 'g']) await s.ann.write(`${n}.txt`, text(n));
    await s.engine.step();
    expect(await s.engine.pendingCount()).toBe(2);
    await s.engine.step();
    expect(await s.engine.pendingCount()).toBe(1);
    await s.engine.quiesce();
    expect(await readText(s.ben, 'g.txt')).toBe('g');
  });
});

describe("an unavailable replica is probed on Weft's one retry policy", () => {
  /** Fail the write to ben at every probe; the waits between probes, by the injected clock. */
  async function waits(s: ReturnType<typeof setup>, probes: number): Promise<number[]> {
    await s.ann.write('a.txt', text('a1'));
    s.fault.down = true;
    const out: number[] = [];
    for (let i = 0; i < probes; i++) {
      await s.engine.step();
      const next = (await s.engine.replicaStatus())[1]?.nextProbeMs ?? Number.NaN;
      out.push(next - s.clock.t);
      s.clock.t = next; // the probe is due: the next step tries ben again
    }
    return out;
  }

  it('waits grow exponentially with equal jitter drawn from the injected random, up to the cap', async () => {
    const s = setup({ probeBackoffMs: { first: 60_000, max: 600_000 }, random: () => 0.5 });
    // The first failure is tried at the next round; then ceilings 60 s, 120 s, … 600 s,
    // each wait drawn in [ceiling/2, ceiling): 0.5 → three quarters of the ceiling.
    expect(await waits(s, 7)).toEqual([0, 45_000, 90_000, 180_000, 360_000, 450_000, 450_000]);
    s.fault.down = false;
    await s.engine.step();
    expect((await s.engine.replicaStatus())[1]).toMatchObject({ state: 'available', waiting: 0 });
  });

  it('a Retry-After from the cloud (TransientError.retryAfterMs) sets the next probe, capped at max', async () => {
    const s = setup({ random: () => 0 });
    s.fault.retryAfterMs = 90_000;
    // Even the first failure, which would be tried at the next round, waits what the cloud asked.
    expect(await waits(s, 3)).toEqual([90_000, 90_000, 90_000]);
    s.fault.retryAfterMs = 3_600_000;
    await s.engine.step();
    expect((await s.engine.replicaStatus())[1]?.nextProbeMs).toBe(s.clock.t + 600_000);
  });
});
