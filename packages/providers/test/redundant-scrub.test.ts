/**
 * Scrub and replacement in the redundant tier (issue #17), over directory backends: bytes
 * flipped in a fragment file on disk, a deleted fragment and a damaged replica are found
 * by the scrub and rebuilt from the others; a read meanwhile still returns the right bytes
 * (the bad shard fails its checksum and a spare takes its place); a backend lost for good
 * is replaced by a new one, its fragments rebuilt there, with progress.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { collect } from '../src/body.ts';
import { MemoryProvider } from '../src/adapters/memory.ts';
import type { Provider } from '../src/provider.ts';
import {
  blobKey,
  replaceBackend,
  scrub,
  type RedundantProvider,
  type ReplaceProgress,
} from '../src/redundant/index.ts';
import { OutageProvider } from '../src/testing/outage.ts';
import { redundantFsRig } from './redundant-fs-rig.ts';

const KiB = 1024;
const open: RedundantProvider[] = [];
afterEach(async () => {
  for (const t of open.splice(0)) await t.close().catch(() => undefined);
});

async function fsRig(): Promise<{ tier: RedundantProvider; roots: string[]; outage: OutageProvider[] }> {
  const { tier, roots, backends } = await redundantFsRig(
    'weft-redundant-scrub-',
    (p) => new OutageProvider(p),
  );
  open.push(tier);
  return { tier, roots, outage: backends };
}

async function readAll(p: Provider, path: string, offset?: number, length?: number): Promise<Buffer> {
  return collect(await p.read(path, { offset, length }));
}

/** The file on disk holding slot `slot` of the object at `path`, and its backend index. */
async function blobFile(
  tier: RedundantProvider,
  roots: string[],
  path: string,
  slot: number,
): Promise<{ file: string; b: number }> {
  const obj = (await tier.store.object((await tier.store.objectOf(path))!))!;
  const loc = (await tier.store.locations(obj.id)).find((l) => l.slot === slot)!;
  const b = Number(loc.backend.slice(1));
  return { file: nodePath.join(roots[b]!, ...blobKey(obj, slot).split('/')), b };
}

async function flip(file: string, at: number): Promise<void> {
  const bytes = await fsp.readFile(file);
  bytes[at] = bytes[at]! ^ 0xff;
  await fsp.writeFile(file, bytes);
}

