/**
 * Several synced folders per device (issue #19), against a real proxy: Alice's laptop and
 * desktop agents each add a folder named "Photos" (kept in different places on each); its
 * files cross between them under `.weft/folders/Photos` in Weft storage and never appear in
 * either main folder, and the main folders' files never appear in Photos. The laptop agent
 * restarted keeps its list and goes on syncing the folder; the desktop removing it stops its
 * syncing there and deletes nothing, here or in Weft storage.
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { ProxyClient, type RunningAgent, startAgent } from '@weft/core';
import { type RunningProxyServer, startProxyServer } from '@weft/proxy-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../src/harness.ts';

const POLL = { timeout: 60_000, interval: 200 };
const sha = (b: string | Uint8Array): string => createHash('sha256').update(b).digest('hex');

describe('several synced folders per device, against a real proxy', () => {
  let server: RunningProxyServer;
  let root: string;
  let probe: ProxyClient;
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
  const stop = async (agent: RunningAgent): Promise<void> => {
    agents.splice(agents.indexOf(agent), 1);
    await agent.stop();
  };
  const read = (...p: string[]): Promise<string | undefined> =>
    fsp.readFile(at(...p), 'utf8').catch(() => undefined);
  const onServer = async (p: string): Promise<string | undefined> => (await probe.stat(p))?.sha256;
  const idle = async (agent: RunningAgent): Promise<void> => {
    await expect
      .poll(() => {
        const s = agent.ui.status();
        return s.state === 'idle' && s.pendingOperations === 0;
      }, POLL)
      .toBe(true);
  };

  beforeAll(async () => {
    root = await fsp.realpath(await tempDir('synced-folders'));
    process.env.WEFT_SECRET_KEY_FILE = at('secret.key');
    server = await startProxyServer({
      dataDir: await tempDir('proxy'),
      port: 0,
      adminToken: randomBytes(24).toString('hex'),
      logLevel: 'warn',
      objectTier: { type: 'fs' },
      shares: { enabled: false },
    });
    probe = new ProxyClient({ baseUrl: server.url, token: (await server.enrol('alice', 'probe')).token });
  });

  afterAll(async () => {
    for (const a of agents.splice(0)) await a.stop();
    await server?.close();
    delete process.env.WEFT_SECRET_KEY_FILE;
  });

  it('two folders sync independently; the list survives a restart; removing deletes nothing', async () => {
    await fsp.mkdir(at('laptop', 'Photos'), { recursive: true });
    await fsp.mkdir(at('desktop', 'Pictures', 'Photos'), { recursive: true });
    await fsp.writeFile(at('laptop', 'Photos', 'beach.jpg'), 'sand');
    let laptop = await start('laptop');
    const desktop = await start('desktop');
    await fsp.writeFile(at('laptop', 'Weft', 'notes.txt'), 'main folder');

    await laptop.ui.handlers.addFolder({ path: at('laptop', 'Photos') });
    const added = await desktop.ui.handlers.addFolder({ path: at('desktop', 'Pictures', 'Photos') });
    expect(added.folders.map((f) => [f.name, f.remoteRoot])).toEqual([
      ['', ''],
      ['Photos', '.weft/folders/Photos'],
    ]);

    // Photos crosses under its own root; the main folder's file stays in the main folders.
    await expect.poll(() => read('desktop', 'Pictures', 'Photos', 'beach.jpg'), POLL).toBe('sand');
    await expect.poll(() => read('desktop', 'Weft', 'notes.txt'), POLL).toBe('main folder');
    expect(await onServer('.weft/folders/Photos/beach.jpg')).toBe(sha('sand'));
    expect(await onServer('beach.jpg')).toBeUndefined();
    const big = randomBytes(5 * 1024 * 1024); // a large file: a transfer, not a bundle
    await fsp.writeFile(at('desktop', 'Pictures', 'Photos', 'panorama.raw'), big);
    await expect
      .poll(() => fsp.readFile(at('laptop', 'Photos', 'panorama.raw')).then(sha, () => ''), POLL)
      .toBe(sha(big));
    // An edit of the large file comes down as a delta under the folder's root.
    big.fill(7, 1000, 5000);
    await fsp.writeFile(at('laptop', 'Photos', 'panorama.raw'), big);
    await expect
      .poll(() => fsp.readFile(at('desktop', 'Pictures', 'Photos', 'panorama.raw')).then(sha, () => ''), POLL)
      .toBe(sha(big));
    await idle(laptop);
    await idle(desktop);
    expect((await fsp.readdir(at('laptop', 'Weft'))).sort()).toEqual(['notes.txt']);
    expect((await fsp.readdir(at('desktop', 'Weft'))).sort()).toEqual(['notes.txt']);
    expect((await fsp.readdir(at('laptop', 'Photos'))).sort()).toEqual(['beach.jpg', 'panorama.raw']);

    // Status: overall and per folder.
    const status = laptop.ui.status();
    expect(status.folders?.map((f) => [f.name, f.state, f.files])).toEqual([
      ['', 'idle', 1],
      ['Photos', 'idle', 2],
    ]);
    expect(status.files).toBe(3);
    expect(status.recent.some((r) => r.folder === 'Photos' && r.path === 'panorama.raw')).toBe(true);

    // Restarted, the laptop keeps its list and the folder goes on syncing both ways.
    await stop(laptop);
    await fsp.writeFile(at('laptop', 'Photos', 'while-off.txt'), 'made while Weft was off');
    laptop = await start('laptop');
    expect((await laptop.ui.handlers.listFolders({})).folders.map((f) => f.name)).toEqual(['', 'Photos']);
    await expect
      .poll(() => read('desktop', 'Pictures', 'Photos', 'while-off.txt'), POLL)
      .toBe('made while Weft was off');

    // The desktop stops syncing Photos: nothing is deleted there or in Weft storage, and the
    // laptop's next change no longer reaches it.
    const photos = (await desktop.ui.handlers.listFolders({})).folders.find((f) => f.name === 'Photos');
    if (!photos) throw new Error('no Photos on the desktop');
    await desktop.ui.handlers.removeFolder({ id: photos.id });
    expect((await desktop.ui.handlers.listFolders({})).folders.map((f) => f.name)).toEqual(['']);
    await fsp.writeFile(at('laptop', 'Photos', 'after.txt'), 'after the desktop left');
    await expect
      .poll(() => onServer('.weft/folders/Photos/after.txt'), POLL)
      .toBe(sha('after the desktop left'));
    await idle(desktop);
    expect(await read('desktop', 'Pictures', 'Photos', 'after.txt')).toBeUndefined();
    expect(await read('desktop', 'Pictures', 'Photos', 'beach.jpg')).toBe('sand');
    expect(await onServer('.weft/folders/Photos/beach.jpg')).toBe(sha('sand'));
    expect(await onServer('.weft/folders/Photos/panorama.raw')).toBe(sha(big));
  });
});
