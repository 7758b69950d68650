/* eslint-disable @typescript-eslint/no-explicit-any -- wire tests read JSON bodies loosely; shapes are what they assert */
/** Google Drive v3 emulator, at the wire: formats as https://developers.google.com/drive/api/reference/rest/v3 */
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FOLDER_MIME, GDriveEmulator, parseQuery } from '../src/gdrive.ts';

let emu: GDriveEmulator;
beforeAll(async () => {
  emu = await new GDriveEmulator().start();
});
afterAll(() => emu.close());

async function api(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${emu.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${emu.accessToken}`,
      ...(body !== undefined && !Buffer.isBuffer(body) ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    body: body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any = text;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: json, headers: res.headers };
}

function multipart(meta: unknown, data: Buffer): { body: Buffer; type: string } {
  const b = 'xyzBOUNDARY';
  const body = Buffer.concat([
    Buffer.from(
      `--${b}\r\ncontent-type: application/json\r\n\r\n${JSON.stringify(meta)}\r\n--${b}\r\ncontent-type: application/octet-stream\r\n\r\n`,
    ),
    data,
    Buffer.from(`\r\n--${b}--`),
  ]);
  return { body, type: `multipart/related; boundary=${b}` };
}

describe('gdrive emulator (wire)', () => {
  it('parses the q subset and refuses the rest', () => {
    expect(parseQuery("'abc' in parents and name = 'it\\'s' and trashed = false")).toEqual([
      { kind: 'parent', id: 'abc' },
      { kind: 'name', op: '=', value: "it's" },
      { kind: 'trashed', value: false },
    ]);
    expect(() => parseQuery('fullText contains "x"')).toThrow();
  });

  it('creates folders and files (multipart, media), allows duplicate names, and reports checksums', async () => {
    const folder = await api('POST', '/drive/v3/files?fields=id,name,mimeType,parents', {
      name: 'wire',
      mimeType: FOLDER_MIME,
      parents: ['root'],
    });
    expect(folder.status).toBe(200);
    expect(folder.body.mimeType).toBe(FOLDER_MIME);
    const data = Buffer.from('hello drive');
    const mp = multipart({ name: 'a.txt', parents: [folder.body.id] }, data);
    const f1 = await api('POST', '/upload/drive/v3/files?uploadType=multipart&fields=*', mp.body, {
      'content-type': mp.type,
    });
    expect(f1.status).toBe(200);
    expect(f1.body.size).toBe(String(data.byteLength));
    expect(f1.body.md5Checksum).toBe(createHash('md5').update(data).digest('hex'));
    expect(f1.body.sha256Checksum).toBe(createHash('sha256').update(data).digest('hex'));
    expect(f1.body.headRevisionId).toBeTruthy();
    const f2 = await api(
      'POST',
      '/upload/drive/v3/files?uploadType=multipart',
      multipart({ name: 'a.txt', parents: [folder.body.id] }, data).body,
      { 'content-type': mp.type },
    );
    expect(f2.body).toEqual({
      kind: 'drive#file',
      id: f2.body.id,
      name: 'a.txt',
      mimeType: 'application/octet-stream',
    });
    const media = await api(
      'POST',
      '/upload/drive/v3/files?uploadType=media&fields=name,parents',
      Buffer.from('x'),
    );
    expect(media.body.name).toBe('Untitled');
    const dupes = await api(
      'GET',
      `/drive/v3/files?q=${encodeURIComponent(`'${folder.body.id}' in parents and name = 'a.txt' and trashed = false`)}&fields=files(id)`,
    );
    expect(dupes.body.files).toHaveLength(2);
  });

  it('pages files.list with pageSize and nextPageToken', async () => {
    const folder = await api('POST', '/drive/v3/files', { name: 'paged', mimeType: FOLDER_MIME });
    for (let i = 0; i < 5; i++)
      await api('POST', '/drive/v3/files', { name: `n${i}`, parents: [folder.body.id] });
    const q = encodeURIComponent(`'${folder.body.id}' in parents and mimeType != '${FOLDER_MIME}'`);
    const seen: string[] = [];
    let token = '';
    do {
      const page = await api(
        'GET',
        `/drive/v3/files?q=${q}&pageSize=2&fields=nextPageToken,files(name)${token ? `&pageToken=${token}` : ''}`,
      );
      expect(page.body.files.length).toBeLessThanOrEqual(2);
      seen.push(...page.body.files.map((f: any) => f.name));
      token = page.body.nextPageToken ?? '';
    } while (token);
    expect(seen).toEqual(['n0', 'n1', 'n2', 'n3', 'n4']);
    const bad = await api('GET', '/drive/v3/files?pageToken=bogus');
    expect(bad.status).toBe(400);
    expect(bad.body.error.errors[0]).toMatchObject({
      domain: 'global',
      reason: 'invalid',
      location: 'pageToken',
    });
  });

  it('resumable uploads: 256 KiB multiples, 308 with Range, status queries, cancel with 499', async () => {
    const start = await api(
      'POST',
      '/upload/drive/v3/files?uploadType=resumable&fields=id,size,sha256Checksum',
      { name: 'big.bin' },
      { 'x-upload-content-length': String(600 * 1024) },
    );
    expect(start.status).toBe(200);
    const session = start.headers.get('location') ?? '';
    expect(session).toContain('upload_id=');
    const data = randomBytes(600 * 1024);
    const put = (body: Buffer, range: string) =>
      fetch(session, { method: 'PUT', headers: { 'content-range': range }, body });
    expect((await put(data.subarray(0, 1000), 'bytes 0-999/*')).status).toBe(400);
    const first = await put(data.subarray(0, 256 * 1024), `bytes 0-${256 * 1024 - 1}/*`);
    expect(first.status).toBe(308);
    expect(first.headers.get('range')).toBe(`bytes=0-${256 * 1024 - 1}`);
    const status = await put(Buffer.alloc(0), `bytes */${data.byteLength}`);
    expect(status.status).toBe(308);
    expect(status.headers.get('range')).toBe(`bytes=0-${256 * 1024 - 1}`);
    const done = await put(
      data.subarray(256 * 1024),
      `bytes ${256 * 1024}-${data.byteLength - 1}/${data.byteLength}`,
    );
    expect(done.status).toBe(200);
    const file = (await done.json()) as any;
    expect(file.size).toBe(String(data.byteLength));
    expect(file.sha256Checksum).toBe(createHash('sha256').update(data).digest('hex'));
    const s2 = await api('POST', '/upload/drive/v3/files?uploadType=resumable', { name: 'cancelled.bin' });
    const cancel = await fetch(s2.headers.get('location') ?? '', { method: 'DELETE' });
    expect(cancel.status).toBe(499);
    expect(emu.openSessions()).toBe(0);
  });

  it('downloads with alt=media and Range → 206; 416 past the end; 404 body', async () => {
    const mp = multipart({ name: 'r.bin' }, Buffer.from('0123456789'));
    const f = await api('POST', '/upload/drive/v3/files?uploadType=multipart', mp.body, {
      'content-type': mp.type,
    });
    const part = await fetch(`${emu.url}/drive/v3/files/${f.body.id}?alt=media`, {
      headers: { authorization: `Bearer ${emu.accessToken}`, range: 'bytes=2-4' },
    });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 2-4/10');
    expect(await part.text()).toBe('234');
    const past = await fetch(`${emu.url}/drive/v3/files/${f.body.id}?alt=media`, {
      headers: { authorization: `Bearer ${emu.accessToken}`, range: 'bytes=20-' },
    });
    expect(past.status).toBe(416);
    const missing = await api('GET', '/drive/v3/files/nope');
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatchObject({
      code: 404,
      errors: [{ domain: 'global', reason: 'notFound' }],
    });
  });

  it('moves with addParents/removeParents and reports changes, collapsed per file', async () => {
    const start = (await api('GET', '/drive/v3/changes/startPageToken')).body.startPageToken;
    const a = await api('POST', '/drive/v3/files', { name: 'fa', mimeType: FOLDER_MIME });
    const b = await api('POST', '/drive/v3/files', { name: 'fb', mimeType: FOLDER_MIME });
    const f = await api('POST', '/drive/v3/files', { name: 'moving', parents: [a.body.id] });
    const noRemove = await api('PATCH', `/drive/v3/files/${f.body.id}?addParents=${b.body.id}`, {});
    expect(noRemove.status).toBe(403);
    const moved = await api(
      'PATCH',
      `/drive/v3/files/${f.body.id}?addParents=${b.body.id}&removeParents=${a.body.id}&fields=parents,name`,
      { name: 'moved' },
    );
    expect(moved.body).toEqual({ parents: [b.body.id], name: 'moved' });
    await api('DELETE', `/drive/v3/files/${a.body.id}`);
    const page1 = await api('GET', `/drive/v3/changes?pageToken=${start}&pageSize=2`);
    expect(page1.body.nextPageToken).toBeTruthy();
    expect(page1.body.newStartPageToken).toBeUndefined();
    const page2 = await api(
      'GET',
      `/drive/v3/changes?pageToken=${page1.body.nextPageToken}&pageSize=10&fields=newStartPageToken,changes(fileId,removed,file(name))`,
    );
    const all = [...page1.body.changes, ...page2.body.changes];
    // An item changed again after its page was cut appears again, with its latest state.
    expect([...new Set(all.map((c: any) => c.fileId))].sort()).toEqual(
      [a.body.id, b.body.id, f.body.id].sort(),
    );
    expect(all.findLast((c: any) => c.fileId === a.body.id).removed).toBe(true);
    expect(all.find((c: any) => c.fileId === f.body.id).file.name).toBe('moved');
    const idle = await api('GET', `/drive/v3/changes?pageToken=${page2.body.newStartPageToken}`);
    expect(idle.body.changes).toEqual([]);
  });

  it('v2 files.get: v2 names, an etag and version that change with every change, fields', async () => {
    const mp = multipart({ name: 'v2.txt' }, Buffer.from('one'));
    const f = await api('POST', '/upload/drive/v3/files?uploadType=multipart&fields=id,parents', mp.body, {
      'content-type': mp.type,
    });
    const id = f.body.id as string;
    const v1 = await api('GET', `/drive/v2/files/${id}`);
    expect(v1.status).toBe(200);
    expect(v1.body).toMatchObject({
      kind: 'drive#file',
      id,
      title: 'v2.txt',
      mimeType: 'application/octet-stream',
      labels: { trashed: false },
      fileSize: '3',
      md5Checksum: createHash('md5').update('one').digest('hex'),
      parents: [{ id: f.body.parents[0], isRoot: true }],
    });
    expect(v1.body.etag).toMatch(/^".+"$/);
    expect(typeof v1.body.version).toBe('string');
    expect(typeof v1.body.modifiedDate).toBe('string');
    expect(v1.body.name).toBeUndefined();
    const seen = new Set<string>([v1.body.etag]);
    let version = Number(v1.body.version);
    const expectChanged = async (): Promise<void> => {
      const now = await api('GET', `/drive/v2/files/${id}?fields=etag,version`);
      expect(Object.keys(now.body).sort()).toEqual(['etag', 'version']);
      expect(seen.has(now.body.etag)).toBe(false);
      expect(Number(now.body.version)).toBeGreaterThan(version);
      seen.add(now.body.etag);
      version = Number(now.body.version);
    };
    await api('PATCH', `/upload/drive/v3/files/${id}?uploadType=media`, Buffer.from('two'));
    await expectChanged();
    await api('PATCH', `/drive/v3/files/${id}`, { name: 'renamed.txt' });
    await expectChanged();
    await api('PATCH', `/drive/v3/files/${id}`, { modifiedTime: '2020-01-02T03:04:05.000Z' });
    await expectChanged();
    const folder = await api('POST', '/drive/v3/files', { name: 'v2dest', mimeType: FOLDER_MIME });
    await api(
      'PATCH',
      `/drive/v3/files/${id}?addParents=${folder.body.id}&removeParents=${f.body.parents[0]}`,
      {},
    );
    await expectChanged();
    await api('PATCH', `/drive/v3/files/${id}`, { trashed: true });
    await expectChanged();
    // The v3 resource is unchanged: no etag, v3 names.
    const v3 = await api('GET', `/drive/v3/files/${id}?fields=*`);
    expect(v3.body.etag).toBeUndefined();
    expect(v3.body.name).toBe('renamed.txt');
    expect((await api('GET', '/drive/v2/files/nope')).body.error.errors[0].reason).toBe('notFound');
  });

  it('v2 files.update (media, multipart) and files.delete honour If-Match: 412 conditionNotMet', async () => {
    const f = await api('POST', '/upload/drive/v3/files?uploadType=media&fields=id', Buffer.from('base'));
    const id = f.body.id as string;
    const etag = (await api('GET', `/drive/v2/files/${id}?fields=etag`)).body.etag as string;
    const ok = await api('PUT', `/upload/drive/v2/files/${id}?uploadType=media`, Buffer.from('mine'), {
      'if-match': etag,
    });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ id, fileSize: '4', title: 'Untitled' });
    expect(ok.body.etag).not.toBe(etag);
    expect(ok.body.headRevisionId).toBeTruthy();
    const stale = await api('PUT', `/upload/drive/v2/files/${id}?uploadType=media`, Buffer.from('lost'), {
      'if-match': etag,
    });
    expect(stale.status).toBe(412);
    expect(stale.body).toEqual({
      error: {
        code: 412,
        message: 'Precondition Failed',
        errors: [
          {
            domain: 'global',
            reason: 'conditionNotMet',
            message: 'Precondition Failed',
            locationType: 'header',
            location: 'If-Match',
          },
        ],
      },
    });
    expect(emu.tree.get(id)?.content.toString()).toBe('mine');
    // Several tags, or '*'; no If-Match at all is unconditional.
    const mp = multipart(
      { title: 'titled.txt', modifiedDate: '2021-05-06T07:08:09.000Z' },
      Buffer.from('mp'),
    );
    const listed = await api(
      'PUT',
      `/upload/drive/v2/files/${id}?uploadType=multipart&setModifiedDate=true&fields=title,modifiedDate,fileSize`,
      mp.body,
      { 'content-type': mp.type, 'if-match': `"other", ${ok.body.etag}` },
    );
    expect(listed.body).toEqual({
      title: 'titled.txt',
      modifiedDate: '2021-05-06T07:08:09.000Z',
      fileSize: '2',
    });
    // Without setModifiedDate the body's modifiedDate is ignored (the time becomes now).
    const now = await api(
      'PUT',
      `/upload/drive/v2/files/${id}?uploadType=multipart&fields=modifiedDate`,
      multipart({ modifiedDate: '2001-01-01T00:00:00.000Z' }, Buffer.from('x')).body,
      { 'content-type': mp.type, 'if-match': '*' },
    );
    expect(Date.parse(now.body.modifiedDate)).toBeGreaterThan(Date.parse('2020-01-01T00:00:00Z'));
    expect((await api('PUT', `/upload/drive/v2/files/${id}?uploadType=media`, Buffer.from('u'))).status).toBe(
      200,
    );
    const gone = await api('DELETE', `/drive/v2/files/${id}`, undefined, { 'if-match': etag });
    expect(gone.status).toBe(412);
    expect(emu.tree.get(id)).toBeDefined();
    const current = (await api('GET', `/drive/v2/files/${id}?fields=etag`)).body.etag as string;
    expect((await api('DELETE', `/drive/v2/files/${id}`, undefined, { 'if-match': current })).status).toBe(
      204,
    );
    expect(emu.tree.get(id)).toBeUndefined();
  });

  it('trash: v3 and v2 (under If-Match) metadata updates; a trashed folder trashes what is inside', async () => {
    const dir = await api('POST', '/drive/v3/files?fields=id', { name: 'bin-test', mimeType: FOLDER_MIME });
    const d = dir.body.id as string;
    const mp = multipart({ name: 'in.txt', parents: [d] }, Buffer.from('in'));
    const file = await api('POST', '/upload/drive/v3/files?uploadType=multipart&fields=id', mp.body, {
      'content-type': mp.type,
    });
    const f = file.body.id as string;
    const etag = (await api('GET', `/drive/v2/files/${d}?fields=etag`)).body.etag as string;
    // v2 metadata-only update, refused under a stale etag.
    await api('PATCH', `/drive/v3/files/${d}`, { description: 'changed' });
    const stale = await api(
      'PUT',
      `/drive/v2/files/${d}`,
      { labels: { trashed: true } },
      { 'if-match': etag },
    );
    expect(stale.status).toBe(412);
    expect((await api('GET', `/drive/v3/files/${f}?fields=trashed`)).body.trashed).toBe(false);
    const current = (await api('GET', `/drive/v2/files/${d}?fields=etag`)).body.etag as string;
    const ok = await api(
      'PUT',
      `/drive/v2/files/${d}?fields=labels(trashed)`,
      { labels: { trashed: true } },
      { 'if-match': current },
    );
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ labels: { trashed: true } });
    // The content is in the trash with it, not explicitly.
    expect((await api('GET', `/drive/v3/files/${f}?fields=trashed,explicitlyTrashed`)).body).toEqual({
      trashed: true,
      explicitlyTrashed: false,
    });
    const listed = await api(
      'GET',
      `/drive/v3/files?q=${encodeURIComponent(`'${d}' in parents and trashed = false`)}&fields=files(id)`,
    );
    expect(listed.body.files).toEqual([]);
    // Restored (v3), the content comes back with it.
    await api('PATCH', `/drive/v3/files/${d}`, { trashed: false });
    expect((await api('GET', `/drive/v3/files/${f}?fields=trashed`)).body.trashed).toBe(false);
  });

  it('v2 resumable update: If-Match checked when the session opens and again at the commit', async () => {
    const f = await api('POST', '/upload/drive/v3/files?uploadType=media&fields=id', Buffer.from('base'));
    const id = f.body.id as string;
    const etag = (await api('GET', `/drive/v2/files/${id}?fields=etag`)).body.etag as string;
    const open = (ifMatch: string) =>
      api(
        'PUT',
        `/upload/drive/v2/files/${id}?uploadType=resumable&fields=id,fileSize,etag`,
        {},
        {
          'if-match': ifMatch,
          'x-upload-content-length': '5',
        },
      );
    const s1 = await open(etag);
    expect(s1.status).toBe(200);
    const session = s1.headers.get('location') ?? '';
    expect(session).toContain('/upload/drive/v2/files/');
    const done = await fetch(session, {
      method: 'PUT',
      headers: { 'content-range': 'bytes 0-4/5' },
      body: 'hello',
    });
    expect(done.status).toBe(200);
    const file = (await done.json()) as any;
    expect(file).toMatchObject({ id, fileSize: '5' });
    expect(file.etag).not.toBe(etag);
    // Opening with a stale etag: 412 at once.
    expect((await open(etag)).status).toBe(412);
    // A change after the session opened: the commit is refused and nothing is written.
    const s2 = await open(file.etag);
    expect(s2.status).toBe(200);
    await api('PATCH', `/drive/v3/files/${id}`, { description: 'edited meanwhile' });
    const late = await fetch(s2.headers.get('location') ?? '', {
      method: 'PUT',
      headers: { 'content-range': 'bytes 0-4/5' },
      body: 'later',
    });
    expect(late.status).toBe(412);
    expect(((await late.json()) as any).error.errors[0].reason).toBe('conditionNotMet');
    expect(emu.tree.get(id)?.content.toString()).toBe('hello');
    expect(emu.openSessions()).toBe(0);
  });

  it('beforeRequest: a test hook runs before the next request to an endpoint is handled', async () => {
    const order: string[] = [];
    const remove = emu.beforeRequest('v2.files.get', () => void order.push('hook'), { times: 2 });
    const f = await api('POST', '/drive/v3/files?fields=id', { name: 'hooked' });
    for (let i = 0; i < 3; i++) {
      await api('GET', `/drive/v2/files/${f.body.id}?fields=id`);
      order.push(`get${i}`);
    }
    remove();
    expect(order).toEqual(['hook', 'get0', 'hook', 'get1', 'get2']);
  });

  it('injects 403 userRateLimitExceeded and 429 rateLimitExceeded', async () => {
    emu.faults.add({ endpoint: 'files.list', nth: [0], action: { kind: 'status', status: 403 } });
    emu.faults.add({
      endpoint: 'files.list',
      nth: [1],
      action: { kind: 'status', status: 429, retryAfterSeconds: 2 },
    });
    const r1 = await api('GET', '/drive/v3/files');
    expect(r1.status).toBe(403);
    expect(r1.body.error.errors[0]).toMatchObject({ domain: 'usageLimits', reason: 'userRateLimitExceeded' });
    const r2 = await api('GET', '/drive/v3/files');
    expect(r2.status).toBe(429);
    expect(r2.headers.get('retry-after')).toBe('2');
    expect(r2.body.error.errors[0].reason).toBe('rateLimitExceeded');
    expect((await api('GET', '/drive/v3/files')).status).toBe(200);
    emu.faults.clear();
  });
});
