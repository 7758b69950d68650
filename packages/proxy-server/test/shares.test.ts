/**
 * The share API on the proxy: a share kept in Ann's Weft storage and Ben's Dropbox (the
 * emulator, through the real adapter; change notification by list_folder/longpoll), with
 * the proxy's mirror engine between them. Accounts, invitations, seeding with progress,
 * both directions of propagation, the namespace feed carrying mirror writes, confinement
 * to the caller, bad input refused with nothing changed, tokens encrypted at rest.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DropboxEmulator } from '@weft/cloud-emulators/dropbox';
import { DropboxProvider, collect } from '@weft/providers';
import type { ShareInfo, ShareInviteResponse, SharesResponse } from '@weft/wire';
import { TestClient, readFeed, startTestServer } from './helpers.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('share API: Weft storage ↔ Dropbox through the proxy', () => {
  let dbx: DropboxEmulator;
  let server: Server;
  let ann: TestClient;
  let ben: TestClient;
  let cat: TestClient;
  let dropbox: DropboxProvider;

  beforeAll(async () => {
    dbx = await new DropboxEmulator({ longpollTimeScale: 0.01 }).start();
    server = await startTestServer({
      shares: {
        enabled: true,
        pollIntervalMs: 100,
        longpollTimeoutSeconds: 30,
        notifyBatchMs: 100,
        oldKeys: {},
        endpoints: { dropbox: dbx.url },
        oauth: {},
      },
    });
    ann = await TestClient.enrol(server, 'ann');
    ben = await TestClient.enrol(server, 'ben');
    cat = await TestClient.enrol(server, 'cat');
    dropbox = new DropboxProvider({ token: dbx.accessToken, baseUrl: dbx.url });
  });

  afterAll(async () => {
    await server?.stop();
    await dbx?.close();
  });

  it('creates, invites, seeds, mirrors both ways and confines everything to members', async () => {
    await ann.putSmall({ 'Team/plan.txt': 'plan v1', 'Team/notes/a.txt': 'a' });
    const shares = async (c: TestClient) => (await c.json<SharesResponse>('GET', '/v1/shares')).shares;

    // Bad input: a clear 4xx, and nothing changes.
    const bad = [
      await ann.req('POST', '/v1/shares', { name: 'Team', replica: { cloud: 'weft', root: 'Nope' } }),
      await ann.req('POST', '/v1/shares', { name: 'Team', replica: { cloud: 'weft', root: '/Team' } }),
      await ann.req('POST', '/v1/shares', { name: '', replica: { cloud: 'weft', root: 'Team' } }),
      await ann.req('POST', '/v1/shares', { name: 'x', replica: { cloud: 'weft', root: 'Team/plan.txt' } }),
    ];
    expect(bad.map((r) => r.status)).toEqual([404, 400, 400, 409]);
    expect(await shares(ann)).toEqual([]);
    expect((await fetch(`${server.url}/v1/shares`)).status).toBe(401);

    const created = await ann.json<ShareInfo>('POST', '/v1/shares', {
      name: 'Team',
      replica: { cloud: 'weft', root: 'Team' },
    });
    expect(created.role).toBe('owner');
    expect(created.members).toEqual([
      expect.objectContaining({ member: 'ann', role: 'owner', cloud: 'weft', root: 'Team' }),
    ]);
    // The same folder (or one inside it) cannot be shared twice.
    expect(
      (await ann.req('POST', '/v1/shares', { name: 'again', replica: { cloud: 'weft', root: 'Team/notes' } }))
        .status,
    ).toBe(409);

    // Ben connects his Dropbox; the token never comes back and is not stored in clear.
    const account = await ben.json<{ id: string; provider: string }>('POST', '/v1/accounts', {
      provider: 'dropbox',
      label: 'ben@example.com',
      tokens: { accessToken: dbx.accessToken, refreshToken: 'refresh-secret-xyz' },
    });
    expect(account.provider).toBe('dropbox');
    const listed = await ben.req('GET', '/v1/accounts');
    const listedText = await listed.text();
    expect(listedText).toContain('ben@example.com');
    expect(listedText).not.toContain(dbx.accessToken);
    const files = await fsp.readdir(server.dir);
    for (const f of files.filter((n) => n.startsWith('mirror.sqlite'))) {
      const raw = await fsp.readFile(nodePath.join(server.dir, f));
      expect(raw.includes(Buffer.from('refresh-secret-xyz'))).toBe(false);
    }
    expect((await ben.req('POST', '/v1/accounts', { provider: 'box', label: 'x', tokens: {} })).status).toBe(
      400,
    );

    // Invitation: only members invite; preview does not use it; single use.
    expect((await cat.req('POST', `/v1/shares/${created.id}/invites`, {})).status).toBe(404);
    const invite = await ann.json<ShareInviteResponse>('POST', `/v1/shares/${created.id}/invites`, {});
    expect(invite.link).toBe(`weft://share/${invite.token}`);
    const preview = await ben.json<{ name: string; members: unknown[] }>(
      'POST',
      '/v1/shares/invites/preview',
      {
        token: invite.token,
      },
    );
    expect(preview).toMatchObject({
      name: 'Team',
      owner: 'ann',
      members: [{ member: 'ann', cloud: 'weft' }],
    });
    // Cat cannot accept with Ben's account: another user's account is not found.
    expect(
      (
        await cat.req('POST', '/v1/shares/accept', {
          token: invite.token,
          replica: { cloud: 'account', accountId: account.id, root: 'Cat' },
        })
      ).status,
    ).toBe(404);
    await dropbox.write('Shared/Team/mine.txt', new TextEncoder().encode('ben had this'));
    const joined = await ben.json<ShareInfo>('POST', '/v1/shares/accept', {
      token: invite.token,
      replica: { cloud: 'account', accountId: account.id, root: 'Shared/Team' },
    });
    expect(joined.role).toBe('member');
    expect(joined.members.map((m) => [m.member, m.cloud])).toEqual([
      ['ann', 'weft'],
      ['ben', 'dropbox'],
    ]);
    // Ben sees his own folder, not Ann's.
    expect(joined.members.find((m) => m.member === 'ann')?.root).toBeUndefined();
    expect(joined.members.find((m) => m.member === 'ben')).toMatchObject({
      root: 'Shared/Team',
      accountLabel: 'ben@example.com',
    });
    expect(
      (
        await cat.req('POST', '/v1/shares/accept', {
          token: invite.token,
          replica: { cloud: 'weft', root: 'Team' },
        })
      ).status,
    ).toBe(404); // used

    // Seeding: Ann's files reach Ben's Dropbox, Ben's file reaches Ann; progress reported.
    const text = async (p: string) => Buffer.from(await collect(await dropbox.read(p))).toString('utf8');
    await until('seeded', async () => ((await text('Shared/Team/notes/a.txt')) === 'a' ? true : undefined));
    expect(await text('Shared/Team/plan.txt')).toBe('plan v1');
    await until('ben file at ann', async () =>
      (await ann.text('Team/mine.txt')) === 'ben had this' ? 1 : undefined,
    );
    const after = await until('seeding done', async () => {
      const s = (await shares(ben))[0];
      return s?.members.find((m) => m.member === 'ben')?.seeding?.done ? s : undefined;
    });
    const seeding = after.members.find((m) => m.member === 'ben')?.seeding;
    // Both folders merged at the first start: notes/, notes/a.txt, plan.txt from Ann, mine.txt from Ben.
    expect(seeding?.total).toBe(4);
    expect(seeding?.applied).toBe(4);

    // Ben edits on Dropbox's own API: Ann's namespace and her feed get it (the mirror's device).
    const cursor = (await ann.json<{ seq: number }>('GET', '/v1/whoami')).seq;
    const feed = readFeed(ann, cursor, (ch) => ch.some((c) => c.path === 'Team/plan.txt'));
    const st = await dropbox.stat('Shared/Team/plan.txt');
    await dropbox.write('Shared/Team/plan.txt', new TextEncoder().encode('plan v2 by ben'), {
      ifRevision: st.revision,
    });
    await until('edit at ann', async () =>
      (await ann.text('Team/plan.txt')) === 'plan v2 by ben' ? 1 : undefined,
    );
    const got = await feed;
    expect(got.changes.find((c) => c.path === 'Team/plan.txt')?.device).toBe(`mirror:${created.id}`);

    // Ann edits in Weft: Ben's Dropbox gets it, and nothing echoes back.
    const [plan] = await ann.putSmall({ 'Team/plan.txt': 'plan v3 by ann' });
    expect(plan?.result.status).toBe('applied');
    await until('edit at ben', async () =>
      (await text('Shared/Team/plan.txt')) === 'plan v3 by ann' ? 1 : undefined,
    );
    await new Promise((r) => setTimeout(r, 500));
    expect(await ann.text('Team/plan.txt')).toBe('plan v3 by ann');
    expect((await shares(ann))[0]?.status.conflicts).toBe(0);

    // Confinement: a non-member sees nothing; only the owner removes members.
    expect((await cat.req('GET', `/v1/shares/${created.id}`)).status).toBe(404);
    expect(await shares(cat)).toEqual([]);
    expect((await ben.req('DELETE', `/v1/shares/${created.id}/members/ann`)).status).toBe(403);
    expect((await ann.req('POST', `/v1/shares/${created.id}/leave`)).status).toBe(403); // owner leaves last
    expect((await ben.req('DELETE', `/v1/accounts/${account.id}`)).status).toBe(400); // in use

    // Ben's Dropbox is full: every upload is refused (reads still work). His replica is shown
    // unavailable — to Ann (the owner) with the cause and what waits, to Ben with the
    // cloud's message too — Ann's changes wait for him, and reach him once there is room.
    const full = dbx.faults.add({
      endpoint: 'files/upload_session/start',
      action: { kind: 'status', status: 409, reason: 'insufficient_space' },
    });
    await ann.putSmall({ 'Team/while-full.txt': 'waits for room' });
    const benReplica = async (c: TestClient) =>
      (await shares(c))[0]?.members.find((m) => m.member === 'ben')?.replica;
    const down = await until('ben unavailable', async () => {
      const r = await benReplica(ann);
      return r?.state === 'unavailable' ? r : undefined;
    });
    expect(down).toMatchObject({ state: 'unavailable', cause: 'full' });
    expect(down.waiting).toBeGreaterThanOrEqual(1);
    expect(down.sinceMs).toBeGreaterThan(0);
    expect(down.error).toBeUndefined(); // the cloud's own words: for its member only
    expect((await benReplica(ben))?.error).toContain('insufficient_space');
    expect((await shares(ann))[0]?.members.find((m) => m.member === 'ann')?.replica).toEqual({
      state: 'available',
      waiting: 0,
    });
    await expect(dropbox.stat('Shared/Team/while-full.txt')).rejects.toThrow();
    full();
    await until('room again', async () =>
      (await text('Shared/Team/while-full.txt').catch(() => '')) === 'waits for room' ? 1 : undefined,
    );
    expect(
      await until('ben available', async () => {
        const r = await benReplica(ben);
        return r?.state === 'available' && r.waiting === 0 ? r : undefined;
      }),
    ).toEqual({ state: 'available', waiting: 0 });

    // The routes are in the OpenAPI document.
    const openapi = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
      paths: Record<string, unknown>;
    };
    for (const p of [
      '/v1/shares',
      '/v1/shares/{id}',
      '/v1/shares/accept',
      '/v1/accounts',
      '/v1/shares/{id}/invites',
    ])
      expect(Object.keys(openapi.paths)).toContain(p);
    expect(JSON.stringify(openapi)).toContain('ReplicaAvailability');

    // Removal: Ben stops syncing; his folder stays as it is.
    expect((await ann.req('DELETE', `/v1/shares/${created.id}/members/ben`)).status).toBe(204);
    expect((await shares(ben)).length).toBe(0);
    await ann.putSmall({ 'Team/after.txt': 'not for ben' });
    await new Promise((r) => setTimeout(r, 500));
    await expect(dropbox.stat('Shared/Team/after.txt')).rejects.toThrow();
    expect(await text('Shared/Team/plan.txt')).toBe('plan v3 by ann');
    expect((await ben.req('DELETE', `/v1/accounts/${account.id}`)).status).toBe(204);
  });
});