describe('redundant tier, scrub and replace', () => {
  it('finds flipped, deleted and damaged blobs, rebuilds them, and reads right meanwhile', async () => {
    const { tier, roots } = await fsRig();
    const big = randomBytes(300 * KiB + 7);
    const other = randomBytes(128 * KiB);
    const small = randomBytes(5000);
    await tier.write('big.bin', big);
    await tier.write('other.bin', other);
    await tier.write('small.txt', small);
    const clean = await scrub(tier);
    expect(clean).toMatchObject({ objects: 3, blobsChecked: 12, missing: 0, corrupt: 0, repaired: 0 });

    const f0 = await blobFile(tier, roots, 'big.bin', 0);
    const before0 = await fsp.readFile(f0.file);
    await flip(f0.file, 64 + 40 * KiB); // payload, second stripe
    const f3 = await blobFile(tier, roots, 'big.bin', 3);
    const before3 = await fsp.readFile(f3.file);
    await flip(f3.file, 10); // header
    const gone = await blobFile(tier, roots, 'other.bin', 1);
    await fsp.rm(gone.file);
    const rep = await blobFile(tier, roots, 'small.txt', 0);
    await flip(rep.file, 100);

    // Reads are right despite the damage: bad shards fail their checksums, spares fill in.
    expect((await readAll(tier, 'big.bin')).equals(big)).toBe(true);
    expect(
      (await readAll(tier, 'big.bin', 33 * KiB, 70 * KiB)).equals(big.subarray(33 * KiB, 103 * KiB)),
    ).toBe(true);
    expect((await readAll(tier, 'other.bin')).equals(other)).toBe(true);
    expect((await readAll(tier, 'small.txt')).equals(small)).toBe(true);

    const report = await scrub(tier);
    expect(report).toMatchObject({ objects: 3, missing: 1, corrupt: 3, repaired: 4, unrepairable: 0 });
    expect((await fsp.readFile(f0.file)).equals(before0)).toBe(true);
    expect((await fsp.readFile(f3.file)).equals(before3)).toBe(true);
    await fsp.stat(gone.file);
    expect(await scrub(tier)).toMatchObject({ missing: 0, corrupt: 0, repaired: 0 });
    for (const id of await tier.store.objectIds())
      for (const l of await tier.store.locations(id)) expect(l.state, `${id} slot ${l.slot}`).toBe('ok');
  });

  it('scrubs at a limited rate and skips the blobs of a down backend', async () => {
    const { tier, outage } = await fsRig();
    await tier.write('a.bin', randomBytes(200 * KiB));
    outage[2]!.goDown();
    await tier.probe();
    const slept: number[] = [];
    const report = await scrub(tier, { bytesPerSecond: 1024, sleep: async (ms) => void slept.push(ms) });
    expect(report.skipped).toBe(1);
    expect(report.blobsChecked).toBe(4);
    expect(slept.length).toBeGreaterThan(0);
  });

  it('goes on when a backend fails during the scrub: marked down, its blobs skipped', async () => {
    const { tier, outage } = await fsRig();
    for (let i = 0; i < 3; i++) await tier.write(`f${i}.bin`, randomBytes(100 * KiB + i));
    // Down after the first blob is checked, before the tier notices.
    const report = await scrub(tier, {
      bytesPerSecond: 1,
      sleep: async () => outage[2]!.goDown(),
    });
    expect(tier.isUp('b2')).toBe(false);
    expect(report).toMatchObject({ objects: 3, missing: 0, corrupt: 0, repaired: 0 });
    expect(report.blobsChecked + report.skipped).toBe(15);
    expect(report.skipped).toBeGreaterThanOrEqual(2);
  });

  it('replaces a backend lost for good, rebuilding its blobs onto a new one with progress', async () => {
    const { tier, outage } = await fsRig();
    const files = new Map<string, Buffer>();
    for (let i = 0; i < 8; i++) {
      const data = randomBytes(i % 3 === 0 ? 3000 + i : 100 * KiB + i * 999);
      files.set(`f${i}`, data);
      await tier.write(`f${i}`, data);
    }
    outage[1]!.goDown();
    await tier.probe();
    await tier.write('during.bin', randomBytes(90 * KiB)); // b1 owes this one
    expect(await tier.store.logCount('b1')).toBeGreaterThan(0);
    const onB1 = (await tier.store.objectIds('b1')).length;
    expect(onB1).toBeGreaterThan(0);
    const progress: ReplaceProgress[] = [];
    const fresh = new OutageProvider(new MemoryProvider());
    const rebuilt = await replaceBackend(tier, 'b1', { id: 'b5', provider: fresh }, (p) => progress.push(p));
    expect(rebuilt).toBe(onB1);
    expect(progress.at(-1)).toMatchObject({ done: onB1, total: onB1 });
    expect(progress.at(-1)!.bytes).toBeGreaterThan(0);
    expect(tier.backendIds()).not.toContain('b1');
    expect(await tier.store.objectIds('b1')).toEqual([]);
    expect((await tier.store.objectIds('b5')).length).toBe(onB1);
    expect(await tier.store.logCount('b1')).toBe(0);
    // The new backend's blobs carry the data: with two others down every file still reads.
    outage[0]!.goDown();
    outage[3]!.goDown();
    await tier.probe();
    for (const [p, d] of files) {
      const holders = (await tier.store.locations((await tier.store.objectOf(p))!)).map((l) => l.backend);
      if (!holders.includes('b2') && !holders.includes('b4') && !holders.includes('b5')) continue;
      expect((await readAll(tier, p)).equals(d), p).toBe(true);
    }
    outage[0]!.restore();
    outage[3]!.restore();
    await tier.probe();
    expect(await scrub(tier)).toMatchObject({ missing: 0, corrupt: 0, unrepairable: 0 });
  });
});
