/* eslint-disable @typescript-eslint/no-explicit-any -- wire tests read JSON bodies loosely; shapes are what they assert */
/** Dropbox API v2 emulator, at the wire: formats as https://www.dropbox.com/developers/documentation/http/documentation */
import { createHash, randomBytes } from 'node:crypto';
import * as http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DropboxEmulator, headerSafeJson } from '../src/dropbox.ts';
import { dropboxContentHash } from '../src/hashes.ts';

let emu: DropboxEmulator;
beforeAll(async () => {
  emu = await new DropboxEmulator({ longpollTimeScale: 0.01 }).start();
});
afterAll(() => emu.close());

const auth = (): Record<string, string> => ({ authorization: `Bearer ${emu.accessToken}` });

async function rpc(
  endpoint: string,
  arg: unknown,
  headers: Record<string, string> = auth(),
): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${emu.url}/2/${endpoint}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(arg),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* text */
  }
  return { status: res.status, body, headers: res.headers };
}

async function content(
  endpoint: string,
  arg: unknown,
  data: Buffer | string = '',
  extra: Record<string, string> = {},
) {
  const res = await fetch(`${emu.url}/2/${endpoint}`, {
    method: 'POST',
    headers: {
      ...auth(),
      'content-type': 'application/octet-stream',
      'dropbox-api-arg': headerSafeJson(arg),
      ...extra,
    },
    body: data,
  });
  return res;
}

