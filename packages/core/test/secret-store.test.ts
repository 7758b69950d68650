/**
 * Secrets at rest: the agent's key-file store never writes a token in plain text, binds each
 * ciphertext to its name, and refuses a key file others can read; device.json keeps no token
 * (a legacy inline token is moved into the store).
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDevice, saveDevice } from '../src/device-credentials.ts';
import {
  SecretStoreError,
  keyFileSecretStore,
  memorySecretStore,
  secretTokenStore,
} from '../src/secret-store.ts';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await fsp.rm(d, { recursive: true, force: true });
});
async function tmp(): Promise<string> {
  const d = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-secrets-'));
  dirs.push(d);
  return d;
}

/** Every byte under dir, as one latin1 string (to look for plain text). */
async function allBytes(dir: string): Promise<string> {
  let out = '';
  for (const e of await fsp.readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out += (await fsp.readFile(nodePath.join(e.parentPath, e.name))).toString('latin1');
  }
  return out;
}

const posix = process.platform !== 'win32';

describe('key-file secret store', () => {
  it('round-trips, writes only ciphertext (0600), and keeps the key elsewhere', async () => {
    const root = await tmp();
    const keyFile = nodePath.join(root, 'config', 'secret.key');
    const dir = nodePath.join(root, 'state', 'secrets');
    const store = keyFileSecretStore({ dir, keyFile });
    await store.set('device-token', 'tok_plain_text_marker');
    await store.set('cloud-dropbox', JSON.stringify({ accessToken: 'dbx_marker' }));
    expect(await store.get('device-token')).toBe('tok_plain_text_marker');
    expect(await allBytes(dir)).not.toMatch(/plain_text_marker|dbx_marker/);
    if (posix) {
      expect((await fsp.stat(keyFile)).mode & 0o777).toBe(0o600);
      expect((await fsp.stat(nodePath.join(dir, 'device-token.secret'))).mode & 0o777).toBe(0o600);
    }
    expect(store.protection).toContain(keyFile);
    // A second store on the same key (the next run) reads what the first wrote.
    expect(await keyFileSecretStore({ dir, keyFile }).get('cloud-dropbox')).toContain('dbx_marker');
    await store.delete('device-token');
    expect(await store.get('device-token')).toBeUndefined();
    expect(await store.get('never-set')).toBeUndefined();
  });

  it('binds a ciphertext to its name and to its key', async () => {
    const root = await tmp();
    const dir = nodePath.join(root, 'secrets');
    const store = keyFileSecretStore({ dir, keyFile: nodePath.join(root, 'a.key') });
    await store.set('device-token', 'x');
    await fsp.copyFile(nodePath.join(dir, 'device-token.secret'), nodePath.join(dir, 'cloud-gdrive.secret'));
    await expect(store.get('cloud-gdrive')).rejects.toBeInstanceOf(SecretStoreError);
    const otherKey = keyFileSecretStore({ dir, keyFile: nodePath.join(root, 'b.key') });
    await expect(otherKey.get('device-token')).rejects.toThrow(/another key/);
    await fsp.writeFile(nodePath.join(dir, 'cloud-onedrive.secret'), 'plain');
    await expect(store.get('cloud-onedrive')).rejects.toThrow(/unknown secret format/);
  });

  it('refuses bad names and a key file readable by others', async () => {
    const root = await tmp();
    const keyFile = nodePath.join(root, 'k.key');
    const store = keyFileSecretStore({ dir: root, keyFile });
    for (const bad of ['../x', 'a/b', '', '.hidden', 'A'.repeat(2)])
      await expect(store.set(bad, 'v')).rejects.toBeInstanceOf(SecretStoreError);
    if (!posix) return;
    await store.set('ok', 'v');
    await fsp.chmod(keyFile, 0o644);
    await expect(keyFileSecretStore({ dir: root, keyFile }).get('ok')).rejects.toThrow(/chmod 600/);
  });

  it('keeps OAuth token sets as one secret each', async () => {
    const secrets = memorySecretStore();
    const tokens = secretTokenStore(secrets, 'cloud-dropbox');
    expect(await tokens.load()).toBeUndefined();
    await tokens.save({ accessToken: 'a', refreshToken: 'r', expiresAtMs: 5 });
    expect(await tokens.load()).toEqual({ accessToken: 'a', refreshToken: 'r', expiresAtMs: 5 });
    expect(JSON.parse((await secrets.get('cloud-dropbox')) ?? '')).toMatchObject({ accessToken: 'a' });
  });
});

describe('device credentials', () => {
  it('device.json holds no token; the token is in the secret store', async () => {
    const stateDir = await tmp();
    const secrets = keyFileSecretStore({
      dir: nodePath.join(stateDir, 'secrets'),
      keyFile: nodePath.join(stateDir, '..', `${nodePath.basename(stateDir)}.key`),
    });
    dirs.push(nodePath.join(stateDir, '..', `${nodePath.basename(stateDir)}.key`));
    await saveDevice(stateDir, secrets, {
      server: 'http://127.0.0.1:1',
      user: 'ann',
      deviceName: 'laptop',
      token: 'dev_token_marker',
    });
    expect(await allBytes(stateDir)).not.toContain('dev_token_marker');
    expect(JSON.parse(await fsp.readFile(nodePath.join(stateDir, 'device.json'), 'utf8'))).toEqual({
      server: 'http://127.0.0.1:1',
      user: 'ann',
      deviceName: 'laptop',
    });
    expect(await loadDevice(stateDir, secrets)).toEqual({
      server: 'http://127.0.0.1:1',
      user: 'ann',
      deviceName: 'laptop',
      token: 'dev_token_marker',
    });
    // Without the token (another secret store) the device is not enrolled.
    expect(await loadDevice(stateDir, memorySecretStore())).toBeUndefined();
  });

  it('moves a legacy inline token out of device.json', async () => {
    const stateDir = await tmp();
    const secrets = memorySecretStore();
    await fsp.writeFile(
      nodePath.join(stateDir, 'device.json'),
      JSON.stringify({ server: 'http://s', user: 'u', deviceName: 'd', token: 'legacy_marker' }),
    );
    expect((await loadDevice(stateDir, secrets))?.token).toBe('legacy_marker');
    expect(await fsp.readFile(nodePath.join(stateDir, 'device.json'), 'utf8')).not.toContain('legacy_marker');
    expect(await secrets.get('device-token')).toBe('legacy_marker');
  });
});
