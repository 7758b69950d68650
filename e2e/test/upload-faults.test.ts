/**
 * A large upload whose block requests fail mid-way (the proxy went away) fails its pass
 * cleanly: no promise of an in-flight block is left rejected with nobody listening — in a
 * `weft agent` process such a rejection ended the process (issue #14) — and the upload
 * completes once the server answers again.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { OfflineError, ProxyClient } from '@weft/core';
import {
  type Device,
  type TestProxy,
  enrol,
  sha256File,
  remoteTree,
  startDevice,
  startTestProxy,
} from '../src/harness.ts';

/** The real client, with block uploads failing as they do when the proxy is killed. */
class ProxyGoneForBlocks extends ProxyClient {
  failAfter = Number.POSITIVE_INFINITY;
  blocks = 0;
  override async putBlock(id: string, frame: Uint8Array): ReturnType<ProxyClient['putBlock']> {
    this.blocks += 1;
    if (this.blocks > this.failAfter) throw new OfflineError('cannot reach the proxy: connection refused');
    return super.putBlock(id, frame);
  }
}

describe('a large upload meeting a dead proxy', () => {
  let proxy: TestProxy;
  let device: Device | undefined;
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);

  beforeAll(async () => {
    proxy = await startTestProxy('fs');
    process.on('unhandledRejection', onUnhandled);
  });
  afterEach(() => {
    unhandled.length = 0;
  });
  afterAll(async () => {
    process.off('unhandledRejection', onUnhandled);
    await device?.stop();
    await proxy?.close();
  });

  it('leaves no block upload rejected unheard and finishes once the proxy is back', async () => {
    const client = new ProxyGoneForBlocks({ baseUrl: proxy.url, token: await enrol(proxy, 'alice', 'up') });
    device = await startDevice(proxy, 'up', { engine: { client, liveFeed: false } });
    const file = nodePath.join(device.folder, 'big.bin');
    await fsp.writeFile(file, randomBytes(13 * 1024 * 1024)); // 4 blocks
    // The first block goes through; every later one fails while the next block is read.
    client.failAfter = 1;
    await device.engine.syncNow();
    // Let any rejection that nobody awaits surface (Node reports them after a turn).
    await new Promise((r) => setTimeout(r, 50));
    expect(unhandled.map(String)).toEqual([]);
    expect(device.engine.error).toBeInstanceOf(OfflineError);
    expect(device.engine.getStatus().state).toBe('offline');
    // The proxy answers again: the upload resumes and completes.
    client.failAfter = Number.POSITIVE_INFINITY;
    await device.engine.syncNow();
    expect(device.engine.error, String(device.engine.error)).toBeUndefined();
    expect((await remoteTree(client)).get('big.bin')).toBe(await sha256File(file));
    expect(unhandled.map(String)).toEqual([]);
  });
});
