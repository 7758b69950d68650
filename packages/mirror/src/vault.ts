/**
 * Provider credentials encrypted at rest: AES-256-GCM with a 256-bit key from the
 * configuration (`WEFT_MIRROR_KEY`, base64 or hex), a fresh 96-bit IV per record and the
 * account id as additional authenticated data, so a record copied onto another account
 * fails to decrypt. Key rotation: records carry the key id; `keys` may hold old keys for
 * reading while `currentKeyId` encrypts.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { MirrorError } from './errors.ts';
import type Database from 'better-sqlite3';

export interface VaultKeys {
  readonly currentKeyId: string;
  /** key id → 32-byte key. */
  readonly keys: Readonly<Record<string, Uint8Array>>;
}

/** A 32-byte key from configuration text (64 hex digits or base64 of 32 bytes). */
export function parseKey(text: string): Uint8Array {
  const t = text.trim();
  const bytes = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  if (bytes.byteLength !== 32) throw new Error('the mirror key must be 32 bytes (64 hex digits or base64)');
  return bytes;
}

/** Keys from the environment: WEFT_MIRROR_KEY (current) and WEFT_MIRROR_OLD_KEYS (id=key,…). */
export function keysFromEnv(env: NodeJS.ProcessEnv = process.env): VaultKeys {
  const current = env.WEFT_MIRROR_KEY;
  if (!current) throw new Error('WEFT_MIRROR_KEY is not set');
  const key = parseKey(current);
  const currentKeyId = createHash('sha256').update(key).digest('hex').slice(0, 8);
  const keys: Record<string, Uint8Array> = { [currentKeyId]: key };
  for (const pair of (env.WEFT_MIRROR_OLD_KEYS ?? '').split(',').filter(Boolean)) {
    const [id, value] = pair.split('=');
    if (id && value) keys[id] = parseKey(value);
  }
  return { currentKeyId, keys };
}

/** Stored credentials cannot be read: missing, tampered with, or under a key not configured. */
export class VaultError extends MirrorError {
  readonly code = 'Vault' as const;
}

/** A secret as stored: encrypted under key `keyId`, bound to its account. */
export interface SealedSecret {
  readonly keyId: string;
  readonly iv: Uint8Array;
  readonly ciphertext: Uint8Array;
  readonly tag: Uint8Array;
}

/** Encrypt an account's secret under the current key (a fresh IV; the account id as AAD). */
export function sealSecret(keys: VaultKeys, accountId: string, secret: string): SealedSecret {
  const key = keys.keys[keys.currentKeyId];
  if (!key) throw new VaultError('no current key');
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(accountId, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return { keyId: keys.currentKeyId, iv, ciphertext, tag: cipher.getAuthTag() };
}

/** Decrypt a sealed secret; VaultError when its key is not configured or it was tampered with. */
export function openSecret(keys: VaultKeys, accountId: string, sealed: SealedSecret): string {
  const key = keys.keys[sealed.keyId];
  if (!key)
    throw new VaultError(`credentials of ${accountId} use key ${sealed.keyId}, which is not configured`);
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, sealed.iv);
    decipher.setAAD(Buffer.from(accountId, 'utf8'));
    decipher.setAuthTag(sealed.tag);
    return Buffer.concat([decipher.update(sealed.ciphertext), decipher.final()]).toString('utf8');
  } catch (e) {
    throw new VaultError(`credentials of ${accountId} failed authentication`, { cause: e });
  }
}

interface Row {
  owner: string;
  provider: string;
  key_id: string;
  iv: Buffer;
  ciphertext: Buffer;
  tag: Buffer;
}

export class CredentialVault {
  constructor(
    private readonly db: Database.Database,
    private readonly keys: VaultKeys,
  ) {
    if (!keys.keys[keys.currentKeyId]) throw new VaultError('the current key id has no key');
  }

  /** Store (or replace) the credentials of a connected provider account. */
  put(accountId: string, owner: string, provider: string, secret: string): void {
    const sealed = sealSecret(this.keys, accountId, secret);
    this.db
      .prepare(
        'INSERT INTO provider_accounts (account_id, owner, provider, key_id, iv, ciphertext, tag) ' +
          'VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (account_id) DO UPDATE SET owner = excluded.owner, ' +
          'provider = excluded.provider, key_id = excluded.key_id, iv = excluded.iv, ' +
          'ciphertext = excluded.ciphertext, tag = excluded.tag',
      )
      .run(accountId, owner, provider, sealed.keyId, sealed.iv, sealed.ciphertext, sealed.tag);
  }

  /** The stored credentials; throws VaultError when missing, tampered with or keyed unknown. */
  get(accountId: string): { owner: string; provider: string; secret: string } {
    const row = this.db
      .prepare(
        'SELECT owner, provider, key_id, iv, ciphertext, tag FROM provider_accounts WHERE account_id = ?',
      )
      .get(accountId) as Row | undefined;
    if (!row) throw new VaultError(`no credentials for account ${accountId}`);
    const secret = openSecret(this.keys, accountId, {
      keyId: row.key_id,
      iv: row.iv,
      ciphertext: row.ciphertext,
      tag: row.tag,
    });
    return { owner: row.owner, provider: row.provider, secret };
  }

  remove(accountId: string): void {
    this.db.prepare('DELETE FROM provider_accounts WHERE account_id = ?').run(accountId);
  }

  /** Re-encrypt every record under the current key (after a rotation). Returns how many. */
  rotate(): number {
    const ids = this.db
      .prepare('SELECT account_id FROM provider_accounts WHERE key_id != ?')
      .all(this.keys.currentKeyId) as {
      account_id: string;
    }[];
    for (const { account_id } of ids) {
      const r = this.get(account_id);
      this.put(account_id, r.owner, r.provider, r.secret);
    }
    return ids.length;
  }
}
