/**
 * Where the agent keeps secrets (the device token for Weft storage, cloud OAuth tokens):
 * never in plain files.
 *
 * - The desktop app passes a store over Electron `safeStorage` (the OS keychain's key).
 * - `weft agent` on its own uses `keyFileSecretStore`: each secret is encrypted with
 *   AES-256-GCM (associated data = the secret's name) under a random 256-bit key kept in a
 *   separate per-install key file (0600, outside the state folder by default). This keeps
 *   tokens out of the state folder's plain text (backups, copies, support bundles without
 *   the key), but a program running as the same user can read the key file too: it is not
 *   the protection an OS keychain gives. docs/desktop.md says so.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import type { TokenSet, TokenStore } from '@weft/providers';

export interface SecretStore {
  get(name: string): Promise<string | undefined>;
  set(name: string, value: string): Promise<void>;
  delete(name: string): Promise<void>;
  /** What protects the secrets at rest, in words. */
  readonly protection: string;
}

export class SecretStoreError extends Error {
  override readonly name = 'SecretStoreError';
}

const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

function checkName(name: string): void {
  if (!NAME.test(name)) throw new SecretStoreError(`bad secret name ${JSON.stringify(name)}`);
}

export function memorySecretStore(): SecretStore {
  const items = new Map<string, string>();
  return {
    protection: 'memory only (lost when the app stops)',
    async get(name) {
      return items.get(name);
    },
    async set(name, value) {
      checkName(name);
      items.set(name, value);
    },
    async delete(name) {
      items.delete(name);
    },
  };
}

/** The key file's default place: the user's config folder, not the sync state folder. */
export function defaultKeyFile(): string {
  if (process.env.WEFT_SECRET_KEY_FILE) return process.env.WEFT_SECRET_KEY_FILE;
  const base =
    process.platform === 'win32'
      ? (process.env.APPDATA ?? nodePath.join(os.homedir(), 'AppData', 'Roaming'))
      : (process.env.XDG_CONFIG_HOME ?? nodePath.join(os.homedir(), '.config'));
  return nodePath.join(base, 'weft', 'secret.key');
}

async function loadOrCreateKey(keyFile: string): Promise<Buffer> {
  await fsp.mkdir(nodePath.dirname(keyFile), { recursive: true, mode: 0o700 });
  // Written aside and linked into place: a concurrent first run sees the whole key or none.
  const exists = await fsp.stat(keyFile).then(
    () => true,
    () => false,
  );
  if (!exists) {
    const tmp = `${keyFile}.${randomBytes(6).toString('hex')}.tmp`;
    await fsp.writeFile(tmp, randomBytes(32), { mode: 0o600, flag: 'wx' });
    try {
      await fsp.link(tmp, keyFile);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    } finally {
      await fsp.rm(tmp, { force: true });
    }
  }
  const st = await fsp.stat(keyFile);
  if (process.platform !== 'win32' && (st.mode & 0o077) !== 0)
    throw new SecretStoreError(`${keyFile} is readable by other users; run chmod 600 on it`);
  const key = await fsp.readFile(keyFile);
  if (key.length !== 32) throw new SecretStoreError(`${keyFile} is not a Weft key (32 bytes)`);
  return key;
}

const VERSION = 1;

/**
 * Secrets in `<dir>/<name>.secret`: byte 0 the format version (1), then the 12-byte IV,
 * the 16-byte GCM tag and the ciphertext. Files are written atomically with mode 0600.
 */
export function keyFileSecretStore(options: { dir: string; keyFile?: string }): SecretStore {
  const keyFile = options.keyFile ?? defaultKeyFile();
  let key: Promise<Buffer> | undefined;
  const getKey = (): Promise<Buffer> => (key ??= loadOrCreateKey(keyFile));
  const file = (name: string): string => {
    checkName(name);
    return nodePath.join(options.dir, `${name}.secret`);
  };
  return {
    protection: `encrypted (AES-256-GCM) with the key in ${keyFile}`,
    async get(name) {
      let blob: Buffer;
      try {
        blob = await fsp.readFile(file(name));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw e;
      }
      if (blob.length < 29 || blob[0] !== VERSION)
        throw new SecretStoreError(`${name}: unknown secret format`);
      const decipher = createDecipheriv('aes-256-gcm', await getKey(), blob.subarray(1, 13));
      decipher.setAAD(Buffer.from(name, 'utf8'));
      decipher.setAuthTag(blob.subarray(13, 29));
      try {
        return Buffer.concat([decipher.update(blob.subarray(29)), decipher.final()]).toString('utf8');
      } catch {
        throw new SecretStoreError(`${name}: cannot be decrypted with ${keyFile} (another key?)`);
      }
    },
    async set(name, value) {
      const target = file(name);
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', await getKey(), iv);
      cipher.setAAD(Buffer.from(name, 'utf8'));
      const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
      await fsp.mkdir(options.dir, { recursive: true, mode: 0o700 });
      const tmp = `${target}.${randomBytes(4).toString('hex')}.tmp`;
      await fsp.writeFile(tmp, Buffer.concat([Buffer.from([VERSION]), iv, cipher.getAuthTag(), body]), {
        mode: 0o600,
      });
      await fsp.rename(tmp, target);
    },
    async delete(name) {
      await fsp.rm(file(name), { force: true });
    },
  };
}

/** A cloud's OAuth tokens kept as one secret (`cloud-<provider>`). */
export function secretTokenStore(secrets: SecretStore, name: string): TokenStore {
  return {
    async load() {
      const raw = await secrets.get(name);
      return raw === undefined ? undefined : (JSON.parse(raw) as TokenSet);
    },
    async save(tokens) {
      await secrets.set(name, JSON.stringify(tokens));
    },
  };
}
