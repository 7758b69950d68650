/**
 * Cloud tokens at rest, encrypted with Electron safeStorage (the OS keychain's key). A file
 * holds only ciphertext; without OS encryption the tokens stay in memory.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { TokenSet, TokenStore } from '@weft/providers';

export interface SafeStorageLike {
  isEncryptionAvailable(): boolean;
  encryptString(plain: string): Buffer;
  decryptString(encrypted: Buffer): string;
}

export function safeTokenStore(safe: SafeStorageLike, dir: string, name: string): TokenStore {
  const file = nodePath.join(dir, `${name}.token`);
  let memory: TokenSet | undefined;
  return {
    async load() {
      if (!safe.isEncryptionAvailable()) return memory;
      try {
        return JSON.parse(safe.decryptString(await fsp.readFile(file))) as TokenSet;
      } catch {
        return undefined;
      }
    },
    async save(tokens) {
      if (!safe.isEncryptionAvailable()) {
        memory = tokens;
        return;
      }
      await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
      await fsp.writeFile(file, safe.encryptString(JSON.stringify(tokens)), { mode: 0o600 });
    },
  };
}
