/**
 * Names that are unsafe on another platform (issue #14): a Linux device may create
 * `..\..\x`, `CON`, `a:b`, `trailing.`; a Windows device must store them under encoded
 * names inside its folder (never outside, never dropped), show why, and send edits back
 * under the ORIGINAL remote names. The Windows device here is a real engine with the win32
 * path rules on Linux; a symbolic link inside its folder pointing out is never followed.
 */
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { ProxyClient } from '@weft/core';
import { encodeBundle } from '@weft/wire';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type Device,
  type TestProxy,
  enrol,
  remoteTree,
  startDevice,
  startTestProxy,
  tempDir,
} from '../src/harness.ts';

const NAMES: Record<string, string> = {
  '..\\..\\x': '..＼..＼x',
  CON: 'CON＿',
  'AUX.txt': 'AUX＿.txt',
  'a:b': 'a：b',
  'trailing.': 'trailing．',
  'q?.md': 'q？.md',
  'a：b': 'a‛：b', // a literal look-alike is told apart from an encoded `:`
};

async function listAll(dir: string, base = dir): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fsp.readdir(dir, { withFileTypes: true })) {
    const full = nodePath.join(dir, e.name);
    out.push(nodePath.relative(base, full));
    if (e.isDirectory()) out.push(...(await listAll(full, base)));
  }
  return out.sort();
}

