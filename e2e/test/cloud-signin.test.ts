/**
 * Cloud sign-in out of the box (issue #19): a `weft agent` process, given the clouds' OAuth
 * clients in its environment (WEFT_DROPBOX_APP_KEY, WEFT_GOOGLE_CLIENT_ID/_SECRET,
 * WEFT_ONEDRIVE_CLIENT_ID, here with endpoint overrides pointing at the local emulators),
 * connects Dropbox, Google Drive and OneDrive through its UI API: connectCloud hands out the
 * provider's authorization page, the emulator approves and redirects to the agent's loopback
 * redirect, the agent redeems the code with PKCE and lists the account as connected. A
 * malformed variable stops the agent before it starts, naming the variable.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { DropboxEmulator, GDriveEmulator, OneDriveEmulator } from '@weft/cloud-emulators';
import { sharedLocalCertificate } from '@weft/cloud-emulators/tls';
import { ProxyClient } from '@weft/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestProxy, startTestProxy, tempDir } from '../src/harness.ts';
import { trustCaForFetch } from '../src/share-harness.ts';

const WEFT = nodePath.resolve(new URL('../../packages/core/bin/weft.js', import.meta.url).pathname);
const DROPBOX_KEY = 'weftemulatorkey';
const GOOGLE_ID = '123456789012-weftemulator.apps.googleusercontent.com';
const GOOGLE_SECRET = 'GOCSPX-weft-emulator';
const ONEDRIVE_ID = '0b6f3d2a-5c1e-4e8f-9a7b-2c3d4e5f6a7b';

/** Only what the agent needs from this process's environment: no WEFT_* of the person running it. */
function baseEnv(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('WEFT_')) env[k] = v;
  return {
    ...env,
    HOME: home,
    WEFT_HOME: nodePath.join(home, '.weft'),
    WEFT_SECRET_KEY_FILE: nodePath.join(home, 'secret.key'),
  };
}

interface RpcAnswer<T> {
  ok: boolean;
  value?: T;
  error?: { code: string; message: string };
}

