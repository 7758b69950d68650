/**
 * Connected cloud accounts of the share service: OAuth tokens stored encrypted at rest in
 * the mirror's CredentialVault, and a provider for an account (its tokens refreshed
 * through OAuth when the server has the cloud's client configured). An account is only
 * ever its owner's: another user's is reported like a missing one.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import * as nodePath from 'node:path';
import type Database from 'better-sqlite3';
import { type ChangeWaiter, CredentialVault, keysFromEnv } from '@weft/mirror';
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

export interface AccountRow {
  account_id: string;
  owner: string;
  provider: string;
  label: string;
  connected_ms: number;
}

export class ProviderAccounts {
  private readonly vault: CredentialVault;

  constructor(
    private readonly db: Database.Database,
    private readonly config: SharesConfig,
    dataDir: string,
  ) {
    this.vault = new CredentialVault(db, keysFrom(config, dataDir));
  }

  /** `user`'s account `id`; NOT_FOUND for a missing one and another user's alike. */
  own(user: string, id: string): AccountRow {
    const row = this.db
      .prepare(
        'SELECT account_id, owner, provider, label, connected_ms FROM provider_accounts WHERE account_id = ?',
      )
      .get(id) as AccountRow | undefined;
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

  list(user: string): ProviderAccount[] {
    const rows = this.db
      .prepare(
        'SELECT account_id, owner, provider, label, connected_ms FROM provider_accounts WHERE owner = ? ORDER BY connected_ms, account_id',
      )
      .all(user) as AccountRow[];
    return rows.map((r) => this.toAccount(r));
  }

  /** Store an account's OAuth tokens (encrypted at rest). */
  connect(user: string, req: ConnectAccountRequest): ProviderAccount {
    const id = 'acc_' + randomBytes(8).toString('hex');
    const now = Date.now();
    this.db.transaction(() => {
      this.vault.put(id, user, req.provider, JSON.stringify(req.tokens));
      this.db
        .prepare('UPDATE provider_accounts SET label = ?, connected_ms = ? WHERE account_id = ?')
        .run(req.label, now, id);
    })();
    return { id, provider: req.provider, label: req.label, connectedMs: now };
  }

  /** Forget an account's tokens; refused while a share keeps its replica there. */
  disconnect(user: string, id: string): void {
    this.own(user, id);
    const used = this.db
      .prepare('SELECT share_id FROM share_members WHERE account_id = ? LIMIT 1')
      .get(id) as { share_id: string } | undefined;
    if (used)
      throw new ApiError(
        'BAD_REQUEST',
        `the account keeps the replica of share ${used.share_id}: leave it first`,
      );
    this.vault.remove(id);
  }

  /** The provider of an account (decrypted tokens; refreshed through OAuth when configured). */
  provider(id: string): { provider: Provider; kind: ProviderKind; waiter?: ChangeWaiter } {
    const cred = this.vault.get(id);
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
  tokens(id: string): unknown {
    return JSON.parse(this.vault.get(id).secret) as unknown;
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
    const vault = this.vault;
    return new OAuthSession(config, {
      load: async () => ProviderTokens.parse(JSON.parse(vault.get(id).secret)),
      save: async (t) => {
        const cur = vault.get(id);
        vault.put(id, cur.owner, cur.provider, JSON.stringify(t));
      },
    });
  }
}

/** The vault's keys: the configured key, else a key file (created, mode 0600, when missing). */
function keysFrom(config: SharesConfig, dataDir: string) {
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