describe('names unsafe on another platform', () => {
  let proxy: TestProxy | undefined;
  const devices: Device[] = [];
  afterEach(async () => {
    for (const d of devices.splice(0)) await d.stop();
    await proxy?.close();
  });

  it('a Windows device stores them under encoded names inside its folder and edits go back to the original names', async () => {
    proxy = await startTestProxy('fs');
    const linux = await startDevice(proxy, 'linux', { engine: { pathRules: 'posix' } });
    devices.push(linux);
    for (const name of Object.keys(NAMES))
      await fsp.writeFile(nodePath.join(linux.folder, name), `from linux: ${name}`);
    await fsp.mkdir(nodePath.join(linux.folder, 'dir:1'));
    await fsp.writeFile(nodePath.join(linux.folder, 'dir:1', 'inner'), 'inside a folder Windows cannot name');
    await fsp.mkdir(nodePath.join(linux.folder, 'COM1'));
    await fsp.writeFile(nodePath.join(linux.folder, 'COM1', 'f'), 'inside a device-named folder');
    await linux.engine.syncNow();
    const original = [...(await remoteTree(linux.client)).keys()].sort();
    expect(original).toEqual([...Object.keys(NAMES), 'dir:1', 'dir:1/inner', 'COM1', 'COM1/f'].sort());

    // The Windows device's folder sits in a sandbox; a link inside it points out of it.
    const sandbox = await tempDir('win');
    const folder = nodePath.join(sandbox, 'Weft');
    const outside = nodePath.join(sandbox, 'outside');
    await fsp.mkdir(folder, { recursive: true });
    await fsp.mkdir(outside);
    await fsp.symlink(outside, nodePath.join(folder, 'link'));
    const win = await startDevice(proxy, 'windows', {
      folder,
      stateDir: nodePath.join(sandbox, 'state'),
      engine: { pathRules: 'win32', caseInsensitive: true },
    });
    devices.push(win);
    await win.engine.syncNow();

    // Every entry is there under its encoded name, nothing is dropped, nothing is outside.
    for (const [remote, local] of Object.entries(NAMES)) {
      expect(await fsp.readFile(nodePath.join(folder, local), 'utf8')).toBe(`from linux: ${remote}`);
    }
    expect(await fsp.readFile(nodePath.join(folder, 'dir：1', 'inner'), 'utf8')).toBe(
      'inside a folder Windows cannot name',
    );
    expect(await fsp.readFile(nodePath.join(folder, 'COM1＿', 'f'), 'utf8')).toBe(
      'inside a device-named folder',
    );
    expect((await fsp.readdir(sandbox)).sort()).toEqual(['Weft', 'outside', 'state']);
    expect(await fsp.readdir(outside)).toEqual([]);
    const onDisk = await listAll(folder);
    expect(onDisk.some((n) => /[\\:?]/.test(n) || /^(CON|AUX|COM1)(\.|$)/i.test(n))).toBe(false);

    // The status says which names were stored otherwise, and why.
    const storedAs = win.engine.getStatus().storedAs ?? [];
    expect(storedAs.find((s) => s.path === 'AUX.txt')?.notice).toBe(
      'Stored as "AUX＿.txt" because Windows reserves the name "AUX.txt"',
    );
    expect(storedAs.map((s) => s.path).sort()).toEqual(
      ['..\\..\\x', 'CON', 'AUX.txt', 'a:b', 'trailing.', 'q?.md', 'a：b', 'dir:1', 'COM1'].sort(),
    );

    // A pass with nothing changed sends nothing: the names map back exactly.
    await win.engine.syncNow();
    expect([...(await remoteTree(win.client)).keys()].sort()).toEqual(original);

    // Edits under encoded names go up to the original names; a new file too.
    await fsp.writeFile(nodePath.join(folder, 'CON＿'), 'edited on windows');
    await fsp.writeFile(nodePath.join(folder, 'a：b'), 'colon edited on windows');
    await fsp.writeFile(nodePath.join(folder, 'dir：1', 'inner'), 'inner edited on windows');
    await fsp.writeFile(nodePath.join(folder, 'new＊file'), 'created on windows');
    await win.engine.syncNow();
    const after = await remoteTree(win.client);
    expect([...after.keys()].sort()).toEqual([...original, 'new*file'].sort());

    await linux.engine.syncNow();
    expect(await fsp.readFile(nodePath.join(linux.folder, 'CON'), 'utf8')).toBe('edited on windows');
    expect(await fsp.readFile(nodePath.join(linux.folder, 'a:b'), 'utf8')).toBe('colon edited on windows');
    expect(await fsp.readFile(nodePath.join(linux.folder, 'a：b'), 'utf8')).toBe('from linux: a：b');
    expect(await fsp.readFile(nodePath.join(linux.folder, 'dir:1', 'inner'), 'utf8')).toBe(
      'inner edited on windows',
    );
    expect(await fsp.readFile(nodePath.join(linux.folder, 'new*file'), 'utf8')).toBe('created on windows');

    // A remote folder whose local place is a link pointing out: refused, nothing written out there.
    await fsp.mkdir(nodePath.join(linux.folder, 'link'));
    await fsp.writeFile(nodePath.join(linux.folder, 'link', 'payload'), 'must not leave the folder');
    await linux.engine.syncNow();
    await win.engine.syncNow();
    expect(await fsp.readdir(outside)).toEqual([]);
    expect(win.engine.getStatus().warnings.some((w) => w.includes('symbolic link'))).toBe(true);
    // Renaming on the Linux side moves the encoded file on Windows, and the notice follows.
    await fsp.rename(nodePath.join(linux.folder, 'trailing.'), nodePath.join(linux.folder, 'plain'));
    await linux.engine.syncNow();
    await win.engine.syncNow();
    expect(await fsp.readFile(nodePath.join(folder, 'plain'), 'utf8')).toBe('from linux: trailing.');
    expect((win.engine.getStatus().storedAs ?? []).some((s) => s.path === 'trailing.')).toBe(false);
  });

  it('a name too long for the disk once encoded is stored under a hashed name, edited, and still maps back after a restart', async () => {
    proxy = await startTestProxy('fs');
    // 80 × U+2401 is 240 bytes; on disk each is escaped (a look-alike of a control): 480 bytes.
    const long = '\u2401'.repeat(80) + '.txt';
    const uploader = new ProxyClient({ baseUrl: proxy.url, token: await enrol(proxy, 'alice', 'api') });
    const content = Buffer.from('long name');
    const [r] = await uploader.uploadBundle(
      encodeBundle([
        {
          path: `docs/${long}`,
          rev: null,
          mtimeMs: Date.now(),
          sha256: createHash('sha256').update(content).digest('hex'),
          content,
        },
      ]),
    );
    expect(r?.result.status).toBe('applied');

    const sandbox = await tempDir('long');
    const folder = nodePath.join(sandbox, 'Weft');
    const stateDir = nodePath.join(sandbox, 'state');
    let dev = await startDevice(proxy, 'linux', { folder, stateDir, engine: { pathRules: 'posix' } });
    devices.push(dev);
    await dev.engine.syncNow();
    const names = await fsp.readdir(nodePath.join(folder, 'docs'));
    expect(names).toHaveLength(1);
    const local = names[0] ?? '';
    expect(Buffer.byteLength(local)).toBeLessThanOrEqual(255);
    expect(local).toMatch(/\u201B~[0-9a-f]{16}$/);
    expect(await fsp.readFile(nodePath.join(folder, 'docs', local), 'utf8')).toBe('long name');
    expect(dev.engine.getStatus().storedAs?.[0]?.path).toBe(`docs/${long}`);

    // After a restart the journal maps the hashed name back: nothing new goes up.
    await dev.stop();
    devices.splice(devices.indexOf(dev), 1);
    dev = await startDevice(proxy, 'linux', {
      folder,
      stateDir,
      engine: { pathRules: 'posix', client: dev.client },
    });
    devices.push(dev);
    await dev.engine.syncNow();
    expect([...(await remoteTree(dev.client)).keys()].sort()).toEqual(['docs', `docs/${long}`]);
    await fsp.writeFile(nodePath.join(folder, 'docs', local), 'edited');
    await dev.engine.syncNow();
    const remote = await remoteTree(dev.client);
    expect([...remote.keys()].sort()).toEqual(['docs', `docs/${long}`]);
    expect(remote.get(`docs/${long}`)).toBe(createHash('sha256').update('edited').digest('hex'));
  });
});
