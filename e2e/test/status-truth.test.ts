/**
 * The status never says "up to date" (idle, nothing waiting) while the engine knows of a
 * remote change it has not applied yet: a device once showed idle for ~15 s while it still
 * held the old version of a large file that it was downloading (issue #14).
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ProxyClient } from '@weft/core';
import {
  type Device,
  type TestProxy,
  enrol,
  sha256File,
  startDevice,
  startTestProxy,
} from '../src/harness.ts';

const MiB = 1024 * 1024;

describe('status while a remote change is being applied', () => {
  let proxy: TestProxy;
  const devices: Device[] = [];

  afterAll(async () => {
    for (const d of devices) await d.stop();
    await proxy?.close();
  });

  it('is not idle from the moment a remote change is known until it is on disk', async () => {
    proxy = await startTestProxy('fs');
    const a = await startDevice(proxy, 'writer', { engine: { liveFeed: false } });
    devices.push(a);
    // The reader downloads at 4 MiB/s: a 12 MiB version takes about 3 s to arrive.
    const readerClient = new ProxyClient({
      baseUrl: proxy.url,
      token: await enrol(proxy, 'alice', 'reader'),
      downloadBytesPerSecond: 4 * MiB,
    });
    let known = false;
    const b = await startDevice(proxy, 'reader', {
      engine: {
        client: readerClient,
        liveFeed: false,
        trace: (event, detail) => {
          if (event === 'remote' && (detail as { path?: string }).path === 'big.bin') known = true;
        },
      },
    });
    devices.push(b);
    const aFile = nodePath.join(a.folder, 'big.bin');
    const bFile = nodePath.join(b.folder, 'big.bin');
    await fsp.writeFile(aFile, randomBytes(3 * MiB));
    await a.engine.syncNow();
    await b.engine.syncNow();
    expect(await sha256File(bFile)).toBe(await sha256File(aFile));
    known = false;

    // A new version (nothing in common with the old one) reaches the server.
    await fsp.writeFile(aFile, randomBytes(12 * MiB));
    await a.engine.syncNow();
    const newSha = await sha256File(aFile);

    const downloads = (): number =>
      b.engine.getStatus().recent.filter((r) => r.kind === 'downloaded' && r.path === 'big.bin').length;
    const before = downloads();
    const lies: string[] = [];
    const check = (where: string): void => {
      const s = b.engine.getStatus();
      const applied = downloads() > before;
      if (known && !applied && s.state === 'idle' && s.pendingOperations === 0)
        lies.push(`${where}: idle, 0 pending, big.bin not applied`);
    };
    const sub = b.engine.status.onChange(() => check('event'));
    const poll = setInterval(() => check('poll'), 10);
    try {
      await b.engine.syncNow();
    } finally {
      clearInterval(poll);
      sub.dispose();
    }
    expect(known).toBe(true);
    expect(await sha256File(bFile)).toBe(newSha);
    expect(lies.slice(0, 5)).toEqual([]);
    expect(b.engine.getStatus().state).toBe('idle');
  });
});
