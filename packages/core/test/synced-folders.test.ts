/**
 * Several synced folders (issue #19): the agent's folder list (add, remove, kept across a
 * restart, refusals in words with nothing changed), and engines scoped to a folder's own
 * server root (remote/scoped-store.ts) on the in-memory server: two folders never see each
 * other's files, two devices adding a folder under the same name sync it, moves across a
 * root's edge, the consistency check agrees with the scoped Merkle view, and a bundle whose
 * longer server paths no longer fit is sent in two.
 */
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { MAX_BUNDLE_BYTES, decodeBundle, encodeBundle } from '@weft/wire';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent.ts';
import { Engine } from '../src/engine.ts';
import { MemoryServer } from '../src/remote/memory-store.ts';
import type { RemoteStore } from '../src/remote/remote-store.ts';
import { folderRoot, scopedRemote, withoutFolderRoots } from '../src/remote/scoped-store.ts';
import { memorySecretStore } from '../src/secret-store.ts';

const roots: string[] = [];
const engines: Engine[] = [];
afterEach(async () => {
  for (const e of engines.splice(0)) await e.stop();
  for (const r of roots.splice(0)) await fsp.rm(r, { recursive: true, force: true });
});

async function tmp(prefix: string): Promise<string> {
  const root = await fsp.realpath(await fsp.mkdtemp(nodePath.join(os.tmpdir(), `weft-${prefix}-`)));
  roots.push(root);
  return root;
}

/** An agent that cannot reach its server (enough for the folder list and its checks). */
async function offlineAgent(root: string) {
  return startAgent({
    folder: nodePath.join(root, 'Weft'),
    stateDir: nodePath.join(root, 'state'),
    server: 'http://127.0.0.1:9',
    token: 'wfd_' + 'x'.repeat(40),
    secrets: memorySecretStore(),
    uiDir: '',
    watch: false,
  });
}

const sha = (s: string | Uint8Array): string => createHash('sha256').update(s).digest('hex');

