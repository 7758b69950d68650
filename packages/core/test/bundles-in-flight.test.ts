/**
 * Bundles on their way at once (issue #16): while the server writes one bundle's files, the
 * next crosses the link. A drop of several bundles has BUNDLES_IN_FLIGHT of them on their way
 * together, never more, and every file's outcome is recorded.
 */
import { describe, expect, it } from 'vitest';
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
});
