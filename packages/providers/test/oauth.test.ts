import { createHash } from 'node:crypto';
import * as net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DropboxEmulator } from '@weft/cloud-emulators/dropbox';
import { GDriveEmulator } from '@weft/cloud-emulators/gdrive';
import { DropboxProvider } from '../src/adapters/dropbox.ts';
import { GDriveProvider } from '../src/adapters/gdrive.ts';
import { AuthError } from '../src/errors.ts';
import {
  OAuthSession,
  authorizeWithLoopback,
  createPkcePair,
  dropboxOAuth,
  googleOAuth,
  memoryTokenStore,
} from '../src/oauth/index.ts';

/** Plays the browser: follows the authorization redirect to our loopback listener. */
async function browser(url: string): Promise<void> {
  const consent = await fetch(url, { redirect: 'manual' });
  const back = consent.headers.get('location');
  if (!back) throw new Error(`no redirect from ${url}`);
  await (await fetch(back)).text();
}

describe('OAuth 2 for desktop apps (PKCE, loopback redirect)', () => {
  let dbx: DropboxEmulator;
  let gd: GDriveEmulator;
  beforeAll(async () => {
    dbx = await new DropboxEmulator().start();
    gd = await new GDriveEmulator().start();
  });
  afterAll(async () => {
    await dbx.close();
    await gd.close();
  });

  it('a client with a fixed redirect port (Dropbox matches it exactly) listens there; a busy port is a clear AuthError', async () => {
    // A port that is free now, then held by someone else.
    const holder = net.createServer();
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
    const port = (holder.address() as net.AddressInfo).port;
    await new Promise<void>((r) => holder.close(() => r()));
    const config = { ...dropboxOAuth('weft-app', { www: dbx.url, api: dbx.url }), redirectPort: port };
    let seen = '';
    await authorizeWithLoopback(config, memoryTokenStore(), {
      openBrowser: async (url) => {
        seen = url;
        await browser(url);
      },
    });
    expect(new URL(seen).searchParams.get('redirect_uri')).toBe(`http://127.0.0.1:${port}/callback`);

    await new Promise<void>((r) => holder.listen(port, '127.0.0.1', r));
    try {
      let opened = false;
      const store = memoryTokenStore();
      const failed = authorizeWithLoopback(config, store, { openBrowser: () => void (opened = true) });
      await expect(failed).rejects.toThrow(AuthError);
      await expect(failed).rejects.toThrow(
        `cannot receive the sign-in redirect on 127.0.0.1:${port}: the port is in use`,
      );
      expect(opened).toBe(false);
      expect(store.current()).toBeUndefined();
    } finally {
      await new Promise<void>((r) => holder.close(() => r()));
    }
  });

  it('makes an S256 pair', () => {
    const { verifier, challenge } = createPkcePair();
    expect(verifier).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(challenge).toBe(createHash('sha256').update(verifier).digest('base64url'));
  });

  it('signs in through 127.0.0.1, stores the tokens, and the provider refreshes on expiry', async () => {
    const config = dropboxOAuth('weft-app', { www: dbx.url, api: dbx.url });
    const store = memoryTokenStore();
    let seen = '';
    const tokens = await authorizeWithLoopback(config, store, {
      openBrowser: async (url) => {
        seen = url;
        await browser(url);
      },
    });
    const auth = new URL(seen);
    expect(auth.searchParams.get('code_challenge_method')).toBe('S256');
    expect(auth.searchParams.get('token_access_type')).toBe('offline');
    expect(auth.searchParams.get('redirect_uri')).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    expect(tokens.refreshToken).toBeTruthy();
    expect(store.current()).toEqual(tokens);

    const session = new OAuthSession(config, store);
    const provider = new DropboxProvider({ token: session, root: '/oauth', baseUrl: dbx.url });
    await provider.write('a.txt', Buffer.from('signed in'));
    // The server expires the token: the provider's 401 invalidates it, the session refreshes once.
    dbx.oauth.expireAccessTokens();
    expect((await provider.stat('a.txt')).size).toBe(9);
    expect(store.current()?.accessToken).not.toBe(tokens.accessToken);
    expect(store.current()?.refreshToken).toBe(tokens.refreshToken);
  });

  it('refreshes ahead of expiry, once for concurrent callers', async () => {
    let now = 1_000_000;
    const config = googleOAuth('weft-desktop', 'not-secret', { accounts: gd.url, token: `${gd.url}/token` });
    const store = memoryTokenStore();
    await authorizeWithLoopback(config, store, { openBrowser: browser, now: () => now });
    const first = store.current();
    const session = new OAuthSession(config, store, { now: () => now });
    expect(await session.getAccessToken()).toBe(first?.accessToken);
    now += 3600_000; // past expires_in
    const [a, b] = await Promise.all([session.getAccessToken(), session.getAccessToken()]);
    expect(a).toBe(b);
    expect(a).not.toBe(first?.accessToken);
    expect(gd.requestLog.filter((r) => r.endpoint === 'oauth.token')).toHaveLength(2);
  });

  it('drive: a refused token is refreshed once and the call repeated', async () => {
    const config = googleOAuth('weft-desktop', undefined, { accounts: gd.url, token: `${gd.url}/token` });
    const store = memoryTokenStore();
    await authorizeWithLoopback(config, store, { openBrowser: browser });
    const provider = new GDriveProvider({
      token: new OAuthSession(config, store),
      root: 'oauth',
      rootUrl: gd.url,
    });
    await provider.write('a.txt', Buffer.from('drive'));
    const before = store.current()?.accessToken;
    gd.oauth.expireAccessTokens();
    expect((await provider.stat('a.txt')).size).toBe(5);
    expect(store.current()?.accessToken).not.toBe(before);
  });

  it('refuses a forged state and reports a refused grant as AuthError', async () => {
    const config = dropboxOAuth('weft-app', { www: dbx.url, api: dbx.url });
    await expect(
      authorizeWithLoopback(config, memoryTokenStore(), {
        openBrowser: async (url) => {
          const redirect = new URL(url).searchParams.get('redirect_uri') ?? '';
          await fetch(`${redirect}?code=abc&state=forged`);
        },
      }),
    ).rejects.toBeInstanceOf(AuthError);
    const session = new OAuthSession(
      config,
      memoryTokenStore({ accessToken: 'x', refreshToken: 'revoked', expiresAtMs: 0 }),
    );
    await expect(session.getAccessToken()).rejects.toBeInstanceOf(AuthError);
  });
});
