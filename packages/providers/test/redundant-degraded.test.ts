/**
 * The redundant tier in degraded operation (issue #17): backends in a sustained outage
 * (OutageProvider refuses everything until restored, not per-request errors). Every read
 * survives up to m backends down (r − 1 for replicas); writes go on, what a down backend
 * missed is logged persistently and replayed in order when it answers again; a slow
 * backend is hedged around; a write that cannot be made safe fails and leaves nothing.
 */
import { randomBytes } from 'node:crypto';
import * as nodePath from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { collect, sha256Hex } from '../src/body.ts';
import { MemoryProvider } from '../src/adapters/memory.ts';
import { NotFoundError, TransientError } from '../src/errors.ts';
import type { Provider } from '../src/provider.ts';
import { blobKey, openRedundantProvider, scrub, type RedundantProvider } from '../src/redundant/index.ts';
import { fragmentSources } from '../src/redundant/reading.ts';
import { OutageProvider } from '../src/testing/outage.ts';
import { forwardingTo, openTier, tempDir } from './redundant-memory-rig.ts';

const KiB = 1024;

interface Rig {
  tier: RedundantProvider;
  dir: string;
  inner: MemoryProvider[];
  outage: OutageProvider[];
  reopen: () => Promise<RedundantProvider>;
}

async function rig(): Promise<Rig> {
  const dir = await tempDir('weft-redundant-degraded-');
  const inner = [0, 1, 2, 3, 4].map(() => new MemoryProvider());
  const outage = inner.map((p) => new OutageProvider(p));
  // The tier closes its backends on close(); these outlive it (a restart keeps the clouds).
  const make = (): RedundantProvider =>
    openTier(
      nodePath.join(dir, 'tier'),
      outage.map((p) => forwardingTo(p)),
      {
        maxShardBytes: 64 * KiB,
        hedgeAfterMs: 50,
      },
    );
  return { tier: make(), dir, inner, outage, reopen: async () => make() };
}

async function readAll(p: Provider, path: string, offset?: number, length?: number): Promise<Buffer> {
  return collect(await p.read(path, { offset, length }));
}

async function blobExists(p: Provider, key: string): Promise<boolean> {
  try {
    await p.stat(key);
    return true;
  } catch (e) {
    if (e instanceof NotFoundError) return false;
    throw e;
  }
}

const pairs = (n: number): [number, number][] =>
  Array.from({ length: n }, (_, a) =>
    Array.from({ length: n - a - 1 }, (_, j) => [a, a + j + 1] as [number, number]),
  ).flat();

