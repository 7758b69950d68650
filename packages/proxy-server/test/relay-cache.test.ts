import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsProvider } from '@weft/providers';
import { RelayCache } from '../src/store/relay-cache.ts';
import { objectKey } from '../src/store/link-file.ts';
import { pseudoRandom, sha, tempDir } from './helpers.ts';

let dir: string;
let objects: FsProvider;
const blobs = [0, 1, 2, 3].map((i) => pseudoRandom(1000, i + 1));

beforeAll(async () => {
  dir = await tempDir('weft-relay-');
  objects = await FsProvider.open({ root: nodePath.join(dir, 'objects') });
  for (const b of blobs) await objects.write(objectKey(sha(b)), b);
});
afterAll(async () => fsp.rm(dir, { recursive: true, force: true }));

describe('relay cache', () => {
  it('evictsTheLeastRecentlyUsedAndNeverAPinnedFile', async () => {
    const relay = new RelayCache(nodePath.join(dir, 'relay'), 2500, objects);
    await relay.init();
    const get = async (i: number) => relay.acquire(sha(blobs[i]!), objectKey(sha(blobs[i]!)), 1000);
    const a = await get(0);
    a.release();
    const b = await get(1);
    b.release();
    (await get(0)).release(); // 0 is now more recent than 1
    const pinned = await get(2); // over the bound: 1 (least recently used) goes
    expect([0, 1, 2].map((i) => relay.has(sha(blobs[i]!)))).toEqual([true, false, true]);
    (await get(3)).release(); // 0 goes; 2 is pinned and stays
    expect(relay.has(sha(blobs[0]!))).toBe(false);
    expect(relay.has(sha(blobs[2]!))).toBe(true);
    expect(await fsp.readFile(pinned.file)).toEqual(blobs[2]);
    pinned.release();
    expect(relay.stats.bytes).toBeLessThanOrEqual(2500);
  });

  it('refusesAnObjectOfTheWrongSize', async () => {
    const relay = new RelayCache(nodePath.join(dir, 'relay2'), 10_000, objects);
    await relay.init();
    await expect(relay.acquire(sha(blobs[0]!), objectKey(sha(blobs[0]!)), 999)).rejects.toThrow(
      /expected 999/,
    );
    expect(relay.has(sha(blobs[0]!))).toBe(false);
  });
});
