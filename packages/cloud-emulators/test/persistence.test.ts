import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as nodePath from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DropboxEmulator } from '../src/dropbox.ts';
import { GDriveEmulator } from '../src/gdrive.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const tempDir = (): string => {
  const d = mkdtempSync(nodePath.join(tmpdir(), 'weft-emu-state-'));
  dirs.push(d);
  return d;
};

describe('state on disk (--data DIR)', () => {
  it('dropbox: files, revs and the change log survive a restart', async () => {
    const dataDir = tempDir();
    const a = await new DropboxEmulator({ dataDir }).start();
    const up = await fetch(`${a.url}/2/files/upload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.accessToken}`, 'dropbox-api-arg': '{"path":"/kept/a.txt"}' },
      body: 'persisted',
    });
    const meta = (await up.json()) as { rev: string; id: string };
    await a.close();
    const b = await new DropboxEmulator({ dataDir }).start();
    const down = await fetch(`${b.url}/2/files/download`, {
      method: 'POST',
      headers: { authorization: `Bearer ${b.accessToken}`, 'dropbox-api-arg': '{"path":"/kept/a.txt"}' },
    });
    expect(await down.text()).toBe('persisted');
    expect(JSON.parse(down.headers.get('dropbox-api-result') ?? '{}')).toMatchObject({
      rev: meta.rev,
      id: meta.id,
    });
    // New revisions continue after the stored ones.
    const again = await fetch(`${b.url}/2/files/upload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${b.accessToken}`, 'dropbox-api-arg': '{"path":"/kept/b.txt"}' },
      body: 'b',
    });
    expect(((await again.json()) as { rev: string }).rev > meta.rev).toBe(true);
    await b.close();
  });

  it('gdrive: ids and content survive a restart', async () => {
    const dataDir = tempDir();
    const a = await new GDriveEmulator({ dataDir }).start();
    const created = (await (
      await fetch(`${a.url}/upload/drive/v3/files?uploadType=media`, {
        method: 'POST',
        headers: { authorization: `Bearer ${a.accessToken}` },
        body: 'drive bytes',
      })
    ).json()) as { id: string };
    await a.close();
    const b = await new GDriveEmulator({ dataDir }).start();
    const res = await fetch(`${b.url}/drive/v3/files/${created.id}?alt=media`, {
      headers: { authorization: `Bearer ${b.accessToken}` },
    });
    expect(await res.text()).toBe('drive bytes');
    await b.close();
  });
});
