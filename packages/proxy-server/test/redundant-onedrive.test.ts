/**
 * A OneDrive account as a backend of the proxy's redundant object tier (issue #17,
 * docs/redundancy.md "Cloud accounts as backends"), opened from the proxy's config through
 * the real adapter (Microsoft Graph SDK) against the OneDrive emulator, which rotates
 * refresh tokens as Microsoft identity does (each refresh answers a new one and, here,
 * revokes the one redeemed). The tier stores fragments and replicas there; the rotated
 * refresh token is kept in the tier's folder (0600), so after a restart — access tokens
 * expired, the configured refresh token revoked — the backend still signs in, and a file
 * reads back with two directory backends gone (so the OneDrive fragment is needed).
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { OneDriveEmulator } from '@weft/cloud-emulators/onedrive';
import { collect, type Provider } from '@weft/providers';
import type { RedundantProvider } from '@weft/providers/redundant';
import { openRedundantTier, RedundantTierConfig } from '../src/redundant-tier.ts';
import { tempDir } from './helpers.ts';

const KiB = 1024;
const CLIENT = 'weft-proxy-test';
let emu: OneDriveEmulator;
const open: Provider[] = [];
beforeAll(async () => {
  emu = await new OneDriveEmulator({ tls: inject('emulatorTls'), rotateRefreshTokens: true }).start();
});
afterAll(async () => {
  for (const p of open) await p.close?.().catch(() => undefined);
  await emu?.close();
});

const tokenUrl = (): string => `${emu.apiOrigin}/common/oauth2/v2.0/token`;

/** Redeem at the token endpoint; the answer's status and body. */
async function tokenRequest(
  form: Record<string, string>,
): Promise<{ status: number; body: Record<string, string> }> {
  const res = await fetch(tokenUrl(), { method: 'POST', body: new URLSearchParams(form) });
  return { status: res.status, body: (await res.json()) as Record<string, string> };
}

/** A refresh token as a person signing in gets one (authorization-code grant). */
async function signIn(): Promise<string> {
  const redirect = 'http://127.0.0.1:9/callback';
  const q = new URLSearchParams({ client_id: CLIENT, redirect_uri: redirect, response_type: 'code' });
  const res = await fetch(`${emu.apiOrigin}/common/oauth2/v2.0/authorize?${q}`, { redirect: 'manual' });
  const code = new URL(res.headers.get('location')!).searchParams.get('code')!;
  const t = await tokenRequest({
    grant_type: 'authorization_code',
    code,
    client_id: CLIENT,
    redirect_uri: redirect,
  });
  return t.body.refresh_token!;
}

describe('OneDrive account as a redundant-tier backend', () => {
  it('stores blobs there through the adapter and keeps its rotated refresh token across a restart', async () => {
    const dataDir = await tempDir('weft-redundant-onedrive-');
    const refreshToken = await signIn();
    const dirs = [0, 1, 2, 3].map((i) => nodePath.join(dataDir, `d${i}`));
    const config = RedundantTierConfig.parse({
      type: 'redundant',
      backends: [
        ...dirs.map((dir, i) => ({ id: `d${i}`, type: 'fs', dir })),
        {
          id: 'od',
          type: 'onedrive',
          root: 'Apps/Weft',
          refreshToken,
          clientId: CLIENT,
          tokenUrl: tokenUrl(),
          graphOrigin: emu.apiOrigin,
        },
      ],
      thresholdBytes: 64 * KiB,
      maxShardBytes: 32 * KiB,
      replicas: 5,
      probeIntervalMs: 0,
    });
    const files = new Map([
      ['large.bin', randomBytes(300 * KiB)],
      ['small.txt', randomBytes(3 * KiB)],
    ]);
    const first = (await openRedundantTier(config, dataDir)) as RedundantProvider;
    open.push(first);
    for (const [p, d] of files) await first.write(p, d);
    for (const p of files.keys()) {
      const locs = await first.store.locations((await first.store.objectOf(p))!);
      expect(locs.find((l) => l.backend === 'od')?.state, p).toBe('ok');
    }
    await first.close();

    // The token the tier now holds is not the one configured, which is revoked.
    const file = nodePath.join(dataDir, 'redundant', 'tokens', 'od.json');
    expect((await fsp.stat(file)).mode & 0o777).toBe(0o600);
    expect((await fsp.stat(nodePath.dirname(file))).mode & 0o777).toBe(0o700);
    const saved = JSON.parse(await fsp.readFile(file, 'utf8')) as { tokens: { refreshToken: string } };
    expect(saved.tokens.refreshToken).not.toBe(refreshToken);
    expect(JSON.stringify(saved)).not.toContain(refreshToken);
    const old = await tokenRequest({
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      client_id: CLIENT,
    });
    expect(old).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });

    // Restart with the same config, every access token expired, two directories gone.
    emu.oauth.expireAccessTokens();
    const again = (await openRedundantTier(config, dataDir)) as RedundantProvider;
    open.push(again);
    await fsp.rm(dirs[0]!, { recursive: true });
    await fsp.rm(dirs[1]!, { recursive: true });
    await again.probe();
    expect((await again.health()).map((h) => h.state)).toEqual([
      'down',
      'down',
      'available',
      'available',
      'available',
    ]);
    for (const [p, d] of files) expect((await collect(await again.read(p))).equals(d), p).toBe(true);
    expect(again.metrics.degradedReads).toBeGreaterThan(0);
  });
});
