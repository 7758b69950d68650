/* eslint-disable @typescript-eslint/no-explicit-any -- wire tests read JSON bodies loosely; shapes are what they assert */
/** Microsoft Graph (OneDrive) emulator over HTTPS, at the wire: https://learn.microsoft.com/graph/api/resources/driveitem */
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { quickXorHash } from '../src/hashes.ts';
import { OneDriveEmulator, parseEntityTags } from '../src/onedrive.ts';

let emu: OneDriveEmulator;
beforeAll(async () => {
  emu = await new OneDriveEmulator({ tls: inject('tls'), defaultPageSize: 3 }).start();
});
afterAll(() => emu.close());

async function graph(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(path.startsWith('https:') ? path : `${emu.graphBase}${path}`, {
    method,
    redirect: 'manual',
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

describe('onedrive emulator (wire, https)', () => {
  it('serves the API on localhost over TLS', () => {
    expect(emu.graphBase).toMatch(/^https:\/\/localhost:\d+\/v1\.0$/);
  });

  it('uploads by path, creating parents, with quickXorHash, sha256Hash, eTag and cTag', async () => {
    const r = await graph('PUT', '/me/drive/root:/wire/sub/hello.txt:/content', Buffer.from('hello world'));
    expect(r.status).toBe(201);
    expect(r.body.file.hashes.quickXorHash).toBe('aCgDG9jwBhDc4Q1yawMZAAAAAAA=');
    expect(r.body.file.hashes.sha256Hash).toBe(
      createHash('sha256').update('hello world').digest('hex').toUpperCase(),
    );
    expect(r.body.parentReference.path).toBe('/drive/root:/wire/sub');
    expect(r.body.eTag).toMatch(/^".*"$/);
    expect(r.body.cTag).toMatch(/^"c:/);
    const byId = await graph('GET', `/me/drive/items/${r.body.id}`);
    expect(byId.body.name).toBe('hello.txt');
    expect(byId.body['@microsoft.graph.downloadUrl']).toMatch(/^https:\/\/127\.0\.0\.1:/);
    const again = await graph(
      'PUT',
      '/me/drive/root:/wire/sub/hello.txt:/content',
      Buffer.from('hello again'),
    );
    expect(again.status).toBe(200);
    expect(again.body.cTag).not.toBe(r.body.cTag);
    expect(quickXorHash(Buffer.from('hello again'))).toBe(again.body.file.hashes.quickXorHash);
  });

  it('honours If-Match (412) and conflictBehavior=fail (409 nameAlreadyExists)', async () => {
    const v1 = await graph('PUT', '/me/drive/root:/wire/c.txt:/content', Buffer.from('one'));
    expect(parseEntityTags(`${v1.body.eTag}, "other"`)).toEqual([v1.body.eTag, '"other"']);
    const v2 = await graph('PUT', '/me/drive/root:/wire/c.txt:/content', Buffer.from('two'), {
      'if-match': v1.body.eTag,
    });
    expect(v2.status).toBe(200);
    const stale = await graph('PUT', '/me/drive/root:/wire/c.txt:/content', Buffer.from('three'), {
      'if-match': v1.body.eTag,
    });
    expect(stale.status).toBe(412);
    expect(stale.body.error.code).toBe('preconditionFailed');
    const fail = await graph(
      'PUT',
      '/me/drive/root:/wire/c.txt:/content?@microsoft.graph.conflictBehavior=fail',
      Buffer.from('x'),
    );
    expect(fail.status).toBe(409);
    expect(fail.body.error.code).toBe('nameAlreadyExists');
    expect(fail.body.error.innerError['request-id']).toBeTruthy();
    const bad = await graph('PUT', '/me/drive/root:/wire/what%3F.txt:/content', Buffer.from('x'));
    expect(bad.status).toBe(400);
  });

  it('pages children with @odata.nextLink', async () => {
    for (let i = 0; i < 7; i++)
      await graph('PUT', `/me/drive/root:/kids/k${i}.txt:/content`, Buffer.from(`k${i}`));
    let page = await graph('GET', '/me/drive/root:/kids:/children');
    const names: string[] = page.body.value.map((v: any) => v.name);
    while (page.body['@odata.nextLink']) {
      page = await graph('GET', page.body['@odata.nextLink']);
      names.push(...page.body.value.map((v: any) => v.name));
    }
    expect(names).toEqual(['k0.txt', 'k1.txt', 'k2.txt', 'k3.txt', 'k4.txt', 'k5.txt', 'k6.txt']);
  });

  it('downloads: 302 to a pre-authenticated URL that honours Range', async () => {
    const data = randomBytes(5000);
    await graph('PUT', '/me/drive/root:/wire/d.bin:/content', data);
    const r = await graph('GET', '/me/drive/root:/wire/d.bin:/content');
    expect(r.status).toBe(302);
    const location = r.headers.get('location') ?? '';
    expect(new URL(location).hostname).toBe('127.0.0.1');
    const part = await fetch(location, { headers: { range: 'bytes=10-19' } });
    expect(part.status).toBe(206);
    expect(Buffer.from(await part.arrayBuffer()).equals(data.subarray(10, 20))).toBe(true);
  });

  it('upload sessions: 320 KiB fragments in order, 202/416/201, no Authorization on uploadUrl, cancel', async () => {
    const s = await graph('POST', '/me/drive/root:/wire/big.bin:/createUploadSession', {
      item: { '@microsoft.graph.conflictBehavior': 'fail' },
    });
    expect(s.status).toBe(200);
    expect(s.body.nextExpectedRanges).toEqual(['0-']);
    const url = s.body.uploadUrl as string;
    expect(new URL(url).hostname).toBe('127.0.0.1');
    const size = 700 * 1024;
    const data = randomBytes(size);
    const put = (from: number, to: number, headers: Record<string, string> = {}) =>
      fetch(url, {
        method: 'PUT',
        headers: { 'content-range': `bytes ${from}-${to - 1}/${size}`, ...headers },
        body: data.subarray(from, to),
      });
    expect((await put(0, 1000)).status).toBe(400);
    expect((await put(0, 320 * 1024, { authorization: `Bearer ${emu.accessToken}` })).status).toBe(401);
    const first = await put(0, 320 * 1024);
    expect(first.status).toBe(202);
    expect(((await first.json()) as any).nextExpectedRanges).toEqual([`${320 * 1024}-${size - 1}`]);
    expect((await put(640 * 1024, size)).status).toBe(416);
    const status = (await (await fetch(url)).json()) as any;
    expect(status.nextExpectedRanges[0]).toBe(`${320 * 1024}-${size - 1}`);
    expect((await put(320 * 1024, 640 * 1024)).status).toBe(202);
    const done = await put(640 * 1024, size);
    expect(done.status).toBe(201);
    expect(((await done.json()) as any).size).toBe(size);
    const again = await graph('POST', '/me/drive/root:/wire/big.bin:/createUploadSession', {
      item: { '@microsoft.graph.conflictBehavior': 'fail' },
    });
    expect(again.status).toBe(409);
    const s3 = await graph('POST', '/me/drive/root:/wire/gone.bin:/createUploadSession', {});
    expect((await fetch(s3.body.uploadUrl, { method: 'DELETE' })).status).toBe(204);
    expect(emu.openSessions()).toBe(0);
  });

  it('delta: pages, deltaLink, deleted facets, and 410 resyncRequired when expired', async () => {
    const scope = await graph('PUT', '/me/drive/root:/delta/a.txt:/content', Buffer.from('a'));
    const folderId = scope.body.parentReference.id;
    const latest = await graph('GET', `/me/drive/items/${folderId}/delta?token=latest`);
    expect(latest.body.value).toEqual([]);
    const link = latest.body['@odata.deltaLink'];
    await graph('PUT', '/me/drive/root:/delta/b.txt:/content', Buffer.from('b'));
    await graph('PUT', '/me/drive/root:/delta/b.txt:/content', Buffer.from('bb'));
    await graph('DELETE', '/me/drive/root:/delta/a.txt:');
    const changes = await graph('GET', link);
    expect(changes.body.value.map((v: any) => `${v.deleted ? 'deleted' : 'item'}:${v.name}`)).toEqual([
      'item:b.txt',
      'deleted:a.txt',
    ]);
    expect(changes.body.value[0].size).toBe(2);
    expect(changes.body['@odata.deltaLink']).toBeTruthy();
    const full = await graph('GET', `/me/drive/items/${folderId}/delta?$top=1`);
    expect(full.body['@odata.nextLink']).toBeTruthy();
    emu.expireCursors();
    const gone = await graph('GET', changes.body['@odata.deltaLink']);
    expect(gone.status).toBe(410);
    expect(gone.body.error.code).toBe('resyncRequired');
  });

  it('PATCH moves and renames; 409 on a taken name unless replace', async () => {
    await graph('PUT', '/me/drive/root:/mv/a.txt:/content', Buffer.from('a'));
    await graph('PUT', '/me/drive/root:/mv/b.txt:/content', Buffer.from('b'));
    const dest = await graph('POST', '/me/drive/root/children', {
      name: 'mv2',
      folder: {},
      '@microsoft.graph.conflictBehavior': 'fail',
    });
    expect(dest.status).toBe(201);
    const taken = await graph('PATCH', '/me/drive/root:/mv/a.txt:', { name: 'b.txt' });
    expect(taken.status).toBe(409);
    const moved = await graph('PATCH', '/me/drive/root:/mv/a.txt:', {
      name: 'c.txt',
      parentReference: { id: dest.body.id },
    });
    expect(moved.body.parentReference.path).toBe('/drive/root:/mv2');
    expect((await graph('GET', '/me/drive/root:/mv/a.txt:')).status).toBe(404);
  });

  it('copies asynchronously: 202 with a monitor URL that reports the job', async () => {
    await graph('PUT', '/me/drive/root:/cp/src/a.txt:/content', Buffer.from('a'));
    const dest = await graph('POST', '/me/drive/root/children', { name: 'cpdest', folder: {} });
    const started = await graph('POST', '/me/drive/root:/cp/src:/copy', {
      parentReference: { id: dest.body.id },
      name: 'copied',
    });
    expect(started.status).toBe(202);
    const monitor = started.headers.get('location') ?? '';
    expect(new URL(monitor).hostname).toBe('127.0.0.1');
    const first = (await (await fetch(monitor)).json()) as any;
    expect(first.status).toBe('inProgress');
    const done = (await (await fetch(monitor)).json()) as any;
    expect(done.status).toBe('completed');
    const item = await graph('GET', `/me/drive/items/${done.resourceId}:/a.txt:`);
    expect(item.body.size).toBe(1);
    const again = await graph('POST', '/me/drive/root:/cp/src:/copy', {
      parentReference: { id: dest.body.id },
      name: 'copied',
    });
    expect(again.status).toBe(409);
  });

  it('injects 429 and 503 with Retry-After', async () => {
    emu.faults.add({
      endpoint: 'driveItem.get',
      nth: [0],
      action: { kind: 'status', status: 429, retryAfterSeconds: 7 },
    });
    emu.faults.add({
      endpoint: 'driveItem.get',
      nth: [1],
      action: { kind: 'status', status: 503, retryAfterSeconds: 1 },
    });
    const a = await graph('GET', '/me/drive/root');
    expect(a.status).toBe(429);
    expect(a.headers.get('retry-after')).toBe('7');
    expect(a.body.error.code).toBe('activityLimitReached');
    const b = await graph('GET', '/me/drive/root');
    expect(b.status).toBe(503);
    expect((await graph('GET', '/me/drive/root')).status).toBe(200);
    emu.faults.clear();
  });

  it("a 429 always suggests a wait, as Graph's do; Retry-After may be an HTTP-date", async () => {
    emu.faults.add({ endpoint: 'driveItem.get', nth: [0], action: { kind: 'status', status: 429 } });
    emu.faults.add({
      endpoint: 'driveItem.get',
      nth: [1],
      action: { kind: 'status', status: 503, retryAfterSeconds: 30, retryAfterForm: 'http-date' },
    });
    const a = await graph('GET', '/me/drive/root');
    expect(a.status).toBe(429);
    expect(a.headers.get('retry-after')).toBe('1');
    const b = await graph('GET', '/me/drive/root');
    expect(b.status).toBe(503);
    const at = Date.parse(b.headers.get('retry-after') ?? '');
    expect(at - Date.now()).toBeGreaterThan(25_000);
    expect(at - Date.now()).toBeLessThanOrEqual(30_000);
    emu.faults.clear();
  });
});
