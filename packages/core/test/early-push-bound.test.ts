/**
 * A scan with a push beside it stays a bounded number of operations ahead of the push
 * (sync/early-push.ts `room()`, issue #16): a 1,000,000-file first sync walked far faster
 * than it uploaded and held 800,000 queued operations in memory (~550 MiB of agent RSS).
 * The queue's length is counted after every batch the scan queues, never timed.
 */
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { CHUNK_ENTRIES } from '../src/scanner.ts';
import type { SyncContext } from '../src/sync/context.ts';
import { discoverLocal } from '../src/sync/discovery/local.ts';
import { EarlyPush } from '../src/sync/early-push.ts';
import { FakeCloud, type FakeDevice } from './support/fake-cloud.ts';

let cloud: FakeCloud | undefined;
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
});

/** A server that answers each bundle only after `turns` turns of the event loop (a slow link). */
function slowBundles(d: FakeDevice, turns: number): void {
  const upload = d.remote.uploadBundle.bind(d.remote);
  d.remote.uploadBundle = async (bytes) => {
    for (let i = 0; i < turns; i++) await new Promise<void>((r) => setImmediate(r));
    return upload(bytes);
  };
}

/** The first sync's scan of `files` files beside an early push; the longest the queue grew. */
async function firstScan(
  d: FakeDevice,
  files: number,
  ahead?: number,
): Promise<{ most: number; early: EarlyPush }> {
  for (let i = 0; i < files; i++) await d.write(`drop/d${i % 8}/f${i}.txt`, `file ${i} `.repeat(1000));
  const ctx = (d.engine as unknown as { ctx: SyncContext }).ctx;
  let most = 0;
  const enqueueMany = ctx.journal.enqueueMany.bind(ctx.journal);
  ctx.journal.enqueueMany = (ops, also) => {
    const n = enqueueMany(ops, also);
    most = Math.max(most, n);
    return n;
  };
  const control = { paused: () => false, stopped: () => false, storageFull: () => false };
  const early = EarlyPush.forScan(ctx, control, true, ahead);
  if (!early) throw new Error('no early push');
  const outcome = await discoverLocal(
    ctx,
    [''],
    { folder: d.folder, settleMs: 0, massDeleteFraction: 0.5, massDeleteCount: 1000, stopped: () => false },
    early,
  );
  expect(outcome).toBe('queued');
  await early.finish();
  expect(ctx.journal.pendingCount()).toBe(0);
  const server = cloud?.serverTree();
  for (let i = 0; i < files; i++)
    expect(server?.get(`drop/d${i % 8}/f${i}.txt`)).toBe(
      createHash('sha256').update(`file ${i} `.repeat(1000)).digest('hex'),
    );
  return { most, early };
}

describe('early push: the scan stays a bounded number of operations ahead', () => {
  it('waits for the push once `ahead` operations are queued, and everything still goes', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop', { watch: false });
    await d.engine.waitIdle();
    slowBundles(d, 200);
    const files = 4 * CHUNK_ENTRIES;
    const { most, early } = await firstScan(d, files, 500);
    // At most `ahead`, plus the chunk the scan hands over at once (its files and folders).
    expect(most).toBeLessThanOrEqual(500 + CHUNK_ENTRIES + 16);
    expect(early.waits).toBeGreaterThan(0);
  });

  it('without the bound the same slow scan queues everything at once (what the bound prevents)', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop', { watch: false });
    await d.engine.waitIdle();
    slowBundles(d, 200);
    const files = 4 * CHUNK_ENTRIES;
    const { most } = await firstScan(d, files, Number.POSITIVE_INFINITY);
    expect(most).toBeGreaterThan(500 + CHUNK_ENTRIES + 16);
  });
});
