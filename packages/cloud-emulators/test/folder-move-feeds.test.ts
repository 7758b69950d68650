/* eslint-disable @typescript-eslint/no-explicit-any -- wire tests read JSON bodies loosely; shapes are what they assert */
/**
 * What each cloud's change feed says about a folder move. Drive's changes.list and Graph's
 * delta are per item: a moved folder is one change, the files inside it are not reported
 * (their parents did not change) — rclone drive#2606, microsoft-graph-docs#4539. Dropbox's
 * list_folder/continue is per path: the old paths are deleted and every path below the new
 * one is reported.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DropboxEmulator } from '../src/dropbox.ts';
import { FOLDER_MIME, GDriveEmulator } from '../src/gdrive.ts';
import { OneDriveEmulator } from '../src/onedrive.ts';

let drive: GDriveEmulator;
let onedrive: OneDriveEmulator;
let dropbox: DropboxEmulator;
beforeAll(async () => {
  drive = await new GDriveEmulator().start();
  onedrive = await new OneDriveEmulator({ tls: inject('tls') }).start();
  dropbox = await new DropboxEmulator().start();
});
afterAll(async () => {
  await drive.close();
  await onedrive.close();
  await dropbox.close();
});

async function call(url: string, token: string, method: string, body?: unknown): Promise<any> {
  const res = await fetch(url, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined && !Buffer.isBuffer(body) ? { 'content-type': 'application/json' } : {}),
    },
    body: body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

describe('change feeds after a folder move', () => {
  it('Drive: changes.list reports the moved folder only', async () => {
    const d = (m: string, p: string, b?: unknown): Promise<any> =>
      call(`${drive.url}${p}`, drive.accessToken, m, b);
    const a = await d('POST', '/drive/v3/files', { name: 'a', mimeType: FOLDER_MIME });
    const b = await d('POST', '/drive/v3/files', { name: 'b', mimeType: FOLDER_MIME });
    const sub = await d('POST', '/drive/v3/files', { name: 'sub', mimeType: FOLDER_MIME, parents: [a.id] });
    const f = await d('POST', '/drive/v3/files', { name: 'f.txt', parents: [sub.id] });
    const start = (await d('GET', '/drive/v3/changes/startPageToken')).startPageToken;
    await d('PATCH', `/drive/v3/files/${sub.id}?addParents=${b.id}&removeParents=${a.id}`, {});
    const page = await d('GET', `/drive/v3/changes?pageToken=${start}`);
    expect(page.changes.map((c: any) => c.fileId)).toEqual([sub.id]);
    expect(page.newStartPageToken).toBeTruthy();
    // The file itself is unchanged, still reachable under its moved parent.
    const file = await d('GET', `/drive/v3/files/${f.id}?fields=parents`);
    expect(file.parents).toEqual([sub.id]);
    // A later edit of the file is reported as usual.
    await d('PATCH', `/drive/v3/files/${f.id}`, { name: 'g.txt' });
    const next = await d('GET', `/drive/v3/changes?pageToken=${page.newStartPageToken}`);
    expect(next.changes.map((c: any) => c.fileId)).toEqual([f.id]);
  });

  it('OneDrive: delta reports the moved folder only', async () => {
    const g = (m: string, p: string, b?: unknown): Promise<any> =>
      call(p.startsWith('https:') ? p : `${onedrive.graphBase}${p}`, onedrive.accessToken, m, b);
    const f = await g('PUT', '/me/drive/root:/odm/a/sub/f.txt:/content', Buffer.from('f'));
    const subId = f.parentReference.id;
    await g('PUT', '/me/drive/root:/odm/b/keep.txt:/content', Buffer.from('k'));
    const bId = (await g('GET', '/me/drive/root:/odm/b')).id;
    let link = (await g('GET', '/me/drive/root/delta?token=latest'))['@odata.deltaLink'];
    await g('PATCH', `/me/drive/items/${subId}`, { parentReference: { id: bId } });
    const ids: string[] = [];
    for (;;) {
      const page = await g('GET', link);
      ids.push(...page.value.map((v: any) => v.id));
      if (page['@odata.deltaLink']) break;
      link = page['@odata.nextLink'];
    }
    expect(ids).toContain(subId);
    expect(ids).not.toContain(f.id);
  });

  it('Dropbox: list_folder/continue reports every path below the new one', async () => {
    const api = (p: string, b: unknown): Promise<any> =>
      call(`${dropbox.url}/2/${p}`, dropbox.accessToken, 'POST', b);
    await api('files/create_folder_v2', { path: '/dbm/a/sub' });
    await api('files/create_folder_v2', { path: '/dbm/b' });
    const up = await fetch(`${dropbox.url}/2/files/upload`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${dropbox.accessToken}`,
        'content-type': 'application/octet-stream',
        'dropbox-api-arg': JSON.stringify({ path: '/dbm/a/sub/f.txt', mode: 'add' }),
      },
      body: 'f',
    });
    expect(up.status).toBe(200);
    const start = await api('files/list_folder/get_latest_cursor', { path: '/dbm', recursive: true });
    await api('files/move_v2', { from_path: '/dbm/a/sub', to_path: '/dbm/b/sub' });
    const page = await api('files/list_folder/continue', { cursor: start.cursor });
    const tags = page.entries.map((e: any) => `${e['.tag']}:${e.path_lower}`);
    expect(tags).toContain('deleted:/dbm/a/sub');
    expect(tags).toContain('folder:/dbm/b/sub');
    expect(tags).toContain('file:/dbm/b/sub/f.txt');
  });
});
