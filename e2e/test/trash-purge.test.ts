/**
 * The agent purges its local trash after a sync pass that put something there (issue #19),
 * with the size limit as set in Settings at that moment: a file deleted on another device
 * goes to this computer's trash, and the pass that did it is followed by a purge that takes
 * the oldest item out to keep the trash under its limit — not an hour later.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { type RunningAgent, memorySecretStore, startAgent } from '@weft/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Device, type TestProxy, enrol, startDevice, startTestProxy, tempDir } from '../src/harness.ts';

const exists = (p: string): Promise<boolean> =>
  fsp.lstat(p).then(
    () => true,
    () => false,
  );

/** A slot name as the trash makes them (local-fs.ts Trash), for a time `ms`. */
const slotName = (ms: number, suffix: string): string =>
  new Date(ms).toISOString().replace(/[:.]/g, '-') + '-' + suffix;

describe('local trash purge after a pass', () => {
  let proxy: TestProxy;
  let agent: RunningAgent;
  let phone: Device;
  let root: string;

  beforeAll(async () => {
    root = await tempDir('trash-purge');
    proxy = await startTestProxy('fs');
    agent = await startAgent({
      folder: nodePath.join(root, 'Weft'),
      stateDir: nodePath.join(root, 'state'),
      server: proxy.url,
      user: 'alice',
      deviceName: 'laptop',
      token: await enrol(proxy, 'alice', 'laptop'),
      secrets: memorySecretStore(),
      watch: false,
      settleMs: 0,
    });
    phone = await startDevice(proxy, 'phone', { user: 'alice' });
  });

  afterAll(async () => {
    await agent?.stop();
    await phone?.stop();
    await proxy?.close();
  });

  it('a remote delete trashes the local copy; the purge after that pass enforces the size limit, oldest first', async () => {
    const trashDir = nodePath.join(root, 'state', 'trash');
    await fsp.writeFile(nodePath.join(phone.folder, 'notes.txt'), 'shared notes');
    await phone.engine.syncNow();
    await agent.engine.syncNow();
    const local = nodePath.join(root, 'Weft', 'notes.txt');
    expect(await fsp.readFile(local, 'utf8')).toBe('shared notes');

    // An old version of 2 MiB trashed yesterday (within the 30 days), and a limit of 1 MiB set now.
    const bulky = nodePath.join(trashDir, slotName(Date.now() - 86_400_000, 'aaaaaa'));
    await fsp.mkdir(bulky, { recursive: true });
    await fsp.writeFile(nodePath.join(bulky, 'video.bin'), Buffer.alloc(2 * 1024 * 1024));
    await agent.ui.handlers.setSettings({ trashLimitMiB: 1 });

    await fsp.rm(nodePath.join(phone.folder, 'notes.txt'));
    await phone.engine.syncNow();
    await agent.engine.syncNow();
    expect(await exists(local)).toBe(false);
    // The deleted file is in the trash; the bulky old one goes by the purge that follows.
    await expect.poll(() => exists(bulky), { timeout: 30_000 }).toBe(false);
    const slots = await fsp.readdir(trashDir);
    expect(slots).toHaveLength(1);
    expect(await fsp.readFile(nodePath.join(trashDir, slots[0] ?? '', 'notes.txt'), 'utf8')).toBe(
      'shared notes',
    );
  });
});
