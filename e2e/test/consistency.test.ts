/**
 * The Merkle consistency check (HyCloud Eq. 9–10) run by the agent after a crash: feed
 * events lost while it was down are found by comparing hashes top-down, and repaired.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { Journal } from '@weft/core';
import { afterEach, describe, expect, it } from 'vitest';
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

describe('consistency check', () => {
  let proxy: TestProxy | undefined;
  const devices: Device[] = [];

  afterEach(async () => {
    for (const d of devices.splice(0)) await d.stop();
    await proxy?.close();
  });

  async function write(d: Device, p: string, content: string): Promise<void> {
    const abs = nodePath.join(d.folder, ...p.split('/'));
    await fsp.mkdir(nodePath.dirname(abs), { recursive: true });
    await fsp.writeFile(abs, content);
  }

  /** B misses every change A makes while B is down: its cursor jumps past them. */
  async function loseFeedWhileDown(
    b: Device,
    crashed: boolean,
    changes: () => Promise<void>,
  ): Promise<Device> {
    await b.engine.stop();
    devices.splice(devices.indexOf(b), 1);
    await changes();
    const seq = (await b.client.whoami()).seq;
    const j = new Journal(nodePath.join(b.stateDir, 'journal.db'));
    j.setMeta('cursor', String(seq));
    if (crashed) j.setMeta('running', '1'); // as a kill -9 leaves it
    j.close();
    const token = await enrol(proxy as TestProxy, 'alice', 'desktop-again');
    const again = await startDevice(proxy as TestProxy, 'desktop', {
      token,
      folder: b.folder,
      stateDir: b.stateDir,
      engine: { liveFeed: false },
    });
    devices.push(again);
    return again;
  }

  it('after a crash, finds the entries whose feed events were lost and repairs them', async () => {
    proxy = await startTestProxy('fs');
    const a = await startDevice(proxy, 'laptop', { engine: { liveFeed: false } });
    const b0 = await startDevice(proxy, 'desktop', { engine: { liveFeed: false } });
    devices.push(a, b0);
    for (const p of ['x.txt', 'keep.txt', 'dir/y.txt', 'dir/sub/z.txt', 'dir/sub/w.txt', 'other/o.txt'])
      await write(a, p, `first ${p}`);
    await a.engine.syncNow();
    await b0.engine.syncNow();
    expect(sorted(await localTree(b0.folder))).toEqual(sorted(await localTree(a.folder)));

    const b = await loseFeedWhileDown(b0, true, async () => {
      await write(a, 'x.txt', 'second x');
      await fsp.rm(nodePath.join(a.folder, 'dir', 'sub', 'z.txt'));
      await write(a, 'dir/sub/new.txt', 'new deep file');
      await write(a, 'top/new2.txt', 'new folder');
      await a.engine.syncNow();
    });
    // Without the check these changes would never arrive: the feed is past them.
    await b.engine.syncNow();

    expect(sorted(await localTree(b.folder))).toEqual(sorted(await localTree(a.folder)));
    expect(sorted(await remoteTree(b.client))).toEqual(sorted(await localTree(a.folder)));
    const check = b.engine.lastCheck;
    expect(check?.paths).toEqual(['dir/sub/new.txt', 'dir/sub/z.txt', 'top', 'x.txt']);
    // Top-down: the root, then `dir`, then `dir/sub` — one round trip per level that differs.
    expect(check?.roundTrips).toBe(3);
    expect(check?.repaired).toBe(4);
  });

  it('does not run after a clean stop, and keeps an edit made here while the server changed too', async () => {
    proxy = await startTestProxy('fs');
    const a = await startDevice(proxy, 'laptop', { engine: { liveFeed: false } });
    const b0 = await startDevice(proxy, 'desktop', { engine: { liveFeed: false } });
    devices.push(a, b0);
    await write(a, 'notes.txt', 'v1');
    await a.engine.syncNow();
    await b0.engine.syncNow();

    // A clean stop: no check, so the lost change stays lost until one is asked for.
    const b = await loseFeedWhileDown(b0, false, async () => {
      await write(a, 'notes.txt', 'v2 from laptop');
      await a.engine.syncNow();
    });
    await b.engine.syncNow();
    expect(b.engine.lastCheck).toBeUndefined();
    expect(await fsp.readFile(nodePath.join(b.folder, 'notes.txt'), 'utf8')).toBe('v1');
    await write(b, 'notes.txt', 'v2 from desktop, edited while the server changed');

    // Asked for (the UI's "check now"): the server's version is kept beside ours.
    const found = await b.engine.checkConsistency();
    expect(found.paths).toEqual(['notes.txt']);
    await b.engine.syncNow();
    await a.engine.syncNow();
    const tree = await localTree(b.folder);
    expect(sorted(tree)).toEqual(sorted(await localTree(a.folder)));
    const contents = await Promise.all(
      [...tree.keys()].map((p) => fsp.readFile(nodePath.join(b.folder, p), 'utf8')),
    );
    expect(contents.sort()).toEqual(['v2 from desktop, edited while the server changed', 'v2 from laptop']);
  });
});
