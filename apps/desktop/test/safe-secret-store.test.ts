import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { memorySecretStore } from '@weft/core';
import { describe, expect, it } from 'vitest';
import { type SafeStorageLike, safeSecretStore } from '../src/main/safe-secret-store.ts';

/** A stand-in for the OS keychain's cipher: reversible, and never the plain text. */
function fakeSafe(available: boolean): SafeStorageLike {
  return {
    isEncryptionAvailable: () => available,
    encryptString: (p) => Buffer.from(Buffer.from(p, 'utf8').map((b) => b ^ 0x5a)),
    decryptString: (e) => Buffer.from(e.map((b) => b ^ 0x5a)).toString('utf8'),
  };
}

describe('safeStorage secret store', () => {
  it('writes only safeStorage ciphertext, 0600, and reads it back', async () => {
    const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-safe-'));
    const store = safeSecretStore(fakeSafe(true), dir, memorySecretStore());
    await store.set('device-token', 'tok-very-secret');
    const files = await fsp.readdir(dir);
    expect(files).toEqual(['device-token.safe']);
    const raw = await fsp.readFile(nodePath.join(dir, files[0] ?? ''));
    expect(raw.toString('latin1')).not.toContain('tok-very-secret');
    if (process.platform !== 'win32')
      expect((await fsp.stat(nodePath.join(dir, files[0] ?? ''))).mode & 0o777).toBe(0o600);
    expect(await store.get('device-token')).toBe('tok-very-secret');
    expect(store.protection).toMatch(/keychain/);
    await store.delete('device-token');
    expect(await store.get('device-token')).toBeUndefined();
    await expect(store.set('../evil', 'x')).rejects.toThrow(/bad secret name/);
  });

  it('without OS encryption, uses the fallback store and writes nothing itself', async () => {
    const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-safe-'));
    const fallback = memorySecretStore();
    const store = safeSecretStore(fakeSafe(false), dir, fallback);
    await store.set('cloud-dropbox', '{"accessToken":"a"}');
    expect(await fsp.readdir(dir)).toEqual([]);
    expect(await fallback.get('cloud-dropbox')).toBe('{"accessToken":"a"}');
    expect(await store.get('cloud-dropbox')).toBe('{"accessToken":"a"}');
    expect(store.protection).toBe(fallback.protection);
  });
});
