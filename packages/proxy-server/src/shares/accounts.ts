/**
 * Connected cloud accounts of the share service: OAuth tokens stored encrypted at rest in
 * the share book (book.ts; the mirror's CredentialVault format), and a provider for an account (its tokens refreshed
 * through OAuth when the server has the cloud's client configured). An account is only
 * ever its owner's: another user's is reported like a missing one.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import * as nodePath from 'node:path';
import { type ChangeWaiter, keysFromEnv, type VaultKeys } from '@weft/mirror';
import {
  type AccessTokenSource,
  DropboxProvider,
  GDriveProvider,
  OAuthSession,
  OneDriveProvider,
  type Provider,
  type TokenSet,
  dropboxOAuth,
  googleOAuth,
  microsoftOAuth,
  staticToken,
} from '@weft/providers';
import {
  type ConnectAccountRequest,
  type ProviderAccount,
  type ProviderKind,
  ProviderTokens,
} from '@weft/wire';
import type { SharesConfig } from '../config.ts';
import { ApiError } from '../errors.ts';
import type { AccountRow, ShareBook } from './book.ts';

export type { AccountRow };

export class ProviderAccounts {
  constructor(
    private readonly book: ShareBook,
    private readonly config: SharesConfig,
  ) {}

  /** `user`'s account `id`; NOT_FOUND for a missing one and another user's alike. */
  async own(user: string, id: string): Promise<AccountRow> {
    const row = await this.book.account(id);
    // Another user's account is reported exactly like a missing one.
    if (!row || row.owner !== user) throw new ApiError('NOT_FOUND', `no account ${id}`);
    return row;
  }

  private toAccount(r: AccountRow): ProviderAccount {
    return {
      id: r.account_id,
      provider: r.provider as ProviderKind,
      label: r.label,
      connectedMs: r.connected_ms,
    };
  }

  async list(user: string): Promise<ProviderAccount[]> {
    return (await this.book.accounts(user)).map((r) => this.toAccount(r));
  }

  /** Store an account's OAuth tokens (encrypted at rest). */
  async connect(user: string, req: ConnectAccountRequest): Promise<ProviderAccount> {
    const id = 'acc_' + randomBytes(8).toString('hex');
    const now = Date.now();
    await this.book.putAccount(id, user, req.provider, JSON.stringify(req.tokens), {
      label: req.label,
      connectedMs: now,
    });
    return { id, provider: req.provider, label: req.label, connectedMs: now };
  }

  /** Forget an account's tokens; refused while a share keeps its replica there. */
  async disconnect(user: string, id: string): Promise<void> {
    await this.own(user, id);
    const used = await this.book.removeAccount(id);
    if (used !== undefined)
      throw new ApiError('BAD_REQUEST', `the account keeps the replica of share ${used}: leave it first`);
  }

  /** The provider of an account (decrypted tokens; refreshed through OAuth when configured). */
  async provider(id: string): Promise<{ provider: Provider; kind: ProviderKind; waiter?: ChangeWaiter }> {
    const cred = await this.book.secret(id);
    const kind = cred.provider as ProviderKind;
    const tokens = ProviderTokens.parse(JSON.parse(cred.secret));
    const token = this.tokenSource(id, kind, tokens);
    const ep = this.config.endpoints;
    switch (kind) {
      case 'dropbox': {
        const p = new DropboxProvider({ token, ...(ep.dropbox ? { baseUrl: ep.dropbox } : {}) });
        const timeout = this.config.longpollTimeoutSeconds;
        return { provider: p, kind, waiter: (cursor, signal) => p.waitForChanges(cursor, timeout, signal) };
      }
      case 'gdrive':
        return {
          provider: new GDriveProvider({ token, ...(ep.gdrive ? { rootUrl: ep.gdrive } : {}) }),
          kind,
        };
      case 'onedrive':
        return {
          provider: new OneDriveProvider({ token, ...(ep.onedrive ? { graphOrigin: ep.onedrive } : {}) }),
          kind,
        };
    }
  }

  /** The stored tokens of an account (for a peer that writes on its behalf). */
  async tokens(id: string): Promise<unknown> {
    return JSON.parse((await this.book.secret(id)).secret) as unknown;
  }

  private tokenSource(id: string, kind: ProviderKind, tokens: TokenSet): AccessTokenSource {
    const client = this.config.oauth[kind];
    if (!client || !tokens.refreshToken) return staticToken(tokens.accessToken);
    const usual =
      kind === 'dropbox'
        ? dropboxOAuth(client.clientId)
        : kind === 'gdrive'
          ? googleOAuth(client.clientId, client.clientSecret)
          : microsoftOAuth(client.clientId);
    const config = client.tokenUrl ? { ...usual, tokenUrl: client.tokenUrl } : usual;
    const book = this.book;
    return new OAuthSession(config, {
      load: async () => ProviderTokens.parse(JSON.parse((await book.secret(id)).secret)),
      save: async (t) => {
        const cur = await book.secret(id);
        await book.putAccount(id, cur.owner, cur.provider, JSON.stringify(t));
      },
    });
  }
}

/** The vault's keys: the configured key, else a key file (created, mode 0600, when missing). */
export function keysFrom(config: SharesConfig, dataDir: string): VaultKeys {
  let key = config.key;
  if (!key) {
    const file = config.keyFile ?? nodePath.join(dataDir, 'mirror.key');
    if (!existsSync(file))
      writeFileSync(file, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
    key = readFileSync(file, 'utf8').trim();
  }
  const old = Object.entries(config.oldKeys)
    .map(([id, k]) => `${id}=${k}`)
    .join(',');
  return keysFromEnv({ WEFT_MIRROR_KEY: key, WEFT_MIRROR_OLD_KEYS: old });
}
