/**
 * The push keeps its bundles on their way across its windows of creates (issue #16;
 * propagate/bundle-flight.ts): on a first sync the scan hands the push a window at a time,
 * and at each window's end the push waited for the server's answer to every bundle before it
 * made the next window's folders and read its files. Counted with the first window's bundle
 * held by the server, never timed.
 */
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Op } from '../src/ops.ts';
import type { SyncContext } from '../src/sync/context.ts';
import { push } from '../src/sync/push.ts';
import { noise } from './drop-shared.ts';
import { FakeCloud, type FakeDevice } from './support/fake-cloud.ts';

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

let cloud: FakeCloud | undefined;
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
});

/** A window as a scan queues it: its folder, then `files` files of 100 KiB (noise) in it. */
async function window(d: FakeDevice, dir: string, files: number, seed: number): Promise<Op[]> {
  await d.mkdir(dir);
  const ops: Op[] = [{ kind: 'mkdir', path: dir, created: true }];
  for (let i = 0; i < files; i++) {
    const content = noise(100 * 1024, seed + i);
    await d.write(`${dir}/f${i}.bin`, content);
    ops.push({
      kind: 'put',
      path: `${dir}/f${i}.bin`,
      hash: sha(content),
      size: content.length,
      created: true,
    });
  }
  return ops;
}

describe('bundles across windows', () => {
  it("makes the next window's folders while the last window's bundle is still on its way", async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop', { watch: false });
    await d.engine.waitIdle();
    const ctx = (d.engine as unknown as { ctx: SyncContext }).ctx;
    // 60 files of 100 KiB: one full bundle (~40 files), the rest held for the next window.
    ctx.journal.enqueueMany(await window(d, 'w1', 60, 0));
    const second = await window(d, 'w2', 60, 1000);
    let unanswered = 0;
    let answered = 0;
    let release: () => void = () => undefined;
    const released = new Promise<void>((r) => (release = r));
    const upload = ctx.client.uploadBundle.bind(ctx.client);
    ctx.client.uploadBundle = async (bytes) => {
      unanswered += 1;
      try {
        // The first bundle is held until w2 is made (or 10 s: a push that waits for its answer
        // before the next window stops here, and the test then fails, not hangs).
        if (answered === 0) await Promise.race([released, new Promise((r) => setTimeout(r, 10_000).unref())]);
        return await upload(bytes);
      } finally {
        unanswered -= 1;
        answered += 1;
      }
    };
    let onTheirWayAtW2: number | undefined;
    const ops = ctx.client.ops.bind(ctx.client);
    ctx.client.ops = async (list) => {
      if (list.some((o) => o.op === 'mkdir' && o.path === 'w2')) {
        onTheirWayAtW2 = unanswered;
        release();
      }
      return ops(list);
    };
    let scanned = false;
    await push(ctx, {
      paused: () => false,
      stopped: () => false,
      storageFull: () => false,
      // The scan queues the second window when the push first asks, and is then over.
      more: async () => {
        if (scanned) return false;
        scanned = true;
        ctx.journal.enqueueMany(second);
        return true;
      },
      scanning: () => !scanned,
    });
    expect(onTheirWayAtW2).toBe(1);
    expect(answered).toBeGreaterThanOrEqual(3);
    expect(ctx.journal.pendingCount()).toBe(0);
    const server = cloud.serverTree();
    for (const op of second) if (op.kind === 'put') expect(server.get(op.path)).toBe(op.hash);
    expect(server.get('w1/f59.bin')).toBe(sha(noise(100 * 1024, 59)));
  });
});
