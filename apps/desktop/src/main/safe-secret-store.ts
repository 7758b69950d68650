/**
 * The desktop app's secret store (device token, cloud tokens) over Electron safeStorage:
 * files hold only what safeStorage.encryptString returned (the key is the OS keychain's).
 * When the OS offers no encryption (e.g. Linux without a keyring), the agent's own store is
 * used instead (AES-256-GCM with a per-install key file); never a plain file.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { SecretStore } from '@weft/core';

export interface SafeStorageLike {
  isEncryptionAvailable(): boolean;
  encryptString(plain: string): Buffer;
  decryptString(encrypted: Buffer): string;
}

const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export function safeSecretStore(safe: SafeStorageLike, dir: string, fallback: SecretStore): SecretStore {
  const file = (name: string): string => {
    if (!NAME.test(name)) throw new Error(`bad secret name ${JSON.stringify(name)}`);
    return nodePath.join(dir, `${name}.safe`);
  };
  const available = (): boolean => safe.isEncryptionAvailable();
  return {
    get protection() {
      return available() ? 'encrypted with the OS keychain (Electron safeStorage)' : fallback.protection;
    },
    async get(name) {
      if (!available()) return fallback.get(name);
      let blob: Buffer;
      try {
        blob = await fsp.readFile(file(name));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw e;
      }
      return safe.decryptString(blob);
    },
    async set(name, value) {
      if (!available()) return fallback.set(name, value);
      const target = file(name);
      await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
      const tmp = `${target}.tmp`;
      await fsp.writeFile(tmp, safe.encryptString(value), { mode: 0o600 });
      await fsp.rename(tmp, target);
    },
    async delete(name) {
      await fsp.rm(file(name), { force: true });
      await fallback.delete(name);
    },
  };
}
