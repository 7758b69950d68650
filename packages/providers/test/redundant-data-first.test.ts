/**
 * A striped read with every data fragment up and none slow reads the k data fragments only
 * and decodes nothing (issue #17: taking parity shards as readily as data shards cost an RS
 * decode of every stripe, ≈ 9 % of an all-up read's CPU). A data fragment down or slow
 * brings the parity ones in (HyCloud Eq. 3–5: the fastest k). Backends are memory providers
 * that count the range reads they serve.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { MemoryProvider } from '../src/adapters/memory.ts';
import { collect } from '../src/body.ts';
import type { ReadOptions } from '../src/provider.ts';
import { OutageProvider } from '../src/testing/index.ts';
import { type CallInfo, ForwardingProvider } from '../src/wrappers/forwarding.ts';
import { memoryTier } from './redundant-memory-rig.ts';

const KiB = 1024;

class ReadCounting extends ForwardingProvider {
  reads = 0;
  /** Each range read waits this long first (a slow link). */
  delayMs = 0;
  protected call<T>(_info: CallInfo, fn: () => Promise<T>): Promise<T> {
    return fn();
  }
  protected override async openRead(path: string, o: ReadOptions): Promise<AsyncIterable<Uint8Array>> {
    this.reads += 1;
    if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
    return this.inner.read(path, o);
  }
}

async function setup() {
  const counting = [0, 1, 2, 3, 4].map(() => new ReadCounting(new MemoryProvider()));
  const outage = counting.map((c) => new OutageProvider(c));
  const { tier } = await memoryTier('weft-redundant-data-first-', outage);
  const data = randomBytes(3 * 16 * KiB * 59 + 77); // 60 stripes
  await tier.write('big.bin', data);
  const locs = await tier.store.locations((await tier.store.objectOf('big.bin'))!);
  const at = (slot: number): number => Number(locs.find((l) => l.slot === slot)!.backend.slice(1));
  /** Every backend measured alike (1 ms, 100 MB/s), then `slow` at `factor` times the time. */
  const measure = (slow?: number, factor = 1): void => {
    for (let i = 0; i < 5; i++)
      for (let n = 0; n < 16; n++) {
        tier.recordTransfer(`b${i}`, 100, 1);
        tier.recordTransfer(`b${i}`, 1 << 20, i === slow ? 10 * factor : 10);
      }
  };
  const reads = (): number[] => counting.map((c) => c.reads);
  const rs = await tier.codec(3, 2);
  const decode = vi.spyOn(rs, 'reconstruct');
  const readAll = async (): Promise<{ parityReads: number; dataReads: number; decodes: number }> => {
    const before = reads();
    decode.mockClear();
    expect(Buffer.compare(await collect(await tier.read('big.bin')), data)).toBe(0);
    const after = reads();
    const delta = (slot: number): number => after[at(slot)]! - before[at(slot)]!;
    return {
      dataReads: delta(0) + delta(1) + delta(2),
      parityReads: delta(3) + delta(4),
      decodes: decode.mock.calls.length,
    };
  };
  return { tier, data, outage, counting, at, measure, readAll };
}

describe('striped reads, data first', () => {
  it('all up and alike: reads the data fragments only and decodes nothing', async () => {
    const { measure, readAll } = await setup();
    measure();
    const r = await readAll();
    expect(r.dataReads).toBeGreaterThan(0);
    expect(r.parityReads).toBe(0);
    expect(r.decodes).toBe(0);
  });

  it('a data fragment a little slower (within SLOW_FACTOR) still reads data only', async () => {
    const { measure, readAll, at } = await setup();
    measure(at(1), 1.1);
    const r = await readAll();
    expect(r.parityReads).toBe(0);
    expect(r.decodes).toBe(0);
  });

  it('a slow data fragment brings the parity fragments in (the fastest k)', async () => {
    const { measure, readAll, at } = await setup();
    measure(at(2), 20);
    const r = await readAll();
    expect(r.parityReads).toBeGreaterThan(0);
    expect(r.decodes).toBeGreaterThan(0);
  });

  it('a data fragment found slow during the read (estimates alike) brings the parity fragments in', async () => {
    const { measure, readAll, at, counting } = await setup();
    measure(); // what the tier believes: all alike, so the read starts data first
    counting[at(1)]!.delayMs = 100; // what the link does
    const r = await readAll();
    expect(r.parityReads).toBeGreaterThan(0);
    expect(r.decodes).toBeGreaterThan(0);
  });

  it('a data fragment down: parity read, stripes rebuilt, then data only again once it is back', async () => {
    const { tier, measure, readAll, at, outage } = await setup();
    outage[at(0)]!.goDown();
    await tier.probe();
    measure();
    const down = await readAll();
    expect(down.parityReads).toBeGreaterThan(0);
    expect(down.decodes).toBeGreaterThan(0);
    outage[at(0)]!.restore();
    await tier.probe();
    measure();
    const back = await readAll();
    expect(back.parityReads).toBe(0);
    expect(back.decodes).toBe(0);
  });

  it('a range read of the data fragments only returns the bytes asked for', async () => {
    const { tier, data, measure } = await setup();
    measure();
    for (const [offset, length] of [
      [0, 1],
      [16 * KiB - 3, 7],
      [48 * KiB - 1, 2 + 48 * KiB],
      [100_000, 300_000],
      [data.length - 5, 5],
    ] as const) {
      const got = await collect(await tier.read('big.bin', { offset, length }));
      expect(Buffer.compare(got, data.subarray(offset, offset + length))).toBe(0);
    }
  });
});
