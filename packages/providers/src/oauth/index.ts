export { type AccessTokenSource, staticToken, toTokenSource } from './token-source.ts';
export {
  OAuthSession,
  authorizeWithLoopback,
  createPkcePair,
  dropboxOAuth,
  googleOAuth,
  memoryTokenStore,
  microsoftOAuth,
  type LoopbackOptions,
  type OAuthClientConfig,
  type OAuthSessionOptions,
  type PkcePair,
  type TokenSet,
  type TokenStore,
} from './pkce.ts';
