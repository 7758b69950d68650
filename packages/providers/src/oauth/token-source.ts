/**
 * Where adapters get their bearer tokens: a fixed token, or an OAuth session that
 * refreshes itself (see ./pkce.ts). `invalidate` is called after a 401 so the next
 * `getAccessToken` refreshes instead of reusing a token the server refused.
 */
export interface AccessTokenSource {
  getAccessToken(signal?: AbortSignal): Promise<string>;
  invalidate?(): void;
}

/** A token given in configuration (tests, or a token the caller manages). */
export function staticToken(token: string): AccessTokenSource {
  return { getAccessToken: async () => token };
}

export function toTokenSource(token: string | AccessTokenSource): AccessTokenSource {
  return typeof token === 'string' ? staticToken(token) : token;
}
