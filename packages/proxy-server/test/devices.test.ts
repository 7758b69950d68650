/**
 * Devices and invites (issue #14, "Device tokens and invites never expire and cannot be
 * revoked"): a user lists their devices and revokes one; a revoked token is refused at once
 * and its open sockets are closed; enrolment invites expire and are not used up by a refused
 * attempt. Real server on a loopback port, real SQLite.
 */
import Database from 'better-sqlite3';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { DeviceListResponse } from '@weft/wire';
import { CLOSE_DEVICE_REVOKED } from '../src/http/devices.ts';
import { startTestServer, TestClient } from './helpers.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;
const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.stop();
});
async function server(config: Parameters<typeof startTestServer>[0] = {}): Promise<Server> {
  const s = await startTestServer(config);
  servers.push(s);
  return s;
}

async function errorOf(res: Response): Promise<{ status: number; code: string }> {
  const body = (await res.json()) as { error: { code: string } };
  return { status: res.status, code: body.error.code };
}

function enrolWith(s: Server, body: object): Promise<Response> {
  return fetch(`${s.url}/v1/enrol`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

async function invite(
  s: Server,
  user: string,
  ttlHours?: number,
): Promise<{ invite: string; expiresMs: number }> {
  const res = await fetch(`${s.url}/v1/invites`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ user, ...(ttlHours !== undefined ? { ttlHours } : {}) }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { invite: string; expiresMs: number };
}

/** Open a socket and wait until it is open (or refused). */
function openSocket(client: TestClient, path: string): Promise<WebSocket> {
  const ws = client.ws(path);
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

describe('devices', () => {
  it('listsTheUsersDevicesAndMarksTheCaller', async () => {
    const s = await server();
    const laptop = await TestClient.enrol(s, 'alice', 'laptop');
    const phone = await TestClient.enrol(s, 'alice', 'phone');
    await TestClient.enrol(s, 'bob', 'desktop');
    await laptop.json('GET', '/v1/whoami');
    const { devices } = await phone.json<DeviceListResponse>('GET', '/v1/devices');
    expect(devices.map((d) => [d.name, d.current])).toEqual([
      ['laptop', false],
      ['phone', true],
    ]);
    const lap = devices.find((d) => d.name === 'laptop');
    expect(lap?.lastSeenMs).toBeGreaterThan(0);
    expect(lap?.createdMs).toBeGreaterThan(0);
    expect(lap?.id).toMatch(/^d_/);
  });

  it('revokedTokenIsRefusedAtOnceWithDeviceRevoked', async () => {
    const s = await server();
    const laptop = await TestClient.enrol(s, 'alice', 'laptop');
    const phone = await TestClient.enrol(s, 'alice', 'phone');
    const { devices } = await laptop.json<DeviceListResponse>('GET', '/v1/devices');
    const phoneId = devices.find((d) => d.name === 'phone')?.id ?? '';
    expect((await phone.req('GET', '/v1/whoami')).status).toBe(200);
    expect((await laptop.req('DELETE', `/v1/devices/${phoneId}`)).status).toBe(204);
    for (const [method, path] of [
      ['GET', '/v1/whoami'],
      ['GET', '/v1/list?path='],
      ['GET', '/v1/devices'],
      ['GET', '/v1/changes?cursor=0'],
    ] as const) {
      expect(await errorOf(await phone.req(method, path))).toEqual({ status: 401, code: 'DEVICE_REVOKED' });
    }
    // The feed upgrade is refused too.
    await expect(openSocket(phone, '/v1/feed?cursor=0')).rejects.toThrow(/401/);
    // The other device goes on; the revoked one is no longer listed.
    const after = await laptop.json<DeviceListResponse>('GET', '/v1/devices');
    expect(after.devices.map((d) => d.name)).toEqual(['laptop']);
    // An unknown token is still a plain UNAUTHORIZED.
    const stranger = new TestClient(s.url, 'wft_not-a-token');
    expect(await errorOf(await stranger.req('GET', '/v1/whoami'))).toEqual({
      status: 401,
      code: 'UNAUTHORIZED',
    });
  });

  it('revocationClosesTheDevicesOpenSockets', async () => {
    const s = await server();
    const laptop = await TestClient.enrol(s, 'alice', 'laptop');
    const phone = await TestClient.enrol(s, 'alice', 'phone');
    const feed = await openSocket(phone, '/v1/feed?cursor=0');
    const stream = await openSocket(phone, '/v1/stream');
    const laptopFeed = await openSocket(laptop, '/v1/feed?cursor=0');
    const messages: string[] = [];
    feed.on('message', (d: Buffer) => messages.push(d.toString('utf8')));
    const closed = (ws: WebSocket): Promise<number> =>
      new Promise((r) => ws.once('close', (code) => r(code)));
    const feedClosed = closed(feed);
    const streamClosed = closed(stream);
    const { devices } = await laptop.json<DeviceListResponse>('GET', '/v1/devices');
    const phoneId = devices.find((d) => d.name === 'phone')?.id ?? '';
    const t0 = Date.now();
    expect((await laptop.req('DELETE', `/v1/devices/${phoneId}`)).status).toBe(204);
    expect(await feedClosed).toBe(CLOSE_DEVICE_REVOKED);
    expect(await streamClosed).toBe(CLOSE_DEVICE_REVOKED);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(messages.some((m) => m.includes('"DEVICE_REVOKED"'))).toBe(true);
    // The other device's feed stays open.
    expect(laptopFeed.readyState).toBe(WebSocket.OPEN);
    laptopFeed.close();
  });

  it('aDeviceCanRevokeItselfToSignOut', async () => {
    const s = await server();
    const laptop = await TestClient.enrol(s, 'alice', 'laptop');
    const { devices } = await laptop.json<DeviceListResponse>('GET', '/v1/devices');
    const me = devices.find((d) => d.current)?.id ?? '';
    expect((await laptop.req('DELETE', `/v1/devices/${me}`)).status).toBe(204);
    expect(await errorOf(await laptop.req('GET', '/v1/whoami'))).toEqual({
      status: 401,
      code: 'DEVICE_REVOKED',
    });
  });

  it('anotherUsersDeviceIsAnsweredAsAnUnknownOne', async () => {
    const s = await server();
    const alice = await TestClient.enrol(s, 'alice', 'laptop');
    const bob = await TestClient.enrol(s, 'bob', 'desktop');
    const bobId = (await bob.json<DeviceListResponse>('GET', '/v1/devices')).devices[0]?.id ?? '';
    const other = await errorOf(await alice.req('DELETE', `/v1/devices/${bobId}`));
    const unknown = await errorOf(await alice.req('DELETE', '/v1/devices/d_0000000000000000'));
    expect(other).toEqual({ status: 404, code: 'NOT_FOUND' });
    expect(unknown).toEqual(other);
    // Bob's device still works, and Alice does not see it.
    expect((await bob.req('GET', '/v1/whoami')).status).toBe(200);
    const seen = await alice.json<DeviceListResponse>('GET', '/v1/devices');
    expect(seen.devices.map((d) => d.name)).toEqual(['laptop']);
  });

  it('revokingTwiceIsNotFound', async () => {
    const s = await server();
    const laptop = await TestClient.enrol(s, 'alice', 'laptop');
    const phone = await TestClient.enrol(s, 'alice', 'phone');
    const phoneId = (await phone.json<DeviceListResponse>('GET', '/v1/devices')).devices.find(
      (d) => d.current,
    )?.id;
    expect((await laptop.req('DELETE', `/v1/devices/${phoneId}`)).status).toBe(204);
    expect(await errorOf(await laptop.req('DELETE', `/v1/devices/${phoneId}`))).toEqual({
      status: 404,
      code: 'NOT_FOUND',
    });
  });

  it('isDescribedInTheOpenApiDocument', async () => {
    const s = await server();
    const doc = (await (await fetch(`${s.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    expect(Object.keys(doc.paths['/v1/devices'] ?? {})).toContain('get');
    expect(Object.keys(doc.paths['/v1/devices/{id}'] ?? {})).toContain('delete');
    expect(JSON.stringify(doc.paths['/v1/invites'])).toContain('ttlHours');
  });

  it('revocationSurvivesARestart', async () => {
    const first = await startTestServer();
    const laptop = await TestClient.enrol(first, 'alice', 'laptop');
    const phone = await TestClient.enrol(first, 'alice', 'phone');
    const phoneId = (await phone.json<DeviceListResponse>('GET', '/v1/devices')).devices.find(
      (d) => d.current,
    )?.id;
    expect((await laptop.req('DELETE', `/v1/devices/${phoneId}`)).status).toBe(204);
    await first.close();
    const again = await server({ dataDir: first.dir, adminToken: first.adminToken });
    const phone2 = new TestClient(again.url, phone.token);
    expect(await errorOf(await phone2.req('GET', '/v1/whoami'))).toEqual({
      status: 401,
      code: 'DEVICE_REVOKED',
    });
    expect((await new TestClient(again.url, laptop.token).req('GET', '/v1/whoami')).status).toBe(200);
  });
});

describe('enrolment invites', () => {
  it('anInviteExpiresWithAClearCode', async () => {
    const s = await server({ inviteTtlMs: 150 });
    const { invite: inv, expiresMs } = await invite(s, 'carol');
    expect(expiresMs).toBeGreaterThan(Date.now() - 1000);
    expect(expiresMs).toBeLessThanOrEqual(Date.now() + 150);
    await new Promise((r) => setTimeout(r, 200));
    expect(await errorOf(await enrolWith(s, { user: 'carol', deviceName: 'phone', invite: inv }))).toEqual({
      status: 410,
      code: 'INVITE_EXPIRED',
    });
  });

  it('anInvitesLifetimeCanBeSetAtCreation', async () => {
    const s = await server({ inviteTtlMs: 50 });
    const before = Date.now();
    const { invite: inv, expiresMs } = await invite(s, 'carol', 2);
    expect(expiresMs).toBeGreaterThanOrEqual(before + 2 * 3600_000);
    await new Promise((r) => setTimeout(r, 100));
    expect((await enrolWith(s, { user: 'carol', deviceName: 'phone', invite: inv })).status).toBe(201);
  });

  it('theDefaultLifetimeIsSevenDays', async () => {
    const s = await server();
    const before = Date.now();
    const { expiresMs } = await invite(s, 'carol');
    expect(expiresMs - before).toBeGreaterThanOrEqual(7 * 24 * 3600_000 - 1000);
    expect(expiresMs - before).toBeLessThanOrEqual(7 * 24 * 3600_000 + 1000);
  });

  it('anotherUsersAttemptDoesNotUseTheInviteUp', async () => {
    const s = await server();
    const { invite: inv } = await invite(s, 'carol');
    // Mallory holds the invite but names herself: refused, and the invite is left as it was.
    expect(await errorOf(await enrolWith(s, { user: 'mallory', deviceName: 'evil', invite: inv }))).toEqual({
      status: 403,
      code: 'FORBIDDEN',
    });
    const ok = await enrolWith(s, { user: 'carol', deviceName: 'phone', invite: inv });
    expect(ok.status).toBe(201);
    // Mallory got no device and no namespace.
    const db = new Database(nodePath.join(s.dir, 'metadata.sqlite'), { readonly: true });
    try {
      expect(db.prepare("SELECT count(*) AS n FROM devices WHERE user_id = 'mallory'").get()).toEqual({
        n: 0,
      });
    } finally {
      db.close();
    }
    // Used once: a second use is refused.
    expect((await enrolWith(s, { user: 'carol', deviceName: 'phone2', invite: inv })).status).toBe(403);
  });

  it('anExpiredInviteNamedByAnotherUserSaysOnlyInvalid', async () => {
    const s = await server({ inviteTtlMs: 50 });
    const { invite: inv } = await invite(s, 'carol');
    await new Promise((r) => setTimeout(r, 100));
    expect(await errorOf(await enrolWith(s, { user: 'mallory', deviceName: 'evil', invite: inv }))).toEqual({
      status: 403,
      code: 'FORBIDDEN',
    });
  });

  it('refusedAttemptsAreRateLimitedAndDoNotUseTheInvite', async () => {
    const s = await server({ enrolFailuresPerMinute: 5 });
    const { invite: inv } = await invite(s, 'carol');
    const guesses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await enrolWith(s, {
        user: 'carol',
        deviceName: 'x',
        invite: `wfi_guess${i}_aaaaaaaaaaaaaaaa`,
      });
      guesses.push(res.status);
      await res.body?.cancel();
    }
    expect(guesses.slice(0, 5)).toEqual([403, 403, 403, 403, 403]);
    const limited = await enrolWith(s, { user: 'carol', deviceName: 'x', invite: inv });
    expect(limited.status).toBe(503);
    expect((await errorOf(limited)).code).toBe('SLOW_DOWN');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(guesses.slice(5).every((g) => g === 503)).toBe(true);
    // The invite was not touched: still unused in the store.
    const db = new Database(nodePath.join(s.dir, 'metadata.sqlite'), { readonly: true });
    try {
      expect(db.prepare('SELECT count(*) AS n FROM invites WHERE used_ms IS NULL').get()).toEqual({ n: 1 });
    } finally {
      db.close();
    }
  });
});