describe("the agent's folder list", () => {
  it('adds, keeps across a restart, and removes folders; removing deletes nothing', async () => {
    const root = await tmp('folders');
    await fsp.mkdir(nodePath.join(root, 'Photos'));
    await fsp.mkdir(nodePath.join(root, 'Work', 'Papers'), { recursive: true });
    await fsp.writeFile(nodePath.join(root, 'Photos', 'a.jpg'), 'a');
    let agent = await offlineAgent(root);
    try {
      const main = (await agent.ui.handlers.listFolders({})).folders;
      expect(main.map((f) => [f.id, f.path, f.primary, f.remoteRoot])).toEqual([
        ['main', nodePath.join(root, 'Weft'), true, ''],
      ]);
      await agent.ui.handlers.addFolder({ path: nodePath.join(root, 'Photos') });
      const { folders } = await agent.ui.handlers.addFolder({
        path: nodePath.join(root, 'Work', 'Papers'),
        name: 'Research',
      });
      expect(folders.map((f) => [f.path, f.name, f.remoteRoot, f.primary])).toEqual([
        [nodePath.join(root, 'Weft'), '', '', true],
        [nodePath.join(root, 'Photos'), 'Photos', '.weft/folders/Photos', false],
        [nodePath.join(root, 'Work', 'Papers'), 'Research', '.weft/folders/Research', false],
      ]);
      // Each added folder has an engine of its own (offline here), and the status lists them.
      expect(agent.folders.running().map((r) => r.folder.name)).toEqual(['Photos', 'Research']);
      const status = await agent.ui.handlers.getStatus({});
      expect(status.folders?.map((f) => f.name)).toEqual(['', 'Photos', 'Research']);
    } finally {
      await agent.stop();
    }

    agent = await offlineAgent(root);
    try {
      const { folders } = await agent.ui.handlers.listFolders({});
      expect(folders.map((f) => f.name)).toEqual(['', 'Photos', 'Research']);
      const photos = folders[1];
      if (!photos) throw new Error('no Photos');
      const after = await agent.ui.handlers.removeFolder({ id: photos.id });
      expect(after.folders.map((f) => f.name)).toEqual(['', 'Research']);
      expect(agent.folders.running().map((r) => r.folder.name)).toEqual(['Research']);
      // Nothing deleted here.
      expect(await fsp.readFile(nodePath.join(root, 'Photos', 'a.jpg'), 'utf8')).toBe('a');
      await expect(agent.ui.handlers.removeFolder({ id: 'main' })).rejects.toThrow(/main Weft folder/);
      await expect(agent.ui.handlers.removeFolder({ id: photos.id })).rejects.toThrow(/no such/);
    } finally {
      await agent.stop();
    }
    agent = await offlineAgent(root);
    try {
      expect((await agent.ui.handlers.listFolders({})).folders.map((f) => f.name)).toEqual(['', 'Research']);
    } finally {
      await agent.stop();
    }
  });

  it('a folder gone from its place at start is shown missing, never made again empty', async () => {
    const root = await tmp('missing');
    await fsp.mkdir(nodePath.join(root, 'Disk', 'Photos'), { recursive: true });
    let agent = await offlineAgent(root);
    try {
      await agent.ui.handlers.addFolder({ path: nodePath.join(root, 'Disk', 'Photos') });
    } finally {
      await agent.stop();
    }
    await fsp.rename(nodePath.join(root, 'Disk'), nodePath.join(root, 'Unplugged'));
    agent = await offlineAgent(root);
    try {
      const photos = (await agent.ui.handlers.listFolders({})).folders[1];
      expect(photos?.state).toBe('error');
      expect(photos?.error).toMatch(/is missing/);
      expect(agent.folders.running()).toEqual([]);
      expect(await fsp.stat(nodePath.join(root, 'Disk')).catch(() => 'absent')).toBe('absent');
      expect((await agent.ui.handlers.getStatus({})).error).toMatch(/^Photos: The folder .* is missing/);
    } finally {
      await agent.stop();
    }
  });

  it('a folder whose engine cannot start is shown with why; the others sync on', async () => {
    const root = await tmp('broken');
    await fsp.mkdir(nodePath.join(root, 'A'));
    await fsp.mkdir(nodePath.join(root, 'B'));
    let agent = await offlineAgent(root);
    let a: string | undefined;
    try {
      await agent.ui.handlers.addFolder({ path: nodePath.join(root, 'A') });
      a = (await agent.ui.handlers.addFolder({ path: nodePath.join(root, 'B') })).folders[1]?.id;
    } finally {
      await agent.stop();
    }
    if (!a) throw new Error('no folder A');
    // A's journal is not a database any more.
    await fsp.writeFile(
      nodePath.join(root, 'state', 'folders', a, 'journal.db'),
      'not a database, '.repeat(512),
    );
    agent = await offlineAgent(root);
    try {
      const [main, first, second] = (await agent.ui.handlers.listFolders({})).folders;
      expect(first?.state).toBe('error');
      expect(first?.error).toMatch(/database/);
      expect(second?.error ?? '').not.toMatch(/database/);
      expect(main?.error ?? '').not.toMatch(/database/);
      expect(agent.folders.running().map((r) => r.folder.name)).toEqual(['B']);
    } finally {
      await agent.stop();
    }
  });

  it('refuses what cannot be a synced folder, in words, and changes nothing', async () => {
    const root = await tmp('refusals');
    const at = (...p: string[]): string => nodePath.join(root, ...p);
    await fsp.mkdir(at('Photos', 'Trips'), { recursive: true });
    await fsp.mkdir(at('Other', 'Photos'), { recursive: true });
    await fsp.mkdir(at('Weft', 'Inside'), { recursive: true });
    await fsp.writeFile(at('file.txt'), 'x');
    await fsp.symlink(at('Photos'), at('photos-link'));
    const agent = await offlineAgent(root);
    try {
      await agent.ui.handlers.addFolder({ path: at('Photos') });
      const saved = await fsp.readFile(at('state', 'folders.json'), 'utf8');
      const refusals: [string, string | undefined, RegExp][] = [
        ['', undefined, /Type the folder/],
        ['Photos', undefined, /whole path/],
        [at('missing'), undefined, /no folder at/],
        [at('file.txt'), undefined, /is a file, not a folder/],
        [at('Photos'), undefined, /already synced/],
        [at('photos-link'), undefined, /already synced/],
        [at('Photos', 'Trips'), undefined, /inside the synced folder “Photos”/],
        [root, undefined, /holds the folder where Weft keeps its own records/],
        [at('Weft'), undefined, /already synced \(the main Weft folder\)/],
        [at('Weft', 'Inside'), undefined, /inside the main Weft folder/],
        [at('state'), undefined, /where Weft keeps its own records/],
        [at('Other', 'Photos'), undefined, /named “Photos” exists already/],
        [at('Other'), 'photos', /named “photos” exists already/],
        [at('Other'), '.weft-x', /cannot name a folder/],
        [at('Other'), 'a/b', /cannot name a folder/],
        [at('Other'), '..', /cannot name a folder/],
      ];
      for (const [path, name, why] of refusals) {
        const answer = await agent.ui.handlers.addFolder({ path, ...(name ? { name } : {}) }).then(
          () => 'added',
          (e: Error) => e.message,
        );
        expect(answer, path).toMatch(why);
      }
      expect(await fsp.readFile(at('state', 'folders.json'), 'utf8')).toBe(saved);
      expect((await agent.ui.handlers.listFolders({})).folders).toHaveLength(2);
      expect(agent.folders.running()).toHaveLength(1);
    } finally {
      await agent.stop();
    }
  });
});

