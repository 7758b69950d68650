/**
 * OAuth 2.0 for a desktop app (RFC 8252): the authorization-code flow with PKCE (RFC 7636,
 * S256) and a loopback redirect on 127.0.0.1 with a free port, then refresh tokens.
 * Tokens go to a TokenStore the caller provides (the desktop app encrypts them at rest);
 * nothing here writes them anywhere else.
 */
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { AuthError, TransientError, abortError } from '../errors.ts';
import type { AccessTokenSource } from './token-source.ts';

export interface OAuthClientConfig {
  readonly authorizeUrl: string;
  readonly tokenUrl: string;
  readonly clientId: string;
  /** Only for providers that insist on one for installed apps (Google); not a secret there. */
  readonly clientSecret?: string;
  readonly scopes: readonly string[];
  /** Extra authorization parameters (offline access and the like). */
  readonly extraAuthParams?: Readonly<Record<string, string>>;
  /**
   * The loopback redirect's port. Absent or 0: a free port each time (RFC 8252 §7.3; Google
   * and Microsoft accept any port). Dropbox matches registered redirect URIs exactly, port
   * included, so its client names one (docs/clouds.md).
   */
  readonly redirectPort?: number;
}

/** Dropbox: https://developers.dropbox.com/oauth-guide (token_access_type=offline for a refresh token). */
export function dropboxOAuth(
  clientId: string,
  origins: { www?: string; api?: string } = {},
): OAuthClientConfig {
  return {
    authorizeUrl: `${origins.www ?? 'https://www.dropbox.com'}/oauth2/authorize`,
    tokenUrl: `${origins.api ?? 'https://api.dropboxapi.com'}/oauth2/token`,
    clientId,
    scopes: ['files.metadata.read', 'files.content.read', 'files.content.write'],
    extraAuthParams: { token_access_type: 'offline' },
  };
}

/** Google: https://developers.google.com/identity/protocols/oauth2/native-app */
export function googleOAuth(
  clientId: string,
  clientSecret?: string,
  origins: { accounts?: string; token?: string } = {},
): OAuthClientConfig {
  return {
    authorizeUrl: `${origins.accounts ?? 'https://accounts.google.com'}/o/oauth2/v2/auth`,
    tokenUrl: origins.token ?? 'https://oauth2.googleapis.com/token',
    clientId,
    ...(clientSecret ? { clientSecret } : {}),
    scopes: ['https://www.googleapis.com/auth/drive'],
    extraAuthParams: { access_type: 'offline', prompt: 'consent' },
  };
}

/** Microsoft identity platform: https://learn.microsoft.com/entra/identity-platform/v2-oauth2-auth-code-flow */
export function microsoftOAuth(
  clientId: string,
  origin = 'https://login.microsoftonline.com',
  tenant = 'common',
): OAuthClientConfig {
  return {
    authorizeUrl: `${origin}/${tenant}/oauth2/v2.0/authorize`,
    tokenUrl: `${origin}/${tenant}/oauth2/v2.0/token`,
    clientId,
    scopes: ['Files.ReadWrite', 'offline_access'],
  };
}

export interface TokenSet {
  readonly accessToken: string;
  readonly refreshToken?: string;
  /** When the access token stops working, ms since the epoch. */
  readonly expiresAtMs?: number;
  readonly scope?: string;
}

/** Where tokens live between runs. The desktop app's implementation encrypts them at rest. */
export interface TokenStore {
  load(): Promise<TokenSet | undefined>;
  save(tokens: TokenSet): Promise<void>;
}

/** Tokens held in memory only (tests, short-lived tools). */
export function memoryTokenStore(initial?: TokenSet): TokenStore & { current(): TokenSet | undefined } {
  let tokens = initial;
  return {
    load: async () => tokens,
    save: async (t) => {
      tokens = t;
    },
    current: () => tokens,
  };
}

const TokenResponse = z
  .object({
    access_token: z.string().min(1),
    token_type: z.string().optional(),
    expires_in: z.coerce.number().optional(),
    refresh_token: z.string().optional(),
    scope: z.string().optional(),
  })
  .passthrough();

export interface PkcePair {
  readonly verifier: string;
  readonly challenge: string;
}

/** A code verifier (43 chars from 32 random bytes) and its S256 challenge. */
export function createPkcePair(): PkcePair {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

async function tokenRequest(
  config: OAuthClientConfig,
  form: Record<string, string>,
  fetchImpl: typeof fetch,
  now: () => number,
  signal?: AbortSignal,
): Promise<TokenSet & { refreshToken?: string }> {
  const body = new URLSearchParams({ ...form, client_id: config.clientId });
  if (config.clientSecret) body.set('client_secret', config.clientSecret);
  let res: Response;
  try {
    res = await fetchImpl(config.tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body,
      signal,
    });
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new TransientError(`token endpoint unreachable: ${String(e)}`, undefined, { cause: e });
  }
  const text = await res.text();
  if (!res.ok) {
    const err = /"error"\s*:\s*"([^"]+)"/.exec(text)?.[1] ?? `HTTP ${res.status}`;
    if (res.status >= 500 || res.status === 429) throw new TransientError(`token endpoint: ${err}`);
    throw new AuthError(`token endpoint refused the grant: ${err}`);
  }
  let parsed: z.infer<typeof TokenResponse>;
  try {
    parsed = TokenResponse.parse(JSON.parse(text));
  } catch (cause) {
    throw new AuthError('token endpoint answered without an access token', { cause });
  }
  return {
    accessToken: parsed.access_token,
    ...(parsed.refresh_token ? { refreshToken: parsed.refresh_token } : {}),
    ...(parsed.expires_in !== undefined ? { expiresAtMs: now() + parsed.expires_in * 1000 } : {}),
    ...(parsed.scope !== undefined ? { scope: parsed.scope } : {}),
  };
}

