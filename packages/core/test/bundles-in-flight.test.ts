/**
 * Bundles on their way at once (issue #16): while the server writes one bundle's files, the
 * next crosses the link. A drop of several bundles has BUNDLES_IN_FLIGHT of them on their way
 * together, never more, and every file's outcome is recorded.
 */
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { BUNDLES_IN_FLIGHT } from '../src/sync/propagate/upload-bundle.ts';
import { FakeCloud } from './support/fake-cloud.ts';

/** Bytes that do not deflate (so bundles are not compressed), the same for a seed every run. */
function noise(size: number, seed: number): Buffer {
  const out = Buffer.alloc(size);
  let block = createHash('sha256').update(`seed ${seed}`).digest();
  for (let at = 0; at < size; at += block.length) {
    block.copy(out, at);
    block = createHash('sha256').update(block).digest();
  }
  return out;
}

describe('bundles in flight', () => {
  let cloud: FakeCloud | undefined;
  afterEach(async () => {
    await cloud?.close();
    cloud = undefined;
  });

  it('keeps BUNDLES_IN_FLIGHT bundles on their way, never more, and records every outcome', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    // 32 files of 400 KiB: 12.5 MiB, four bundles of at most 4 MiB.
    const files = 32;
    for (let i = 0; i < files; i++) await d.write(`drop/f${i}.bin`, noise(400 * 1024, i));
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
    const server = cloud.serverTree();
    for (let i = 0; i < files; i++)
      expect(server.get(`drop/f${i}.bin`)).toBe(
        createHash('sha256')
          .update(noise(400 * 1024, i))
          .digest('hex'),
      );
    // Every file's row says it is synced at the server's revision: a rescan sends nothing.
    const before = bundles;
    await d.sync();
    expect(bundles).toBe(before);
  });
});