describe('weft agent signs in to the clouds with the OAuth clients from its environment', () => {
  let root: string;
  let proxy: TestProxy;
  let dropbox: DropboxEmulator;
  let gdrive: GDriveEmulator;
  let onedrive: OneDriveEmulator;
  let agent: ChildProcess | undefined;
  let stderr = '';
  let info: { statusUrl: string; secret: string };

  const rpc = async <T>(method: string, input: unknown): Promise<RpcAnswer<T>> => {
    const res = await fetch(new URL(`/api/rpc/${method}`, info.statusUrl), {
      method: 'POST',
      headers: { 'x-weft-secret': info.secret, 'content-type': 'application/json' },
      body: JSON.stringify(input),
    });
    return (await res.json()) as RpcAnswer<T>;
  };

  beforeAll(async () => {
    root = await tempDir('cloud-signin');
    const tls = sharedLocalCertificate();
    // This process follows the authorization page's redirect (OneDrive's is HTTPS).
    await trustCaForFetch(tls.ca);
    dropbox = await new DropboxEmulator().start();
    gdrive = await new GDriveEmulator().start();
    onedrive = await new OneDriveEmulator({ tls: { cert: tls.cert, key: tls.key } }).start();
    proxy = await startTestProxy('fs');
    const { token } = await ProxyClient.enrol(proxy.url, {
      user: 'alice',
      deviceName: 'laptop',
      adminToken: proxy.adminToken,
    });
    const tokenFile = nodePath.join(root, 'device.token');
    await fsp.writeFile(tokenFile, token, { mode: 0o600 });
    const state = nodePath.join(root, 'state');
    const folder = nodePath.join(root, 'Weft');
    await fsp.mkdir(folder, { recursive: true });
    agent = spawn(
      process.execPath,
      [WEFT, 'agent', '--folder', folder, '--server', proxy.url, '--state', state, '--token-file', tokenFile],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          ...baseEnv(root),
          NODE_EXTRA_CA_CERTS: tls.caFile,
          WEFT_DROPBOX_APP_KEY: DROPBOX_KEY,
          WEFT_DROPBOX_AUTHORIZE_URL: `${dropbox.url}/oauth2/authorize`,
          WEFT_DROPBOX_TOKEN_URL: `${dropbox.url}/oauth2/token`,
          WEFT_GOOGLE_CLIENT_ID: GOOGLE_ID,
          WEFT_GOOGLE_CLIENT_SECRET: GOOGLE_SECRET,
          WEFT_GOOGLE_AUTHORIZE_URL: `${gdrive.url}/o/oauth2/v2/auth`,
          WEFT_GOOGLE_TOKEN_URL: `${gdrive.url}/token`,
          WEFT_ONEDRIVE_CLIENT_ID: ONEDRIVE_ID,
          WEFT_ONEDRIVE_AUTHORIZE_URL: `${onedrive.url}/common/oauth2/v2.0/authorize`,
          WEFT_ONEDRIVE_TOKEN_URL: `${onedrive.url}/common/oauth2/v2.0/token`,
        },
      },
    );
    let stdout = '';
    agent.stdout?.on('data', (c: Buffer) => (stdout += c.toString()));
    agent.stderr?.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-20_000)));
    // Starting takes seconds (TypeScript through tsx), longer on a busy machine.
    for (let i = 0; i < 2400 && !/cloud sign-in/.test(stdout); i++) {
      if (agent.exitCode !== null) throw new Error(`weft agent exited with ${agent.exitCode}: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(stdout).toContain('weft agent: cloud sign-in set up for dropbox, gdrive, onedrive');
    info = JSON.parse(await fsp.readFile(nodePath.join(state, 'agent.json'), 'utf8')) as typeof info;
  });

  afterAll(async () => {
    if (agent && agent.exitCode === null) {
      const exited = new Promise((r) => agent?.once('exit', r));
      agent.kill('SIGTERM');
      await exited;
    }
    await proxy?.close();
    await dropbox?.close();
    await gdrive?.close();
    await onedrive?.close();
  });

  it.each([
    [
      'dropbox',
      () => dropbox,
      '/oauth2/authorize',
      DROPBOX_KEY,
      'files.metadata.read files.content.read files.content.write',
    ],
    ['gdrive', () => gdrive, '/o/oauth2/v2/auth', GOOGLE_ID, 'https://www.googleapis.com/auth/drive'],
    [
      'onedrive',
      () => onedrive,
      '/common/oauth2/v2.0/authorize',
      ONEDRIVE_ID,
      'Files.ReadWrite offline_access',
    ],
  ] as const)(
    'connects %s through the emulator’s authorization page',
    async (provider, emulator, path, clientId, scope) => {
      const started = await rpc<{ authorizeUrl: string }>('connectCloud', { provider });
      expect(started.error, stderr).toBeUndefined();
      const authorize = new URL(started.value?.authorizeUrl ?? '');
      expect(`${authorize.origin}${authorize.pathname}`).toBe(`${emulator().url}${path}`);
      const q = authorize.searchParams;
      expect(q.get('client_id')).toBe(clientId);
      expect(q.get('scope')).toBe(scope);
      expect(q.get('code_challenge_method')).toBe('S256');
      // Dropbox's is the fixed one its App Console registers (docs/clouds.md); the others any port.
      if (provider === 'dropbox') expect(q.get('redirect_uri')).toBe('http://127.0.0.1:53139/callback');
      else expect(q.get('redirect_uri')).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);
      // The person's browser: the (auto-approving) page redirects to the agent's loopback.
      const page = await fetch(authorize);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('Signed in');
      let account: { kind: string; state: string; detail?: string } | undefined;
      for (let i = 0; i < 400; i++) {
        const list = await rpc<{ accounts: { kind: string; state: string; detail?: string }[] }>(
          'listAccounts',
          {},
        );
        account = list.value?.accounts.find((a) => a.kind === provider);
        if (account?.state !== 'connecting') break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(account, stderr).toMatchObject({ kind: provider, state: 'connected' });
      // The code was redeemed at the configured token endpoint, once, and accepted.
      const grants = emulator().requestLog.filter((r) => r.endpoint === 'oauth.token');
      expect(grants.map((r) => r.status)).toEqual([200]);
    },
  );

  it('a malformed variable stops the agent before it starts, naming the variable', async () => {
    const bad = spawn(
      process.execPath,
      [
        WEFT,
        'agent',
        '--folder',
        nodePath.join(root, 'other'),
        '--server',
        proxy.url,
        '--state',
        nodePath.join(root, 'other-state'),
      ],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...baseEnv(root), WEFT_ONEDRIVE_CLIENT_ID: 'not-a-guid' },
      },
    );
    let err = '';
    bad.stderr?.on('data', (c: Buffer) => (err += c.toString()));
    const code = await new Promise<number | null>((r) => bad.once('exit', r));
    expect(code).toBe(2);
    expect(err).toMatch(
      /^weft: WEFT_ONEDRIVE_CLIENT_ID \(from the environment\) is not a Microsoft Application \(client\) ID/,
    );
    // Nothing was started: no state directory, no status file.
    await expect(fsp.stat(nodePath.join(root, 'other-state'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
