/**
 * Version history and deleted files of a folder added in Settings (issue #19), against a
 * real proxy: the laptop and the desktop sync a folder named "Notes" (under
 * `.weft/folders/Notes` in Weft storage). The laptop's History calls name the folder
 * (`syncedFolder`) and see its paths as they are in that folder; restoring an older version
 * and a deleted file are writes under the folder's root that reach the desktop's disk, and
 * nothing of it shows in the main folder's history. An unknown folder name is refused.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { type RunningAgent, startAgent } from '@weft/core';
import { type RunningProxyServer, startProxyServer } from '@weft/proxy-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../src/harness.ts';

const POLL = { timeout: 60_000, interval: 200 };

describe('history of an added synced folder, against a real proxy', () => {
  let server: RunningProxyServer;
  let root: string;
  const agents: RunningAgent[] = [];
  const at = (...p: string[]): string => nodePath.join(root, ...p);

  const start = async (device: string): Promise<RunningAgent> => {
    const agent = await startAgent({
      folder: at(device, 'Weft'),
      stateDir: at(device, 'state'),
      server: server.url,
      user: 'alice',
      deviceName: device,
      adminToken: server.adminToken,
      settleMs: 50,
      uiDir: '',
      openBrowser: () => undefined,
    });
    agents.push(agent);
    return agent;
  };
  const read = (...p: string[]): Promise<string | undefined> =>
    fsp.readFile(at(...p), 'utf8').catch(() => undefined);

  beforeAll(async () => {
    root = await fsp.realpath(await tempDir('folder-history'));
    process.env.WEFT_SECRET_KEY_FILE = at('secret.key');
    server = await startProxyServer({
      dataDir: await tempDir('proxy'),
      port: 0,
      adminToken: randomBytes(24).toString('hex'),
      logLevel: 'warn',
      objectTier: { type: 'fs' },
      shares: { enabled: false },
      versions: { retentionDays: 30 },
    });
  });

  afterAll(async () => {
    for (const a of agents.splice(0)) await a.stop();
    await server?.close();
    delete process.env.WEFT_SECRET_KEY_FILE;
  });

  it('restores a version and a deleted file of the added folder; both reach the other device', async () => {
    await fsp.mkdir(at('laptop', 'Notes'), { recursive: true });
    await fsp.mkdir(at('desktop', 'Notes'), { recursive: true });
    await fsp.writeFile(at('laptop', 'Notes', 'plan.txt'), 'first plan');
    await fsp.writeFile(at('laptop', 'Notes', 'old.txt'), 'to be deleted');
    const laptop = await start('laptop');
    const desktop = await start('desktop');
    await laptop.ui.handlers.addFolder({ path: at('laptop', 'Notes') });
    await desktop.ui.handlers.addFolder({ path: at('desktop', 'Notes') });
    await expect.poll(() => read('desktop', 'Notes', 'plan.txt'), POLL).toBe('first plan');
    await expect.poll(() => read('desktop', 'Notes', 'old.txt'), POLL).toBe('to be deleted');

    // A second version, written on the desktop, reaches the laptop.
    await fsp.writeFile(at('desktop', 'Notes', 'plan.txt'), 'second plan');
    await expect.poll(() => read('laptop', 'Notes', 'plan.txt'), POLL).toBe('second plan');

    const h = laptop.ui.handlers;
    let history = await h.fileHistory({ path: 'plan.txt', syncedFolder: 'Notes' });
    await expect
      .poll(async () => {
        history = await h.fileHistory({ path: 'plan.txt', syncedFolder: 'Notes' });
        return history.available ? history.versions.length : 0;
      }, POLL)
      .toBeGreaterThanOrEqual(2);
    if (!history.available) throw new Error('no history');
    expect(history.path).toBe('plan.txt');
    const older = history.versions.find((v) => !v.current && v.size === 'first plan'.length);
    if (!older) throw new Error(`no older version in ${JSON.stringify(history.versions)}`);
    // The main folder has no such file: its history is not the added folder's.
    expect((await h.fileHistory({ path: 'plan.txt' })).available).toBe(false);

    const restored = await h.restoreVersion({ path: 'plan.txt', version: older.id, syncedFolder: 'Notes' });
    expect(restored.path).toBe('plan.txt');
    await expect.poll(() => read('desktop', 'Notes', 'plan.txt'), POLL).toBe('first plan');
    await expect.poll(() => read('laptop', 'Notes', 'plan.txt'), POLL).toBe('first plan');
    expect(await read('laptop', 'Weft', 'plan.txt')).toBeUndefined();

    // A file deleted on the desktop is listed in the folder's deleted files and comes back.
    await fsp.rm(at('desktop', 'Notes', 'old.txt'));
    await expect.poll(() => read('laptop', 'Notes', 'old.txt'), POLL).toBeUndefined();
    const deleted = async (syncedFolder?: string): Promise<string[]> => {
      const r = await h.deletedFiles({ folder: '', ...(syncedFolder ? { syncedFolder } : {}) });
      return r.available ? r.files.map((f) => f.path) : [`unavailable: ${r.reason}`];
    };
    await expect.poll(() => deleted('Notes'), POLL).toEqual(['old.txt']);
    // The main folder's deleted files are its own (the added folders' roots are not listed).
    expect(await deleted()).toEqual([]);
    const gone = await h.deletedFiles({ folder: '', syncedFolder: 'Notes' });
    if (!gone.available || !gone.files[0]) throw new Error('no deleted file');
    expect(gone.folder).toBe('');
    await h.restoreVersion({ path: 'old.txt', version: gone.files[0].version, syncedFolder: 'Notes' });
    await expect.poll(() => read('desktop', 'Notes', 'old.txt'), POLL).toBe('to be deleted');
    await expect.poll(() => read('laptop', 'Notes', 'old.txt'), POLL).toBe('to be deleted');

    // A folder this computer does not sync: refused in words, nothing restored.
    await expect(
      h.restoreVersion({ path: 'plan.txt', version: older.id, syncedFolder: 'Elsewhere' }),
    ).rejects.toThrow('There is no synced folder named “Elsewhere”.');
    const unknown = await h.fileHistory({ path: 'plan.txt', syncedFolder: 'Elsewhere' });
    expect(unknown).toEqual({
      available: false,
      reason: 'There is no synced folder named “Elsewhere”.',
    });
    expect(desktop.ui.status().folders?.map((f) => f.name)).toEqual(['', 'Notes']);
  });
});
