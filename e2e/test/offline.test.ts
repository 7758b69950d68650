/** Offline edits queue up, coalesce, and flush when the server comes back. */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import {
  type Device,
  type TestProxy,
  localTree,
  remoteTree,
  sorted,
  startDevice,
  startTestProxy,
} from '../src/harness.ts';

describe.each(['fs', 's3'] as const)('offline (object tier: %s)', (tier) => {
  let proxy: TestProxy | undefined;
  let device: Device | undefined;

  afterAll(async () => {
    await device?.stop();
    await proxy?.close();
  });

  it('queues, coalesces and flushes edits made while the server is down', async () => {
    const objectTier = tier === 'fs' ? 'fs' : inject('s3');
    proxy = await startTestProxy(objectTier);
    const { dataDir, s3Prefix } = proxy;
    device = await startDevice(proxy, 'laptop');
    const { folder, engine } = device;
    await fsp.writeFile(nodePath.join(folder, 'keep.txt'), 'v0');
    await engine.syncNow();
    const url = proxy.url;
    await proxy.close();

    // While offline: many edits of one file, a file created then deleted, a folder made and renamed.
    for (let i = 1; i <= 20; i++) {
      await fsp.writeFile(nodePath.join(folder, 'keep.txt'), `v${i}`);
      await engine.syncNow();
    }
    await fsp.writeFile(nodePath.join(folder, 'temp.txt'), 'short-lived');
    await engine.syncNow();
    await fsp.rm(nodePath.join(folder, 'temp.txt'));
    await fsp.mkdir(nodePath.join(folder, 'draft'));
    await fsp.writeFile(nodePath.join(folder, 'draft', 'note.md'), 'hello');
    await engine.syncNow();
    expect(engine.getStatus().state).toBe('offline');
    const queued = engine.journal.pendingOps().map((q) => q.op);
    // 20 uploads of keep.txt became one; temp.txt's create+delete vanished.
    expect(queued.filter((o) => o.kind === 'put' && o.path === 'keep.txt')).toHaveLength(1);
    expect(queued.some((o) => 'path' in o && o.path === 'temp.txt')).toBe(false);
    expect(engine.getStatus().savings.operationsEliminated).toBeGreaterThanOrEqual(19);

    // The server returns on the same port and data.
    const port = Number(new URL(url).port);
    proxy = await startTestProxy(objectTier, dataDir, port, s3Prefix);
    await engine.syncNow();
    expect(engine.journal.pendingOps()).toEqual([]);
    expect(sorted(await remoteTree(device.client))).toEqual(sorted(await localTree(folder)));
  });
});
