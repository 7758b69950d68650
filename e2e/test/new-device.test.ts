/**
 * A new device joins an account that already holds thousands of small files: it downloads
 * every one of them in bundles (issue #14: the list of deferred paths once travelled in a
 * response header, which past ~1,500 files outgrew the 16 KiB header limit of Node's
 * fetch — the agent then reported "offline" forever).
 *
 * 2,000 files in the default run (their deferred list was already ~55 KB); 20,000 with
 * WEFT_FULL=1 (or WEFT_NEW_DEVICE_FILES=n).
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProxyClient } from '@weft/core';
import { type BundleEntry, encodeBundle, MAX_BUNDLE_BYTES } from '@weft/wire';
import {
  type Device,
  type TestProxy,
  enrol,
  localTree,
  remoteTree,
  sorted,
  startDevice,
  startTestProxy,
} from '../src/harness.ts';

const FILES = Number(process.env.WEFT_NEW_DEVICE_FILES ?? (process.env.WEFT_FULL ? 20_000 : 2_000));

describe('a new device and a folder of many small files', () => {
  let proxy: TestProxy;
  let device: Device | undefined;

  beforeAll(async () => {
    proxy = await startTestProxy('fs');
    // Another device of the same user put the files there (straight through the API: fast).
    const uploader = new ProxyClient({ baseUrl: proxy.url, token: await enrol(proxy, 'alice', 'laptop') });
    let batch: BundleEntry[] = [];
    let bytes = 64;
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      const results = await uploader.uploadBundle(encodeBundle(batch));
      expect(results.every((r) => r.result.status === 'applied')).toBe(true);
      batch = [];
      bytes = 64;
    };
    for (let i = 0; i < FILES; i++) {
      const path = `project/src/module-${Math.floor(i / 500)}/component-file-${i}.ts`;
      // A few KiB each: a batch of 2,000 needs several bundles, so most paths are deferred.
      const content = new TextEncoder().encode(`export const value${i} = ${i * 7};\n`.repeat(100 + (i % 50)));
      const sha256 = createHash('sha256').update(content).digest('hex');
      if (bytes + content.byteLength + path.length + 64 > MAX_BUNDLE_BYTES / 2 || batch.length >= 2000)
        await flush();
      batch.push({ path, mtimeMs: 1_700_000_000_000 + i, sha256, content, rev: null });
      bytes += content.byteLength + path.length + 64;
    }
    await flush();
  });

  afterAll(async () => {
    await device?.stop();
    await proxy?.close();
  });

  // Full size on a busy machine takes many minutes: the limit grows with the count.
  it(`downloads all ${FILES} files in bundles and says so`, { timeout: 120_000 + FILES * 100 }, async () => {
    const started = Date.now();
    device = await startDevice(proxy, 'new-desktop', { engine: { liveFeed: false } });
    await device.engine.syncNow();
    const ms = Date.now() - started;
    expect(device.engine.error, String(device.engine.error)).toBeUndefined();
    expect(device.engine.getStatus().state).toBe('idle');
    const local = await localTree(device.folder);
    expect(sorted(local)).toEqual(sorted(await remoteTree(device.client)));
    expect([...local.values()].filter((v) => v !== 'dir')).toHaveLength(FILES);
    // In bundles: far fewer requests than files.
    expect(device.client.requests).toBeLessThan(FILES / 20);
    process.stdout.write(
      `new device: ${FILES} small files in ${ms} ms, ${device.client.requests} requests, ` +
        `${device.client.bytesReceived} bytes received\n`,
    );
  });
});
