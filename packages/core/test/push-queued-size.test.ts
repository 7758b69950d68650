/**
 * The push sorts queued puts into bundles and large uploads by the size the scan queued,
 * without a stat (and a second resolve of the path) per file before its read (issue #16): a
 * file that grew to large since it was queued is handed back by the bundle upload and sent
 * as a large file, never bundled.
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { SyncContext } from '../src/sync/context.ts';
import { push } from '../src/sync/push.ts';
import { FakeCloud } from './support/fake-cloud.ts';

const sha = (b: Uint8Array | string): string => createHash('sha256').update(b).digest('hex');

let cloud: FakeCloud | undefined;
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
});

describe('push by queued size', () => {
  it('sends a file that grew past the small-file size since it was queued as a large file', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop', { smallFileBytes: 64 * 1024 });
    await d.engine.waitIdle();
    const big = randomBytes(200 * 1024);
    await d.write('grew.bin', big);
    await d.write('small.txt', 'hello');
    // Queued as the scan saw them while grew.bin was still 1 KiB: no scan in between.
    d.engine.journal.enqueueMany([
      { kind: 'put', path: 'grew.bin', hash: sha('old'), size: 1024, created: true },
      { kind: 'put', path: 'small.txt', hash: sha('hello'), size: 5, created: true },
    ]);
    const ctx = (d.engine as unknown as { ctx: SyncContext }).ctx;
    let bundles = 0;
    const upload = ctx.client.uploadBundle.bind(ctx.client);
    ctx.client.uploadBundle = async (body) => {
      bundles += 1;
      return upload(body);
    };
    await push(ctx, { paused: () => false, stopped: () => false, storageFull: () => false });
    expect(d.engine.journal.pendingCount()).toBe(0);
    const server = cloud.serverTree();
    expect(server.get('grew.bin')).toBe(sha(big));
    expect(server.get('small.txt')).toBe(sha('hello'));
    expect(bundles).toBe(1); // small.txt alone
    expect(d.engine.lastUpload?.path).toBe('grew.bin'); // the large-file path
  });
});