describe('redundant tier, degraded', () => {
  it('reads every replicated file with any one backend down, and every striped file with any two down', async () => {
    const { tier, outage } = await rig();
    const small = Array.from({ length: 12 }, (_, i) => ({
      path: `s/${i}.txt`,
      data: randomBytes(100 + i * 500),
    }));
    const large = [
      { path: 'l/a.bin', data: randomBytes(64 * KiB) },
      { path: 'l/b.bin', data: randomBytes(700 * KiB + 13) },
    ];
    for (const f of [...small, ...large]) await tier.write(f.path, f.data);
    for (let b = 0; b < 5; b++) {
      outage[b]!.goDown();
      for (const f of small)
        expect((await readAll(tier, f.path)).equals(f.data), `${f.path} without b${b}`).toBe(true);
      outage[b]!.restore();
      await tier.probe();
    }
    for (const [a, b] of pairs(5)) {
      outage[a]!.goDown();
      outage[b]!.goDown();
      for (const f of large) {
        expect(sha256Hex(await readAll(tier, f.path)), `${f.path} without b${a}, b${b}`).toBe(
          sha256Hex(f.data),
        );
        const off = Math.floor(f.data.length / 3);
        expect((await readAll(tier, f.path, off, 150_001)).equals(f.data.subarray(off, off + 150_001))).toBe(
          true,
        );
        expect(
          (await readAll(tier, f.path, f.data.length - 5)).equals(f.data.subarray(f.data.length - 5)),
        ).toBe(true);
      }
      outage[a]!.restore();
      outage[b]!.restore();
      await tier.probe();
    }
    expect(tier.metrics.degradedReads).toBeGreaterThan(0);
  });

  it('refuses a read with a clear error when more than m backends are down, and reads again after', async () => {
    const { tier, outage } = await rig();
    const data = randomBytes(300 * KiB);
    await tier.write('big.bin', data);
    for (const i of [0, 1, 2]) outage[i]!.goDown();
    await expect(readAll(tier, 'big.bin')).rejects.toBeInstanceOf(TransientError);
    for (const i of [0, 1, 2]) outage[i]!.restore();
    await tier.probe();
    expect((await readAll(tier, 'big.bin')).equals(data)).toBe(true);
  });

  it('goes on writing during a sustained outage; the persistent log replays in order on return', async () => {
    const r = await rig();
    const keep = randomBytes(200 * KiB);
    await r.tier.write('keep.bin', keep);
    await r.tier.write('gone-later.bin', randomBytes(150 * KiB));
    r.outage[0]!.goDown();
    const files = new Map<string, Buffer>();
    for (let i = 0; i < 6; i++) {
      const data = randomBytes(i % 2 === 0 ? 90 * KiB + i : 500 + i);
      files.set(`w/${i}`, data);
      await r.tier.write(`w/${i}`, data);
    }
    const over = randomBytes(180 * KiB);
    await r.tier.write('keep.bin', over);
    files.set('keep.bin', over);
    await r.tier.remove('gone-later.bin');
    expect((await r.tier.health()).find((h) => h.id === 'b0')).toMatchObject({ state: 'down' });
    const owed = await r.tier.store.logCount('b0');
    expect(owed).toBeGreaterThan(0);
    expect(r.outage[0]!.refused).toBeGreaterThan(0);
    // A restart during the outage keeps the log and the down state.
    await r.tier.close();
    const tier = await r.reopen();
    expect(await tier.store.logCount('b0')).toBe(owed);
    expect((await tier.health()).find((h) => h.id === 'b0')?.state).toBe('down');
    for (const [p, d] of files) expect((await readAll(tier, p)).equals(d)).toBe(true);
    // Still down: a probe leaves everything logged.
    await tier.probe();
    expect(await tier.store.logCount('b0')).toBe(owed);
    r.outage[0]!.restore();
    await tier.probe();
    expect(await tier.store.logCount('b0')).toBe(0);
    expect(tier.metrics.replayed).toBe(owed);
    expect((await tier.health()).find((h) => h.id === 'b0')).toMatchObject({ state: 'available', owed: 0 });
    // Everything placed on b0 is now on it; the deleted object's blobs are gone from it.
    let onB0 = 0;
    for (const id of await tier.store.objectIds('b0')) {
      const obj = (await tier.store.object(id))!;
      for (const l of (await tier.store.locations(id)).filter((x) => x.backend === 'b0')) {
        expect(l.state).toBe('ok');
        expect(await blobExists(r.inner[0]!, blobKey(obj, l.slot))).toBe(true);
        onB0 += 1;
      }
    }
    expect(onB0).toBeGreaterThan(0);
    const all = [];
    for await (const e of r.inner[0]!.list('.weft-redundant', { recursive: true }))
      if (e.kind === 'file') all.push(e);
    expect(all.length).toBe(onB0);
    const report = await scrub(tier);
    expect(report).toMatchObject({ missing: 0, corrupt: 0, unrepairable: 0, skipped: 0 });
    // With two other backends down, the replayed fragments on b0 are needed — and good.
    r.outage[1]!.goDown();
    r.outage[2]!.goDown();
    for (const [p, d] of files) {
      const holders = (await tier.store.locations((await tier.store.objectOf(p))!)).map((l) => l.backend);
      if (holders.length === 2 && holders.includes('b1') && holders.includes('b2')) continue;
      expect((await readAll(tier, p)).equals(d), p).toBe(true);
    }
  });

  it('does not hold up a replay on a blob that cannot be rebuilt yet; the scrub repairs it later', async () => {
    const { tier, outage } = await rig();
    outage[0]!.goDown();
    const data = randomBytes(250 * KiB);
    await tier.write('late.bin', data);
    await tier.write('next.txt', Buffer.from('after'));
    expect(await tier.store.logCount('b0')).toBeGreaterThan(0);
    // b0 comes back while two others are down: too few fragments to rebuild its own from.
    outage[1]!.goDown();
    outage[2]!.goDown();
    await tier.probe('b1');
    await tier.probe('b2');
    outage[0]!.restore();
    await tier.probe('b0');
    expect(await tier.store.logCount('b0')).toBe(0);
    expect((await tier.health()).find((h) => h.id === 'b0')?.state).toBe('available');
    outage[1]!.restore();
    outage[2]!.restore();
    await tier.probe();
    const report = await scrub(tier);
    expect(report.repaired).toBeGreaterThanOrEqual(1);
    expect(await scrub(tier)).toMatchObject({ missing: 0, corrupt: 0, repaired: 0 });
    expect((await readAll(tier, 'late.bin')).equals(data)).toBe(true);
  });

  it('fails a write that fewer than k backends (no replica) can take, leaving nothing', async () => {
    const { tier, outage, inner } = await rig();
    for (const i of [0, 1, 2]) outage[i]!.goDown();
    await expect(tier.write('x.bin', randomBytes(300 * KiB))).rejects.toBeInstanceOf(TransientError);
    await expect(tier.stat('x.bin')).rejects.toBeInstanceOf(NotFoundError);
    for (const p of inner) {
      const left = [];
      for await (const e of p.list('', { recursive: true })) if (e.kind === 'file') left.push(e.path);
      expect(left).toEqual([]);
    }
    expect(await tier.store.logCount()).toBe(0);
    for (const i of [3, 4]) outage[i]!.goDown();
    await expect(tier.write('y.txt', Buffer.from('small'))).rejects.toBeInstanceOf(TransientError);
    await expect(tier.stat('y.txt')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('hedges around a stalled fragment: a spare starts and the laggard is dropped', async () => {
    const { tier, outage } = await rig();
    const data = randomBytes(400 * KiB);
    await tier.write('h.bin', data);
    const obj = (await tier.store.object((await tier.store.objectOf('h.bin'))!))!;
    const first = fragmentSources(tier, obj, await tier.store.locations(obj.id), 64 * KiB)[0]!;
    outage[Number(first.backend.slice(1))]!.stall();
    expect((await readAll(tier, 'h.bin')).equals(data)).toBe(true);
    expect(tier.metrics.hedgedReads).toBeGreaterThan(0);
    outage[Number(first.backend.slice(1))]!.restore();
  });

  it('fetches only the stripes a range read covers, from k fragments', async () => {
    const seen: { backend: number; offset?: number; length?: number }[] = [];
    const backends = [0, 1, 2, 3, 4].map((i) => {
      const p = new MemoryProvider();
      return forwardingTo(p, {
        read: (q, o) => {
          seen.push({ backend: i, offset: o?.offset, length: o?.length });
          return p.read(q, o);
        },
      });
    });
    const tier = openTier(await tempDir('weft-redundant-range-'), backends);
    const data = randomBytes(10 * 48 * KiB); // ten stripes of 3 × 16 KiB
    await tier.write('r.bin', data);
    seen.length = 0;
    const stripe = 48 * KiB;
    const part = await readAll(tier, 'r.bin', 4 * stripe + 100, 2000);
    expect(part.equals(data.subarray(4 * stripe + 100, 4 * stripe + 2100))).toBe(true);
    expect(seen).toHaveLength(3);
    expect(new Set(seen.map((x) => x.backend)).size).toBe(3);
    for (const r of seen) expect(r).toMatchObject({ offset: 64 + 4 * 16 * KiB, length: 16 * KiB });
    seen.length = 0;
    await readAll(tier, 'r.bin', 2 * stripe - 10, stripe + 20); // stripes 1, 2 and 3
    // Range requests of whole shards: k shards of each of the three stripes and nothing else.
    const covered: number[] = [];
    for (const r of seen) {
      expect((r.offset! - 64) % (16 * KiB)).toBe(0);
      expect(r.length! % (16 * KiB)).toBe(0);
      for (let x = 0; x < r.length! / (16 * KiB); x++) covered.push((r.offset! - 64) / (16 * KiB) + x);
    }
    expect(covered.sort()).toEqual([1, 1, 1, 2, 2, 2, 3, 3, 3]);
  });

  it('defaults to the measured choices: replicated below 512 KiB, RS(3, 2) over five backends', async () => {
    const tier = openRedundantProvider({
      backends: [0, 1, 2, 3, 4].map((i) => ({ id: `m${i}`, provider: new MemoryProvider() })),
      dir: await tempDir('weft-redundant-defaults-'),
      probeIntervalMs: 0,
    });
    onTestFinished(() => tier.close());
    expect([tier.thresholdBytes, tier.replicas, tier.k, tier.m]).toEqual([512 * KiB, 2, 3, 2]);
    await tier.write('below', randomBytes(512 * KiB - 1));
    await tier.write('at', randomBytes(512 * KiB));
    const layout = async (p: string) => (await tier.store.object((await tier.store.objectOf(p))!))!;
    expect(await layout('below')).toMatchObject({ layout: 'replicated' });
    expect(await layout('at')).toMatchObject({ layout: 'striped', k: 3, m: 2 });
  });

  it('refuses bad configuration and bad writes without changing anything', async () => {
    const dir = await tempDir('weft-redundant-bad-');
    const mem = (): { id: string; provider: Provider }[] =>
      [0, 1, 2].map((i) => ({ id: `m${i}`, provider: new MemoryProvider() }));
    expect(() => openRedundantProvider({ backends: mem(), dir, k: 3, m: 2 })).toThrow(/needs 5 backends/);
    expect(() =>
      openRedundantProvider({ backends: [...mem(), { id: 'm0', provider: new MemoryProvider() }], dir }),
    ).toThrow(/distinct/);
    expect(() => openRedundantProvider({ backends: mem(), dir, replicas: 4 })).toThrow(/replicas/);
    const { tier, inner } = await rig();
    const data = randomBytes(200 * KiB);
    await expect(tier.write('v.bin', data, { sha256: sha256Hex(Buffer.from('other')) })).rejects.toThrow();
    await expect(tier.write('w.bin', data, { size: data.length + 1 })).rejects.toThrow();
    await expect(tier.stat('v.bin')).rejects.toBeInstanceOf(NotFoundError);
    for (const p of inner) {
      const left = [];
      for await (const e of p.list('', { recursive: true })) if (e.kind === 'file') left.push(e.path);
      expect(left).toEqual([]);
    }
  });
});
