/**
 * Names that differ only by case: two Linux devices may hold both `Notes.md` and `NOTES.md`;
 * a device whose disk folds case (macOS, Windows) must keep one and never overwrite it with
 * the other — nothing is lost, the other stays on the server, and the person is told.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type Device, type TestProxy, remoteTree, startDevice, startTestProxy } from '../src/harness.ts';

describe('case clashes', () => {
  let proxy: TestProxy | undefined;
  const devices: Device[] = [];
  afterEach(async () => {
    for (const d of devices.splice(0)) await d.stop();
    await proxy?.close();
  });

  it('a case-insensitive device keeps one of two names that differ by case and loses neither', async () => {
    proxy = await startTestProxy('fs');
    const linux = await startDevice(proxy, 'linux', { engine: { caseInsensitive: false } });
    devices.push(linux);
    await fsp.writeFile(nodePath.join(linux.folder, 'Notes.md'), 'first');
    await linux.engine.syncNow();
    // A second Linux device adds the other spelling through its own (case-sensitive) disk.
    const other = await startDevice(proxy, 'linux2', { engine: { caseInsensitive: false } });
    devices.push(other);
    await other.engine.syncNow();
    await fsp.writeFile(nodePath.join(other.folder, 'NOTES.md'), 'second');
    await other.engine.syncNow();
    expect([...(await remoteTree(other.client)).keys()].sort()).toEqual(['NOTES.md', 'Notes.md']);

    const mac = await startDevice(proxy, 'mac', { engine: { caseInsensitive: true } });
    devices.push(mac);
    await mac.engine.syncNow();
    const names = (await fsp.readdir(mac.folder)).filter((n) => !n.startsWith('.weft'));
    expect(names).toHaveLength(1);
    const kept = names[0] ?? '';
    expect(await fsp.readFile(nodePath.join(mac.folder, kept), 'utf8')).toBe(
      kept === 'Notes.md' ? 'first' : 'second',
    );
    expect(mac.engine.getStatus().warnings.some((w) => w.includes('differs only by case'))).toBe(true);
    // Syncing again changes nothing on the server: both versions are still there.
    await mac.engine.syncNow();
    const remote = await remoteTree(mac.client);
    expect([...remote.keys()].sort()).toEqual(['NOTES.md', 'Notes.md']);
  });
});
