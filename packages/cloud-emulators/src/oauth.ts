/**
 * OAuth 2.0 for installed apps, as each provider runs it: an authorization endpoint
 * (auto-approved here: it redirects straight back with a code) and a token endpoint
 * taking authorization_code with PKCE (RFC 7636, S256 or plain) and refresh_token
 * grants (RFC 6749 §4.1.3, §6). Errors are RFC 6749 §5.2 bodies
 * `{"error": "invalid_grant", "error_description": …}` with status 400.
 */
import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { type Exchange, HttpError, type Route } from './http.ts';

export interface OAuthPaths {
  readonly authorize: string;
  readonly token: string;
  /** Extra fields in token responses (Dropbox's account_id/uid, Google's scope…). */
  readonly extraTokenFields?: Record<string, string>;
  /** A refresh answers a new refresh token and revokes the one redeemed. */
  readonly rotateRefreshTokens?: boolean;
}

interface PendingCode {
  clientId: string;
  redirectUri: string;
  challenge?: string;
  method: 'S256' | 'plain';
  scope: string;
  expiresAt: number;
}

const TokenRequest = z.discriminatedUnion('grant_type', [
  z.object({
    grant_type: z.literal('authorization_code'),
    code: z.string().min(1),
    client_id: z.string().min(1).optional(),
    redirect_uri: z.string().optional(),
    code_verifier: z.string().min(43).max(128).optional(),
  }),
  z.object({
    grant_type: z.literal('refresh_token'),
    refresh_token: z.string().min(1),
    client_id: z.string().optional(),
    scope: z.string().optional(),
  }),
]);

function oauthError(error: string, description: string, status = 400): HttpError {
  return new HttpError(status, { error, error_description: description });
}

export class OAuthServer {
  private readonly codes = new Map<string, PendingCode>();
  private readonly access = new Map<string, { expiresAt: number; scope: string }>();
  private readonly refresh = new Map<string, { clientId: string; scope: string }>();
  /** Lifetime of issued access tokens, seconds (Dropbox and Graph use ~4 h / 1 h). */
  accessTokenLifetimeSeconds = 3600;
  now: () => number = Date.now;

  constructor(private readonly paths: OAuthPaths) {}

  checkAccessToken(token: string): 'valid' | 'expired' | 'unknown' {
    const t = this.access.get(token);
    if (!t) return 'unknown';
    return t.expiresAt > this.now() ? 'valid' : 'expired';
  }

  /** Expire every access token issued so far (tests of refresh). */
  expireAccessTokens(): void {
    for (const t of this.access.values()) t.expiresAt = 0;
  }

  route(method: string, url: URL): Route | undefined {
    if (url.pathname === this.paths.authorize && method === 'GET') {
      return { endpoint: 'oauth.authorize', noAuth: true, handle: (x) => this.authorize(x) };
    }
    if (url.pathname === this.paths.token && method === 'POST') {
      return { endpoint: 'oauth.token', noAuth: true, handle: (x) => this.token(x) };
    }
    return undefined;
  }

  private async authorize(x: Exchange): Promise<void> {
    const q = x.url.searchParams;
    const clientId = q.get('client_id');
    const redirectUri = q.get('redirect_uri');
    if (!clientId || !redirectUri)
      throw oauthError('invalid_request', 'client_id and redirect_uri are required');
    if (q.get('response_type') !== 'code')
      throw oauthError('unsupported_response_type', 'only code is supported');
    const challenge = q.get('code_challenge') ?? undefined;
    const method = (q.get('code_challenge_method') ?? 'plain') as 'S256' | 'plain';
    if (method !== 'S256' && method !== 'plain')
      throw oauthError('invalid_request', 'bad code_challenge_method');
    const code = randomBytes(24).toString('base64url');
    this.codes.set(code, {
      clientId,
      redirectUri,
      challenge,
      method,
      scope: q.get('scope') ?? '',
      expiresAt: this.now() + 10 * 60_000,
    });
    const target = new URL(redirectUri);
    target.searchParams.set('code', code);
    const state = q.get('state');
    if (state !== null) target.searchParams.set('state', state);
    await x.redirect(target.toString());
  }

  private async token(x: Exchange): Promise<void> {
    const raw = await x.body();
    const form = Object.fromEntries(new URLSearchParams(raw.toString('utf8')));
    // Some clients (the Dropbox SDK's refresh) send the parameters in the query string.
    for (const [k, v] of x.url.searchParams) form[k] ??= v;
    const basic = /^Basic\s+(\S+)$/i.exec(x.header('authorization') ?? '');
    if (basic?.[1]) {
      const [id] = Buffer.from(basic[1], 'base64').toString('utf8').split(':');
      if (id) form.client_id ??= id;
    }
    const parsed = TokenRequest.safeParse(form);
    if (!parsed.success)
      throw oauthError('invalid_request', parsed.error.issues[0]?.message ?? 'bad request');
    const r = parsed.data;
    if (r.grant_type === 'authorization_code') {
      const pending = this.codes.get(r.code);
      this.codes.delete(r.code); // single use
      if (!pending || pending.expiresAt < this.now())
        throw oauthError('invalid_grant', 'code is invalid or expired');
      if (r.client_id !== undefined && r.client_id !== pending.clientId) {
        throw oauthError('invalid_grant', 'code was issued to another client');
      }
      if (r.redirect_uri !== undefined && r.redirect_uri !== pending.redirectUri) {
        throw oauthError('invalid_grant', 'redirect_uri mismatch');
      }
      if (pending.challenge !== undefined) {
        if (!r.code_verifier) throw oauthError('invalid_grant', 'code_verifier is required');
        const expected =
          pending.method === 'S256'
            ? createHash('sha256').update(r.code_verifier).digest('base64url')
            : r.code_verifier;
        if (expected !== pending.challenge) throw oauthError('invalid_grant', 'code_verifier does not match');
      }
      await x.sendJson(200, this.issue(pending.clientId, pending.scope, true));
      return;
    }
    const known = this.refresh.get(r.refresh_token);
    if (!known) throw oauthError('invalid_grant', 'refresh token is invalid or revoked');
    // Refresh tokens stay valid (Dropbox, Google) unless rotated (Microsoft); a new access token each time.
    if (this.paths.rotateRefreshTokens) this.refresh.delete(r.refresh_token);
    await x.sendJson(200, this.issue(known.clientId, known.scope, this.paths.rotateRefreshTokens === true));
  }

  private issue(clientId: string, scope: string, withRefresh: boolean): Record<string, unknown> {
    const accessToken = 'at.' + randomBytes(24).toString('base64url');
    this.access.set(accessToken, {
      expiresAt: this.now() + this.accessTokenLifetimeSeconds * 1000,
      scope,
    });
    const out: Record<string, unknown> = {
      access_token: accessToken,
      token_type: 'bearer',
      expires_in: this.accessTokenLifetimeSeconds,
      scope,
      ...this.paths.extraTokenFields,
    };
    if (withRefresh) {
      const refreshToken = 'rt.' + randomBytes(24).toString('base64url');
      this.refresh.set(refreshToken, { clientId, scope });
      out.refresh_token = refreshToken;
    }
    return out;
  }
}
