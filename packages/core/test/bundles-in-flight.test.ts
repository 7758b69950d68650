/**
 * Bundles on their way at once (issue #16): while the server writes one bundle's files, the
 * next crosses the link. A drop of several bundles has BUNDLES_IN_FLIGHT of them on their way
 * together, never more, and every file's outcome is recorded.
 */
import { describe, expect, it } from 'vitest';
import { BUNDLE_OVERHEAD, MAX_BUNDLE_BYTES, bundleEntrySize } from '@weft/wire';
import { BUNDLES_IN_FLIGHT } from '../src/sync/propagate/upload-bundle.ts';
import { type Drop, expectDropOnServer, fakeCloudPerTest, writeDrop } from './drop-shared.ts';

describe('bundles in flight', () => {
  const newCloud = fakeCloudPerTest();

  it('keeps BUNDLES_IN_FLIGHT bundles on their way, never more, and records every outcome', async () => {
    const cloud = newCloud();
    const d = await cloud.addDevice('laptop');
    // 32 files of 400 KiB: 12.5 MiB, four bundles of at most 4 MiB.
    const drop: Drop = { files: 32, size: 400 * 1024, pathOf: (i) => `drop/f${i}.bin` };
    await writeDrop(d, drop);
    let onTheirWay = 0;
    let most = 0;
    let bundles = 0;
    const remote = d.remote;
    const upload = remote.uploadBundle.bind(remote);
    remote.uploadBundle = async (bytes) => {
      bundles += 1;
      onTheirWay += 1;
      most = Math.max(most, onTheirWay);
      try {
        // Long enough for the next bundle to be read, encoded and sent meanwhile.
        await new Promise((r) => setTimeout(r, 150));
        return await upload(bytes);
      } finally {
        onTheirWay -= 1;
      }
    };
    await d.sync();
    expect(bundles).toBeGreaterThanOrEqual(BUNDLES_IN_FLIGHT + 1);
    expect(most).toBe(BUNDLES_IN_FLIGHT);
    expect(d.engine.journal.pendingCount()).toBe(0);
    expectDropOnServer(cloud, drop);
    // Every file's row says it is synced at the server's revision: a rescan sends nothing.
    const before = bundles;
    await d.sync();
    expect(bundles).toBe(before);
  });

  // 2,400 files of 3 KiB (noise: sent as they are): a bundle holds ~1,350 of them. Queued
  // offline, the push once sent them in slices of 2,000 files, each slice ending with a
  // part-filled bundle and waiting for every bundle on its way; on a first sync the push beside
  // the scan sent what was queued at each turn, its last bundle part-filled, the same way:
  // three bundles (4 MiB, 1.9 MiB, 1.2 MiB), not two.
  it.each([
    ['beside the first scan', false],
    ['of a queue made offline', true],
  ])(
    'sends a long run of small files %s as one stream of full bundles, the last alone part-filled',
    async (_, offline) => {
      const cloud = newCloud();
      const d = await cloud.addDevice('laptop');
      const drop: Drop = { files: 2_400, size: 3 * 1024, pathOf: (i) => `drop/${i % 20}/f${i}.bin` };
      await writeDrop(d, drop);
      if (offline) {
        d.offline = true;
        await d.sync();
        expect(d.engine.journal.pendingCount()).toBeGreaterThan(drop.files);
        d.offline = false;
      }
      const sizes: number[] = [];
      const remote = d.remote;
      const upload = remote.uploadBundle.bind(remote);
      remote.uploadBundle = async (bytes) => {
        sizes.push(bytes.byteLength);
        return upload(bytes);
      };
      await d.sync();
      expectDropOnServer(cloud, drop);
      const entry = bundleEntrySize(drop.pathOf(drop.files - 1), null, drop.size);
      const perBundle = Math.floor((MAX_BUNDLE_BYTES - BUNDLE_OVERHEAD) / entry);
      expect(sizes.length).toBe(Math.ceil(drop.files / perBundle));
      // Every bundle but the last is full: the next file would not have fitted.
      for (const s of sizes.slice(0, -1)) expect(s).toBeGreaterThan(MAX_BUNDLE_BYTES - 2 * entry);
    },
  );
});
