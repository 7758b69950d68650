import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CloudClientSettingsError,
  DROPBOX_REDIRECT_PORT,
  cloudClientsFrom,
  defaultCloudsFile,
  loadCloudClients,
  readCloudsFile,
} from '../src/cloud-clients.ts';

const GOOGLE_ID = '123456789012-abcdefghijklmnopqrstuvwxyz012345.apps.googleusercontent.com';
const MS_ID = '3f2b6c1e-8a4d-4f0b-9c7e-1d2e3f4a5b6c';

/** The error cloudClientsFrom throws for `env`, or undefined when it accepts it. */
function refusal(env: Record<string, string>, file: Record<string, string> = {}): CloudClientSettingsError {
  try {
    cloudClientsFrom(env, file);
  } catch (e) {
    if (e instanceof CloudClientSettingsError) return e;
    throw e;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
}

describe('cloud OAuth clients from the environment', () => {
  it('nothing set: no cloud can be signed in to', () => {
    expect(cloudClientsFrom({})).toEqual({ oauth: {}, proxy: {} });
    // Empty values count as unset (FOO= in a shell).
    expect(cloudClientsFrom({ WEFT_DROPBOX_APP_KEY: '', WEFT_GOOGLE_CLIENT_ID: '' })).toEqual({
      oauth: {},
      proxy: {},
    });
  });

  it('Dropbox and OneDrive are public PKCE clients (no secret); Google takes id and secret', () => {
    const c = cloudClientsFrom({
      WEFT_DROPBOX_APP_KEY: 'a1b2c3d4e5f6g7h',
      WEFT_GOOGLE_CLIENT_ID: GOOGLE_ID,
      WEFT_GOOGLE_CLIENT_SECRET: 'GOCSPX-abc_DEF-123',
      WEFT_ONEDRIVE_CLIENT_ID: MS_ID,
    });
    expect(c.oauth.dropbox).toMatchObject({
      clientId: 'a1b2c3d4e5f6g7h',
      authorizeUrl: 'https://www.dropbox.com/oauth2/authorize',
      tokenUrl: 'https://api.dropboxapi.com/oauth2/token',
      scopes: ['files.metadata.read', 'files.content.read', 'files.content.write'],
      // Dropbox matches the registered redirect URI exactly: one fixed port.
      redirectPort: DROPBOX_REDIRECT_PORT,
    });
    expect(DROPBOX_REDIRECT_PORT).toBe(53139);
    expect(c.oauth.gdrive?.redirectPort).toBeUndefined();
    expect(c.oauth.onedrive?.redirectPort).toBeUndefined();
    expect(c.oauth.dropbox?.clientSecret).toBeUndefined();
    expect(c.oauth.gdrive).toMatchObject({
      clientId: GOOGLE_ID,
      clientSecret: 'GOCSPX-abc_DEF-123',
      authorizeUrl: 'https://accounts.google.com/o/oauth2/v2/auth',
      tokenUrl: 'https://oauth2.googleapis.com/token',
    });
    expect(c.oauth.onedrive).toMatchObject({
      clientId: MS_ID,
      authorizeUrl: 'https://login.microsoftonline.com/common/oauth2/v2.0/authorize',
      scopes: ['Files.ReadWrite', 'offline_access'],
    });
    expect(c.oauth.onedrive?.clientSecret).toBeUndefined();
    expect(c.proxy).toEqual({
      dropbox: { clientId: 'a1b2c3d4e5f6g7h' },
      gdrive: { clientId: GOOGLE_ID, clientSecret: 'GOCSPX-abc_DEF-123' },
      onedrive: { clientId: MS_ID },
    });
  });

  it('one cloud alone is fine; a tenant and endpoint overrides (the emulators) apply', () => {
    const c = cloudClientsFrom({
      WEFT_ONEDRIVE_CLIENT_ID: MS_ID,
      WEFT_ONEDRIVE_TENANT: 'consumers',
      WEFT_ONEDRIVE_TOKEN_URL: 'https://localhost:4443/common/oauth2/v2.0/token',
    });
    expect(Object.keys(c.oauth)).toEqual(['onedrive']);
    expect(c.oauth.onedrive?.authorizeUrl).toBe(
      'https://login.microsoftonline.com/consumers/oauth2/v2.0/authorize',
    );
    expect(c.oauth.onedrive?.tokenUrl).toBe('https://localhost:4443/common/oauth2/v2.0/token');
    // The proxy redeems refresh tokens where the agent got them.
    expect(c.proxy).toEqual({
      onedrive: { clientId: MS_ID, tokenUrl: 'https://localhost:4443/common/oauth2/v2.0/token' },
    });
    expect(
      cloudClientsFrom({ WEFT_ONEDRIVE_CLIENT_ID: MS_ID, WEFT_ONEDRIVE_TENANT: 'consumers' }).proxy.onedrive,
    ).toEqual({ clientId: MS_ID, tokenUrl: 'https://login.microsoftonline.com/consumers/oauth2/v2.0/token' });
    const d = cloudClientsFrom({
      WEFT_DROPBOX_APP_KEY: 'key',
      WEFT_DROPBOX_AUTHORIZE_URL: 'http://127.0.0.1:5000/oauth2/authorize',
      WEFT_DROPBOX_TOKEN_URL: 'http://127.0.0.1:5000/oauth2/token',
      WEFT_DROPBOX_REDIRECT_PORT: '0',
    });
    expect(d.oauth.dropbox).toMatchObject({
      redirectPort: 0,
      authorizeUrl: 'http://127.0.0.1:5000/oauth2/authorize',
      tokenUrl: 'http://127.0.0.1:5000/oauth2/token',
    });
    expect(d.proxy.dropbox).toEqual({ clientId: 'key', tokenUrl: 'http://127.0.0.1:5000/oauth2/token' });
  });

  it.each([
    [{ WEFT_DROPBOX_APP_KEY: ' abc ' }, 'WEFT_DROPBOX_APP_KEY', /spaces around it/],
    [{ WEFT_DROPBOX_APP_KEY: '"abc"' }, 'WEFT_DROPBOX_APP_KEY', /not a Dropbox app key/],
    [{ WEFT_DROPBOX_APP_KEY: 'https://www.dropbox.com/developers' }, 'WEFT_DROPBOX_APP_KEY', /not a Dropbox/],
    [{ WEFT_DROPBOX_APP_KEY: 'x'.repeat(257) }, 'WEFT_DROPBOX_APP_KEY', /at most 256/],
    [
      { WEFT_GOOGLE_CLIENT_ID: '1234-abc', WEFT_GOOGLE_CLIENT_SECRET: 's' },
      'WEFT_GOOGLE_CLIENT_ID',
      /\.apps\.googleusercontent\.com/,
    ],
    [{ WEFT_GOOGLE_CLIENT_ID: GOOGLE_ID }, 'WEFT_GOOGLE_CLIENT_SECRET', /needs both/],
    [{ WEFT_GOOGLE_CLIENT_SECRET: 'GOCSPX-x' }, 'WEFT_GOOGLE_CLIENT_SECRET', /WEFT_GOOGLE_CLIENT_ID is not/],
    [{ WEFT_ONEDRIVE_CLIENT_ID: 'my-app' }, 'WEFT_ONEDRIVE_CLIENT_ID', /GUID/],
    [{ WEFT_ONEDRIVE_CLIENT_ID: MS_ID, WEFT_ONEDRIVE_TENANT: 'a/b' }, 'WEFT_ONEDRIVE_TENANT', /tenant/],
    [{ WEFT_ONEDRIVE_TENANT: 'common' }, 'WEFT_ONEDRIVE_TENANT', /WEFT_ONEDRIVE_CLIENT_ID is not/],
    [
      { WEFT_DROPBOX_APP_KEY: 'k', WEFT_DROPBOX_TOKEN_URL: 'http://example.com/token' },
      'WEFT_DROPBOX_TOKEN_URL',
      /https: URL/,
    ],
    [
      { WEFT_DROPBOX_APP_KEY: 'k', WEFT_DROPBOX_AUTHORIZE_URL: 'not a url' },
      'WEFT_DROPBOX_AUTHORIZE_URL',
      /not a URL/,
    ],
    [
      { WEFT_DROPBOX_APP_KEY: 'k', WEFT_DROPBOX_TOKEN_URL: 'https://u:p@api.example/token' },
      'WEFT_DROPBOX_TOKEN_URL',
      /password/,
    ],
    [{ WEFT_DROPBOX_TOKEN_URL: 'https://api.example/token' }, 'WEFT_DROPBOX_TOKEN_URL', /set both/],
    [
      { WEFT_DROPBOX_APP_KEY: 'k', WEFT_DROPBOX_REDIRECT_PORT: '70000' },
      'WEFT_DROPBOX_REDIRECT_PORT',
      /not a port/,
    ],
    [
      { WEFT_DROPBOX_APP_KEY: 'k', WEFT_DROPBOX_REDIRECT_PORT: '80a' },
      'WEFT_DROPBOX_REDIRECT_PORT',
      /not a port/,
    ],
    [{ WEFT_DROPBOX_REDIRECT_PORT: '8080' }, 'WEFT_DROPBOX_REDIRECT_PORT', /WEFT_DROPBOX_APP_KEY is not/],
  ])('refuses %j, naming %s', (env, variable, message) => {
    const e = refusal(env as Record<string, string>);
    expect(e.variable).toBe(variable);
    expect(e.message.startsWith(`${variable} (from the environment)`)).toBe(true);
    expect(e.message).toMatch(message);
  });

  it('the environment wins over clouds.json; the file fills in the rest and is named in errors', () => {
    const c = cloudClientsFrom(
      { WEFT_DROPBOX_APP_KEY: 'fromenv' },
      { WEFT_DROPBOX_APP_KEY: 'fromfile', WEFT_ONEDRIVE_CLIENT_ID: MS_ID },
      '/home/me/.weft/clouds.json',
    );
    expect(c.proxy).toEqual({ dropbox: { clientId: 'fromenv' }, onedrive: { clientId: MS_ID } });
    const e = refusal({}, { WEFT_ONEDRIVE_CLIENT_ID: 'nope' });
    expect(e.message).toMatch(/^WEFT_ONEDRIVE_CLIENT_ID \(from clouds\.json\) is not/);
  });
});

describe('clouds.json', () => {
  const withFile = async (content: string | undefined): Promise<string> => {
    const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-clouds-'));
    const file = nodePath.join(dir, 'clouds.json');
    if (content !== undefined) await fsp.writeFile(file, content);
    return file;
  };

  it('lives in $WEFT_HOME (default ~/.weft)', () => {
    expect(defaultCloudsFile({ WEFT_HOME: '/srv/weft' })).toBe('/srv/weft/clouds.json');
    expect(defaultCloudsFile({})).toBe(nodePath.join(os.homedir(), '.weft', 'clouds.json'));
  });

  it('absent: nothing; present: read and merged under the environment', async () => {
    expect(readCloudsFile(await withFile(undefined))).toEqual({});
    const file = await withFile(JSON.stringify({ WEFT_DROPBOX_APP_KEY: 'filekey' }));
    expect(loadCloudClients({}, file).proxy).toEqual({ dropbox: { clientId: 'filekey' } });
    expect(loadCloudClients({ WEFT_DROPBOX_APP_KEY: 'envkey' }, file).proxy).toEqual({
      dropbox: { clientId: 'envkey' },
    });
  });

  it.each([
    ['{not json', /is not JSON/],
    ['["WEFT_DROPBOX_APP_KEY"]', /one JSON object/],
    ['{"WEFT_DROPBOX_APP_KEY": 5}', /WEFT_DROPBOX_APP_KEY \(from .*clouds\.json\) must be a string/],
    ['{"WEFT_DROPBOX_KEY": "x"}', /"WEFT_DROPBOX_KEY", which is not a Weft cloud setting/],
  ])('refuses a malformed file %s', async (content, message) => {
    const file = await withFile(content);
    expect(() => loadCloudClients({}, file)).toThrow(message);
    expect(() => loadCloudClients({}, file)).toThrow(CloudClientSettingsError);
  });
});