export interface LoopbackOptions {
  /** Open the system browser at this URL (the desktop shell's shell.openExternal). */
  readonly openBrowser: (url: string) => Promise<void> | void;
  readonly signal?: AbortSignal;
  /** Give up waiting for the browser after this long. Default 5 minutes. */
  readonly timeoutMs?: number;
  readonly fetch?: typeof fetch;
  readonly now?: () => number;
  /** Path of the redirect URI. Default '/callback'. */
  readonly callbackPath?: string;
}

const DONE_PAGE =
  '<!doctype html><meta charset="utf-8"><title>Weft</title><p>Signed in. You can close this window and return to Weft.</p>';

/**
 * Run the authorization-code flow with PKCE through a loopback redirect
 * (http://127.0.0.1:<free port>/callback) and return the tokens, also saved to `store`.
 */
export async function authorizeWithLoopback(
  config: OAuthClientConfig,
  store: TokenStore,
  options: LoopbackOptions,
): Promise<TokenSet> {
  const { verifier, challenge } = createPkcePair();
  const state = randomBytes(16).toString('base64url');
  const path = options.callbackPath ?? '/callback';
  let settle!: { resolve: (code: string) => void; reject: (e: Error) => void };
  const codePromise = new Promise<string>((resolve, reject) => (settle = { resolve, reject }));
  // It may settle while the browser is still being opened; it is awaited below.
  codePromise.catch(() => undefined);
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname !== path) {
      res.writeHead(404).end();
      return;
    }
    const q = url.searchParams;
    if (q.get('state') !== state) {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('state mismatch');
      settle.reject(new AuthError('authorization answer with a wrong state (possible CSRF)'));
      return;
    }
    const error = q.get('error');
    const code = q.get('code');
    if (error || !code) {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('authorization failed');
      settle.reject(
        new AuthError(
          `authorization refused: ${error ?? 'no code'} ${q.get('error_description') ?? ''}`.trim(),
        ),
      );
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(DONE_PAGE);
    settle.resolve(code);
  });
  const port = config.redirectPort ?? 0;
  try {
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
  } catch (e) {
    throw new AuthError(
      `cannot receive the sign-in redirect on 127.0.0.1:${port}: ${(e as NodeJS.ErrnoException).code === 'EADDRINUSE' ? 'the port is in use (another sign-in, or another program)' : String(e)}`,
      { cause: e },
    );
  }
  const redirectUri = `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`;
  const timer = setTimeout(
    () => settle.reject(new AuthError('timed out waiting for the browser')),
    options.timeoutMs ?? 300_000,
  );
  const onAbort = (): void => settle.reject(abortError(options.signal as AbortSignal));
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const auth = new URL(config.authorizeUrl);
    auth.searchParams.set('response_type', 'code');
    auth.searchParams.set('client_id', config.clientId);
    auth.searchParams.set('redirect_uri', redirectUri);
    auth.searchParams.set('code_challenge', challenge);
    auth.searchParams.set('code_challenge_method', 'S256');
    auth.searchParams.set('state', state);
    if (config.scopes.length > 0) auth.searchParams.set('scope', config.scopes.join(' '));
    for (const [k, v] of Object.entries(config.extraAuthParams ?? {})) auth.searchParams.set(k, v);
    await options.openBrowser(auth.toString());
    const code = await codePromise;
    const tokens = await tokenRequest(
      config,
      { grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: verifier },
      options.fetch ?? fetch,
      options.now ?? Date.now,
      options.signal,
    );
    await store.save(tokens);
    return tokens;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
    server.closeAllConnections();
    server.close();
  }
}

export interface OAuthSessionOptions {
  readonly fetch?: typeof fetch;
  readonly now?: () => number;
  /** Refresh this long before expiry. Default 60 s. */
  readonly refreshSkewMs?: number;
}

/**
 * An AccessTokenSource over a TokenStore: hands out the stored access token, refreshing
 * it (once, for all concurrent callers) when it is about to expire or after a 401.
 * A rotated refresh token (Microsoft) replaces the old one; otherwise the old one is kept.
 */
export class OAuthSession implements AccessTokenSource {
  private refreshing: Promise<TokenSet> | undefined;
  private stale = false;
  private readonly now: () => number;

  constructor(
    private readonly config: OAuthClientConfig,
    private readonly store: TokenStore,
    private readonly options: OAuthSessionOptions = {},
  ) {
    this.now = options.now ?? Date.now;
  }

  async getAccessToken(signal?: AbortSignal): Promise<string> {
    const tokens = await this.store.load();
    if (!tokens) throw new AuthError('not signed in: no tokens stored');
    const skew = this.options.refreshSkewMs ?? 60_000;
    const expiring = tokens.expiresAtMs !== undefined && tokens.expiresAtMs - skew <= this.now();
    if (!this.stale && !expiring) return tokens.accessToken;
    return (await this.refresh(tokens, signal)).accessToken;
  }

  invalidate(): void {
    this.stale = true;
  }

  private refresh(tokens: TokenSet, signal?: AbortSignal): Promise<TokenSet> {
    this.refreshing ??= (async () => {
      if (!tokens.refreshToken) throw new AuthError('access token expired and no refresh token is stored');
      const fresh = await tokenRequest(
        this.config,
        { grant_type: 'refresh_token', refresh_token: tokens.refreshToken },
        this.options.fetch ?? fetch,
        this.now,
        signal,
      );
      const next: TokenSet = { ...fresh, refreshToken: fresh.refreshToken ?? tokens.refreshToken };
      await this.store.save(next);
      this.stale = false;
      return next;
    })().finally(() => {
      this.refreshing = undefined;
    });
    return this.refreshing;
  }
}
