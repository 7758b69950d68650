/**
 * Large files go beside the small files' bundles (issue #16: one 2.1 MiB file's transfer,
 * commit and signature stopped a 10,029-file drop's bundles for ~3 s). With the large
 * upload held at its first request, every bundle of the drop still goes and is answered
 * (counted, never timed);
 * a failed large upload fails the push once the rest has settled, and the next one sends it.
 */
import { describe, expect, it } from 'vitest';
import type { Op } from '../src/ops.ts';
import type { SyncContext } from '../src/sync/context.ts';
import { push } from '../src/sync/push.ts';
import { sha256 } from './support/fake-cloud.ts';
import { type Drop, expectDropOnServer, fakeCloudPerTest, noise, writeDrop } from './drop-shared.ts';
import { LARGE_IN_FLIGHT } from '../src/sync/large-lane.ts';

/** Files from this size go as transfers (the engine's default is 2 MiB; smaller here, for speed). */
const SMALL = 64 * 1024;

describe('large uploads beside the bundles', () => {
  const newCloud = fakeCloudPerTest();

  it('finishes the bundles while a large upload is held', async () => {
    const cloud = newCloud();
    const d = await cloud.addDevice('laptop', { smallFileBytes: SMALL });
    await d.engine.waitIdle();
    // 150 files of 60 KiB (noise: not compressed): 8.8 MiB, three bundles; the large file
    // queued first, all in one window (as a scan queues them, without the scan's timing).
    const drop: Drop = { files: 150, size: 60 * 1024, pathOf: (i) => `drop/f${i}.bin` };
    await writeDrop(d, drop);
    const big = noise(256 * 1024, 9_999);
    await d.write('drop/big.bin', big);
    const put = (path: string, content: Uint8Array): Op => ({
      kind: 'put',
      path,
      hash: sha256(content),
      size: content.length,
      created: true,
    });
    d.engine.journal.enqueueMany([
      { kind: 'mkdir', path: 'drop', created: true },
      put('drop/big.bin', big),
      ...Array.from({ length: drop.files }, (_, i) => put(drop.pathOf(i), noise(drop.size, i))),
    ]);
    const ctx = (d.engine as unknown as { ctx: SyncContext }).ctx;
    let answered = 0; // small files whose bundle was answered
    let bundles = 0;
    let holding = false;
    let whileHeld = 0; // bundles answered while the large upload was held
    let held: () => void = () => undefined;
    const isHeld = new Promise<void>((r) => (held = r));
    let release: () => void = () => undefined;
    const released = new Promise<void>((r) => (release = r));
    // Up to 10 s: a push that keeps to its order (bundles first, or the large file first and
    // alone) stops at one of these waits, and the test then fails, not hangs.
    const atMost = (p: Promise<void>): Promise<unknown> =>
      Promise.race([p, new Promise((r) => setTimeout(r, 10_000).unref())]);
    const upload = ctx.client.uploadBundle.bind(ctx.client);
    ctx.client.uploadBundle = async (bytes) => {
      await atMost(isHeld); // bundles go once the large upload is held
      const results = await upload(bytes);
      bundles += 1;
      if (holding) whileHeld += 1;
      answered += results.length;
      if (answered >= drop.files) release();
      return results;
    };
    const create = ctx.client.createTransfer.bind(ctx.client);
    ctx.client.createTransfer = async (req) => {
      holding = true;
      held();
      await atMost(released); // held until every small file's bundle is answered
      holding = false;
      return create(req);
    };
    await push(ctx, { paused: () => false, stopped: () => false, storageFull: () => false });
    expect(bundles).toBeGreaterThanOrEqual(3);
    expect(whileHeld).toBe(bundles);
    expect(answered).toBe(drop.files);
    expectDropOnServer(cloud, drop);
    expect(cloud.serverTree().get('drop/big.bin')).toBe(sha256(big));
    expect(d.engine.journal.pendingCount()).toBe(0);
  });

  it(`sends at most ${LARGE_IN_FLIGHT} large files at once, and all of them`, async () => {
    const cloud = newCloud();
    const d = await cloud.addDevice('laptop', { smallFileBytes: SMALL });
    await d.engine.waitIdle();
    const bigs = Array.from({ length: 5 }, (_, i) => noise(100 * 1024, 500 + i));
    for (const [i, b] of bigs.entries()) await d.write(`big/${i}.bin`, b);
    for (let i = 0; i < 20; i++) await d.write(`small/${i}.txt`, `small ${i}`);
    let onTheirWay = 0;
    let most = 0;
    const create = d.remote.createTransfer.bind(d.remote);
    d.remote.createTransfer = async (req) => {
      onTheirWay += 1;
      most = Math.max(most, onTheirWay);
      return create(req);
    };
    const ops = d.remote.ops.bind(d.remote);
    d.remote.ops = async (list) => {
      const commit = list.some((o) => o.op === 'commit');
      try {
        // Long enough for the other uploads to start meanwhile, if they may.
        if (commit) await new Promise((r) => setTimeout(r, 50));
        return await ops(list);
      } finally {
        if (commit) onTheirWay -= 1;
      }
    };
    await d.sync();
    expect(most).toBe(LARGE_IN_FLIGHT);
    for (const [i, b] of bigs.entries()) expect(cloud.serverTree().get(`big/${i}.bin`)).toBe(sha256(b));
    expect(cloud.serverTree().get('small/19.txt')).toBe(sha256('small 19'));
    expect(d.engine.journal.pendingCount()).toBe(0);
  });

  it('a failed large upload fails the push after the bundles settle; the next push sends it', async () => {
    const cloud = newCloud();
    const d = await cloud.addDevice('laptop', { smallFileBytes: SMALL });
    await d.engine.waitIdle();
    const big = noise(200 * 1024, 42);
    await d.write('big.bin', big);
    for (let i = 0; i < 30; i++) await d.write(`small/${i}.txt`, `small ${i}`);
    const create = d.remote.createTransfer.bind(d.remote);
    let fail = true;
    d.remote.createTransfer = async (req) => {
      if (fail) {
        fail = false;
        throw new Error('transfer refused (test)');
      }
      return create(req);
    };
    await d.sync();
    expect(d.engine.getStatus().state).toBe('error');
    // The small files went; the large one is still queued.
    expect(cloud.serverTree().get('small/29.txt')).toBe(sha256('small 29'));
    expect(cloud.serverTree().get('big.bin')).toBeUndefined();
    expect(d.engine.journal.pendingOps().map((q) => (q.op.kind === 'move' ? q.op.to : q.op.path))).toEqual([
      'big.bin',
    ]);
    await d.sync();
    expect(cloud.serverTree().get('big.bin')).toBe(sha256(big));
    expect(d.engine.journal.pendingCount()).toBe(0);
  });
});