describe('dropbox emulator (wire)', () => {
  it('refuses a missing or unknown token with 401 and a Stone error', async () => {
    const r = await rpc('files/get_metadata', { path: '/x' }, { authorization: 'Bearer nope' });
    expect(r.status).toBe(401);
    expect(r.body.error['.tag']).toBe('invalid_access_token');
    expect(r.body.error_summary).toMatch(/^invalid_access_token\//);
  });

  it('uploads with an escaped Dropbox-API-Arg and reports content_hash and rev', async () => {
    const data = Buffer.from('héllo wörld');
    expect(headerSafeJson({ path: '/ünï.txt' })).toBe('{"path":"/\\u00fcn\\u00ef.txt"}');
    const res = await content('files/upload', { path: '/wire/ünï.txt', mode: 'add' }, data);
    expect(res.status).toBe(200);
    const meta = (await res.json()) as Record<string, unknown>;
    expect(meta['.tag']).toBe('file');
    expect(meta.path_display).toBe('/wire/ünï.txt');
    expect(meta.path_lower).toBe('/wire/ünï.txt');
    expect(meta.content_hash).toBe(dropboxContentHash(data));
    expect(meta.rev).toMatch(/^[0-9a-f]{9,}$/);
    expect(meta.size).toBe(data.byteLength);
    expect(meta.client_modified).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  });

  it('rejects raw non-ASCII in the argument header with 400', async () => {
    const { port } = new URL(emu.url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/2/files/upload',
          headers: { ...auth(), 'dropbox-api-arg': Buffer.from('{"path":"/é"}', 'utf8').toString('latin1') },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end('x');
    });
    expect(status).toBe(400);
  });

  it('answers route errors with 409 {error_summary, error}', async () => {
    const r = await rpc('files/get_metadata', { path: '/wire/missing.txt' });
    expect(r.status).toBe(409);
    expect(r.body.error_summary).toMatch(/^path\/not_found\//);
    expect(r.body.error).toEqual({ '.tag': 'path', path: { '.tag': 'not_found' } });
    const conflict = await content('files/upload', { path: '/wire/ünï.txt', mode: 'add' }, 'different');
    expect(conflict.status).toBe(409);
    const body = (await conflict.json()) as any;
    expect(body.error_summary).toMatch(/^path\/conflict\/file\//);
    expect(body.error.reason).toEqual({ '.tag': 'conflict', conflict: { '.tag': 'file' } });
    const renamed = await content(
      'files/upload',
      { path: '/wire/ünï.txt', mode: 'add', autorename: true },
      'different',
    );
    expect(((await renamed.json()) as any).name).toBe('ünï (1).txt');
  });

  it('downloads with Range → 206 and Dropbox-API-Result', async () => {
    const data = randomBytes(10_000);
    await content('files/upload', { path: '/wire/r.bin', mode: 'overwrite' }, data);
    const res = await fetch(`${emu.url}/2/files/download`, {
      method: 'POST',
      headers: {
        ...auth(),
        'dropbox-api-arg': JSON.stringify({ path: '/wire/r.bin' }),
        range: 'bytes=100-199',
      },
    });
    expect(res.status).toBe(206);
    expect(res.headers.get('content-range')).toBe('bytes 100-199/10000');
    expect(JSON.parse(res.headers.get('dropbox-api-result') ?? '{}').size).toBe(10_000);
    expect(Buffer.from(await res.arrayBuffer()).equals(data.subarray(100, 200))).toBe(true);
  });

  it('update mode and parent_rev guard against lost updates', async () => {
    const v1 = (await (
      await content('files/upload', { path: '/wire/c.txt', mode: 'add' }, 'one')
    ).json()) as any;
    const v2 = (await (
      await content(
        'files/upload',
        { path: '/wire/c.txt', mode: { '.tag': 'update', update: v1.rev } },
        'two',
      )
    ).json()) as any;
    expect(v2.rev).not.toBe(v1.rev);
    const stale = await content(
      'files/upload',
      { path: '/wire/c.txt', mode: { '.tag': 'update', update: v1.rev }, strict_conflict: true },
      'three',
    );
    expect(stale.status).toBe(409);
    expect(((await stale.json()) as any).error_summary).toMatch(/^path\/conflict\/file/);
    expect((await rpc('files/delete_v2', { path: '/wire/c.txt', parent_rev: v1.rev })).status).toBe(409);
    expect((await rpc('files/delete_v2', { path: '/wire/c.txt', parent_rev: v2.rev })).status).toBe(200);
  });

  it('upload sessions report incorrect_offset with the correct offset', async () => {
    const start = (await (
      await content('files/upload_session/start', { close: false }, 'abc')
    ).json()) as any;
    const wrong = await content(
      'files/upload_session/append_v2',
      { cursor: { session_id: start.session_id, offset: 1 } },
      'def',
    );
    expect(wrong.status).toBe(409);
    expect(((await wrong.json()) as any).error).toEqual({ '.tag': 'incorrect_offset', correct_offset: 3 });
    const ok = await content(
      'files/upload_session/append_v2',
      { cursor: { session_id: start.session_id, offset: 3 }, close: true },
      'def',
    );
    expect(ok.status).toBe(200);
    const batch = await rpc('files/upload_session/finish_batch_v2', {
      entries: [
        {
          cursor: { session_id: start.session_id, offset: 6 },
          commit: { path: '/wire/s.txt', mode: 'overwrite' },
        },
      ],
    });
    expect(batch.body.entries[0]['.tag']).toBe('success');
    expect(batch.body.entries[0].size).toBe(6);
  });

  it('pages list_folder, continues with changes, and resets expired cursors', async () => {
    for (let i = 0; i < 7; i++)
      await content('files/upload', { path: `/list/f${i}.txt`, mode: 'add' }, `f${i}`);
    let page = await rpc('files/list_folder', { path: '/list', limit: 3 });
    const names: string[] = page.body.entries.map((e: any) => e.name);
    expect(page.body.has_more).toBe(true);
    while (page.body.has_more) {
      page = await rpc('files/list_folder/continue', { cursor: page.body.cursor });
      names.push(...page.body.entries.map((e: any) => e.name));
    }
    expect(names.sort()).toEqual(['f0.txt', 'f1.txt', 'f2.txt', 'f3.txt', 'f4.txt', 'f5.txt', 'f6.txt']);
    const cursor = page.body.cursor;
    await rpc('files/delete_v2', { path: '/list/f0.txt' });
    await content('files/upload', { path: '/list/f1.txt', mode: 'overwrite' }, 'new');
    await content('files/upload', { path: '/list/f1.txt', mode: 'overwrite' }, 'newer');
    const delta = await rpc('files/list_folder/continue', { cursor });
    expect(delta.body.entries.map((e: any) => `${e['.tag']}:${e.name}`)).toEqual([
      'deleted:f0.txt',
      'file:f1.txt',
    ]);
    expect(delta.body.entries[1].size).toBe(5);
    emu.expireCursors();
    const reset = await rpc('files/list_folder/continue', { cursor: delta.body.cursor });
    expect(reset.status).toBe(409);
    expect(reset.body.error['.tag']).toBe('reset');
  });

  it('longpoll needs no auth and wakes on a change', async () => {
    const { body } = await rpc('files/list_folder/get_latest_cursor', { path: '/list' });
    const idle = await rpc('files/list_folder/longpoll', { cursor: body.cursor, timeout: 30 }, {});
    expect(idle.body).toEqual({ changes: false, backoff: 0 });
    const bad = await rpc('files/list_folder/longpoll', { cursor: body.cursor, timeout: 5 }, {});
    expect(bad.status).toBe(400);
    // At full length: the scaled wait (4.8 s) could end before the upload lands on a loaded
    // machine; the answer must come from the change, never from the timeout.
    emu.longpollTimeScale = 1;
    try {
      const waiting = rpc('files/list_folder/longpoll', { cursor: body.cursor, timeout: 480 }, {});
      await content('files/upload', { path: '/list/poke.txt', mode: 'add' }, 'poke');
      expect((await waiting).body).toEqual({ changes: true });
    } finally {
      emu.longpollTimeScale = 0.01;
    }
  });

  it('injects 429 with Retry-After and a RateLimitError body', async () => {
    const remove = emu.faults.add({
      endpoint: 'files/upload',
      nth: [0],
      action: { kind: 'status', status: 429, retryAfterSeconds: 3, reason: 'too_many_write_operations' },
    });
    const res = await content('files/upload', { path: '/wire/t.txt', mode: 'add' }, 't');
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('3');
    expect(await res.json()).toEqual({
      error_summary: 'too_many_write_operations/..',
      error: { reason: { '.tag': 'too_many_write_operations' }, retry_after: 3 },
    });
    expect((await content('files/upload', { path: '/wire/t.txt', mode: 'add' }, 't')).status).toBe(200);
    remove();
  });

  it('runs OAuth2 code flow with PKCE and refresh tokens', async () => {
    const verifier = randomBytes(32).toString('base64url');
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const authz = await fetch(
      `${emu.url}/oauth2/authorize?response_type=code&client_id=app&redirect_uri=${encodeURIComponent('http://127.0.0.1:9/cb')}&code_challenge=${challenge}&code_challenge_method=S256&state=s1`,
      { redirect: 'manual' },
    );
    expect(authz.status).toBe(302);
    const back = new URL(authz.headers.get('location') ?? '');
    expect(back.searchParams.get('state')).toBe('s1');
    const code = back.searchParams.get('code') ?? '';
    const token = async (form: Record<string, string>) =>
      fetch(`${emu.url}/oauth2/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(form),
      });
    const wrong = await token({
      grant_type: 'authorization_code',
      code,
      client_id: 'app',
      redirect_uri: 'http://127.0.0.1:9/cb',
      code_verifier: 'x'.repeat(43),
    });
    expect(wrong.status).toBe(400);
    expect(((await wrong.json()) as any).error).toBe('invalid_grant');
    // The code was single-use: a fresh one for the right verifier.
    const authz2 = await fetch(
      `${emu.url}/oauth2/authorize?response_type=code&client_id=app&redirect_uri=${encodeURIComponent('http://127.0.0.1:9/cb')}&code_challenge=${challenge}&code_challenge_method=S256`,
      { redirect: 'manual' },
    );
    const code2 = new URL(authz2.headers.get('location') ?? '').searchParams.get('code') ?? '';
    const ok = (await (
      await token({
        grant_type: 'authorization_code',
        code: code2,
        client_id: 'app',
        redirect_uri: 'http://127.0.0.1:9/cb',
        code_verifier: verifier,
      })
    ).json()) as any;
    expect(ok.token_type).toBe('bearer');
    expect(ok.refresh_token).toBeTruthy();
    expect(
      (await rpc('files/list_folder', { path: '' }, { authorization: `Bearer ${ok.access_token}` })).status,
    ).toBe(200);
    const refreshed = (await (
      await token({ grant_type: 'refresh_token', refresh_token: ok.refresh_token, client_id: 'app' })
    ).json()) as any;
    expect(refreshed.access_token).not.toBe(ok.access_token);
    emu.oauth.expireAccessTokens();
    const expired = await rpc(
      'files/list_folder',
      { path: '' },
      { authorization: `Bearer ${refreshed.access_token}` },
    );
    expect(expired.status).toBe(401);
    expect(expired.body.error['.tag']).toBe('expired_access_token');
  });
});