describe('engines scoped to a server root (in-memory server)', () => {
  const open = async (folder: string, stateDir: string, client: RemoteStore, name: string) => {
    const e = await Engine.open({
      folder,
      stateDir,
      client,
      deviceName: name,
      watch: false,
      liveFeed: false,
      settleMs: 0,
      offlineRetryMs: 3_600_000,
      caseInsensitive: false,
    });
    await e.start();
    engines.push(e);
    return e;
  };
  const settle = async (list: Engine[]): Promise<void> => {
    for (let i = 0; i < 6; i++) for (const e of list) await e.syncNow();
  };
  const read = (p: string): Promise<string | undefined> => fsp.readFile(p, 'utf8').catch(() => undefined);

  it('keeps folders apart, syncs a folder between devices that name it alike, and agrees on Merkle', async () => {
    const root = await tmp('scoped');
    const server = new MemoryServer();
    const at = (...p: string[]): string => nodePath.join(root, ...p);
    const laptopMain = server.connect('alice', 'laptop');
    const laptopPhotos = server.connect('alice', 'laptop');
    const desktopPhotos = server.connect('alice', 'desktop');
    const desktopMain = server.connect('alice', 'desktop');
    const lm = await open(
      at('laptop', 'Weft'),
      at('laptop', 'state'),
      withoutFolderRoots(laptopMain),
      'laptop',
    );
    const lp = await open(
      at('laptop', 'Photos'),
      at('laptop', 'state-photos'),
      scopedRemote(laptopPhotos, folderRoot('Photos')),
      'laptop',
    );
    const dp = await open(
      at('desktop', 'Pictures'),
      at('desktop', 'state-photos'),
      scopedRemote(desktopPhotos, folderRoot('Photos')),
      'desktop',
    );
    const dm = await open(
      at('desktop', 'Weft'),
      at('desktop', 'state'),
      withoutFolderRoots(desktopMain),
      'desktop',
    );
    const all = [lm, lp, dp, dm];
    await fsp.mkdir(at('laptop', 'Photos', 'trip'), { recursive: true });
    await fsp.writeFile(at('laptop', 'Photos', 'trip', 'beach.jpg'), 'sand');
    await fsp.writeFile(at('laptop', 'Weft', 'notes.txt'), 'notes');
    await fsp.writeFile(at('desktop', 'Pictures', 'cat.jpg'), 'cat');
    await settle(all);

    // The server: the main folder's file at the top, the Photos folder under its root.
    const tree = server.tree('alice');
    expect(tree.get('notes.txt')).toBe(sha('notes'));
    expect(tree.get('.weft/folders/Photos/trip/beach.jpg')).toBe(sha('sand'));
    expect(tree.get('.weft/folders/Photos/cat.jpg')).toBe(sha('cat'));
    expect(tree.has('trip/beach.jpg')).toBe(false);
    // Each device: Photos in its Photos folder (whatever it is called here), nothing crossed.
    expect(await read(at('desktop', 'Pictures', 'trip', 'beach.jpg'))).toBe('sand');
    expect(await read(at('laptop', 'Photos', 'cat.jpg'))).toBe('cat');
    expect(await read(at('desktop', 'Weft', 'notes.txt'))).toBe('notes');
    expect((await fsp.readdir(at('desktop', 'Weft'))).sort()).toEqual(['notes.txt']);
    expect((await fsp.readdir(at('laptop', 'Photos'))).sort()).toEqual(['cat.jpg', 'trip']);

    // Edits, a rename and a delete inside the folder travel; the main folders stay as they were.
    await fsp.rename(at('desktop', 'Pictures', 'trip'), at('desktop', 'Pictures', 'holiday'));
    await fsp.writeFile(at('desktop', 'Pictures', 'cat.jpg'), 'cat, cropped');
    await settle(all);
    expect(await read(at('laptop', 'Photos', 'holiday', 'beach.jpg'))).toBe('sand');
    expect(await read(at('laptop', 'Photos', 'cat.jpg'))).toBe('cat, cropped');
    await fsp.rm(at('laptop', 'Photos', 'cat.jpg'));
    await settle(all);
    expect(await read(at('desktop', 'Pictures', 'cat.jpg'))).toBeUndefined();
    expect((await fsp.readdir(at('laptop', 'Weft'))).sort()).toEqual(['notes.txt']);

    // Across the root's edge (another client moving things on the server): into the root is
    // a new file here, out of it a delete here.
    const other = server.connect('alice', 'tool');
    await other.ops([{ op: 'move', from: 'notes.txt', to: '.weft/folders/Photos/notes.txt' }]);
    await settle(all);
    expect(await read(at('laptop', 'Photos', 'notes.txt'))).toBe('notes');
    expect(await read(at('laptop', 'Weft', 'notes.txt'))).toBeUndefined();
    await other.ops([{ op: 'move', from: '.weft/folders/Photos/notes.txt', to: 'back.txt' }]);
    await settle(all);
    expect(await read(at('desktop', 'Pictures', 'notes.txt'))).toBeUndefined();
    expect(await read(at('desktop', 'Weft', 'back.txt'))).toBe('notes');

    // The consistency check of a scoped engine (and of a main one) finds nothing to repair.
    for (const e of all) expect((await e.checkConsistency()).paths).toEqual([]);
  });

  it('sends a bundle in two when the root in front of its paths makes it too big', async () => {
    const server = new MemoryServer();
    const raw = server.connect('alice', 'laptop');
    const sizes: number[] = [];
    // The same store, counting the bundles that reach it.
    const counting: RemoteStore = Object.assign(Object.create(raw) as RemoteStore, {
      uploadBundle: (bytes: Uint8Array) => {
        sizes.push(bytes.byteLength);
        return raw.uploadBundle(bytes);
      },
    });
    const view = scopedRemote(counting, folderRoot('A rather long folder name, to lengthen every path'));
    // Many tiny files filling a bundle up to its limit with the short paths.
    const entries = [];
    let bytes = 64;
    for (let i = 0; bytes < MAX_BUNDLE_BYTES - 600; i++) {
      const content = Buffer.alloc(400, i % 251);
      const path = `f${i}.bin`;
      entries.push({ path, rev: null, mtimeMs: 1000, sha256: sha(content), content });
      bytes += 400 + path.length + 60;
    }
    let encoded = encodeBundle(entries);
    while (encoded.byteLength > MAX_BUNDLE_BYTES) {
      entries.pop();
      encoded = encodeBundle(entries);
    }
    const results = await view.uploadBundle(encoded);
    expect(sizes.length).toBeGreaterThan(1);
    for (const s of sizes) expect(s).toBeLessThanOrEqual(MAX_BUNDLE_BYTES);
    expect(results.map((r) => r.path)).toEqual(entries.map((e) => e.path));
    expect(results.every((r) => r.result.status === 'applied')).toBe(true);
    const listed = await view.list('', true);
    expect(listed.entries).toHaveLength(entries.length);
    expect(decodeBundle(encoded).entries).toHaveLength(entries.length);
  });
});
