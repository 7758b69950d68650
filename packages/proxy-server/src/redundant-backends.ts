/**
 * Cloud accounts as backends of the redundant object tier (issue #17, docs/redundancy.md):
 * a Dropbox, Google Drive or OneDrive account used as a blob store (the tier's blobs go to
 * `.weft-redundant/` below `root`, a hidden folder). Config schema and opener; the
 * directory and S3 backends are in redundant-tier.ts.
 *
 * Credentials: an access token (long-lived, or the emulators'), or a refresh token with
 * the OAuth client that issued it, redeemed at the cloud's token endpoint (or `tokenUrl`).
 * Tokens obtained by a refresh — and a rotated refresh token (Microsoft rotates them) —
 * are kept in the tier's folder (`tokens/<id>.json`, 0600), so a restart uses the newest.
 * Each backend is paced as its cloud asks (WRAP_DEFAULTS) and retries briefly (a 429 or
 * one 5xx is ridden out); a backend still failing is marked down by the tier, which logs
 * what it misses and replays it when the backend answers again.
 */
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { z } from 'zod/v4';
import {
  DropboxProvider,
  dropboxOAuth,
  GDriveProvider,
  googleOAuth,
  memoryTokenStore,
  microsoftOAuth,
  OAuthSession,
  OneDriveProvider,
  type AccessTokenSource,
  type Provider,
  type TokenSet,
  type TokenStore,
  WRAP_DEFAULTS,
  wrapProvider,
} from '@weft/providers';
import { privateDir, writePrivateFile } from '@weft/providers/private-files';

const loopbackOrHttps = (u: string): boolean =>
  /^https:/.test(u) || /^http:\/\/(127\.0\.0\.1|localhost|\[::1\])[:/]/.test(u);
const Url = z.string().url().refine(loopbackOrHttps, 'an https: URL (http: only on 127.0.0.1 or localhost)');

const Account = {
  /** Stable id, recorded in the placement store; never reuse one for another store. */
  id: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/),
  pricePerGbMonth: z.number().min(0).optional(),
  /** Folder in the account the blobs go below (in `.weft-redundant/`). Default: the account's top. */
  root: z.string().default(''),
  /** A long-lived access token (or one managed elsewhere). */
  accessToken: z.string().min(1).optional(),
  /** A refresh token, redeemed with `clientId` (and `clientSecret` for Google) for access tokens. */
  refreshToken: z.string().min(1).optional(),
  clientId: z.string().min(1).optional(),
  clientSecret: z.string().optional(),
  /** Token endpoint, when not the cloud's usual one (another tenant's, an emulator's). */
  tokenUrl: Url.optional(),
  /** Attempts per call before the tier counts the backend down. Default 3. */
  retryAttempts: z.number().int().min(1).max(10).default(3),
};

const CREDENTIALS = {
  message: 'a cloud backend needs accessToken, or refreshToken with clientId',
};

export const CloudBackendConfig = z.discriminatedUnion('type', [
  z
    .object({
      ...Account,
      type: z.literal('dropbox'),
      /** API origin instead of https://{api,content}.dropboxapi.com (the emulator). */
      baseUrl: Url.optional(),
    })
    .refine(hasCredentials, CREDENTIALS),
  z
    .object({
      ...Account,
      type: z.literal('gdrive'),
      /** API root instead of https://www.googleapis.com/ (the emulator). */
      rootUrl: Url.optional(),
    })
    .refine(hasCredentials, CREDENTIALS),
  z
    .object({
      ...Account,
      type: z.literal('onedrive'),
      /** Graph origin instead of https://graph.microsoft.com (the emulator, over https). */
      graphOrigin: Url.optional(),
    })
    .refine(hasCredentials, CREDENTIALS),
]);
export type CloudBackendConfig = z.infer<typeof CloudBackendConfig>;

/** Some way to get an access token. */
function hasCredentials(b: { accessToken?: string; refreshToken?: string; clientId?: string }): boolean {
  return b.accessToken !== undefined || (b.refreshToken !== undefined && b.clientId !== undefined);
}

/**
 * A backend's tokens in `file` (0600, its folder 0700), starting from the configured ones.
 * What was saved counts only while the configured refresh token is the one it grew from
 * (its SHA-256 is kept beside it, not the token): an operator who puts a new refresh token
 * in the config is followed.
 */
export function fileTokenStore(file: string, configured: TokenSet): TokenStore {
  const from = createHash('sha256')
    .update(configured.refreshToken ?? '')
    .digest('hex');
  let tokens: TokenSet | undefined;
  return {
    async load() {
      if (tokens) return tokens;
      try {
        const saved = JSON.parse(await fsp.readFile(file, 'utf8')) as { from?: string; tokens?: TokenSet };
        if (saved.from === from && typeof saved.tokens?.accessToken === 'string') tokens = saved.tokens;
      } catch {
        /* none saved yet (or unreadable): the configured tokens */
      }
      tokens ??= configured;
      return tokens;
    },
    async save(next) {
      tokens = next;
      await privateDir(nodePath.dirname(file));
      await writePrivateFile(file, JSON.stringify({ from, tokens: next }));
    },
  };
}

function tokenSource(b: CloudBackendConfig, stateDir: string | undefined): string | AccessTokenSource {
  if (b.refreshToken === undefined || b.clientId === undefined) return b.accessToken!;
  const usual =
    b.type === 'dropbox'
      ? dropboxOAuth(b.clientId)
      : b.type === 'gdrive'
        ? googleOAuth(b.clientId, b.clientSecret)
        : microsoftOAuth(b.clientId);
  const config = b.tokenUrl ? { ...usual, tokenUrl: b.tokenUrl } : usual;
  // No access token yet (or the configured one): the first call refreshes when it is refused.
  const initial: TokenSet = {
    accessToken: b.accessToken ?? '',
    refreshToken: b.refreshToken,
    ...(b.accessToken === undefined ? { expiresAtMs: 0 } : {}),
  };
  const store =
    stateDir === undefined
      ? memoryTokenStore(initial)
      : fileTokenStore(nodePath.join(stateDir, 'tokens', `${b.id}.json`), initial);
  return new OAuthSession(config, store);
}

/**
 * Open a cloud account as a blob store, paced and briefly retried as its cloud asks; tokens
 * a refresh brings are kept below `stateDir` (the tier's folder) when given.
 */
export function openCloudBackend(b: CloudBackendConfig, stateDir?: string): Provider {
  const token = tokenSource(b, stateDir);
  const raw: Provider =
    b.type === 'dropbox'
      ? new DropboxProvider({ token, root: b.root, ...(b.baseUrl ? { baseUrl: b.baseUrl } : {}) })
      : b.type === 'gdrive'
        ? // The tier deletes only blobs no one refers to: straight away, not to Drive's trash (quota).
          new GDriveProvider({
            token,
            root: b.root,
            useTrash: false,
            ...(b.rootUrl ? { rootUrl: b.rootUrl } : {}),
          })
        : new OneDriveProvider({
            token,
            root: b.root,
            ...(b.graphOrigin ? { graphOrigin: b.graphOrigin } : {}),
          });
  const defaults = WRAP_DEFAULTS[b.type] ?? {};
  return wrapProvider(raw, {
    ...defaults,
    retry: { maxAttempts: b.retryAttempts, baseDelayMs: 200, maxDelayMs: 5_000 },
  });
}
