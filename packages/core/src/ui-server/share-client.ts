/**
 * The proxy's share API as the UI service uses it (cross-cloud shared folders): connected
 * provider accounts, shares, invitations, accepting, leaving. `ShareBackend` is the
 * interface the service is written against; `httpShareBackend` talks to a Weft proxy with
 * this device's token and checks every answer with the schemas of @weft/wire/shares.
 */
import {
  AccountsResponse,
  type AcceptShareRequest,
  type ConnectAccountRequest,
  type CreateShareRequest,
  ProviderAccount,
  ShareInfo,
  ShareInvitePreview,
  ShareInviteResponse,
  SharesResponse,
} from '@weft/wire/shares';
import { API_PREFIX } from '@weft/wire';
import type { z } from 'zod/v4';

export interface ShareBackend {
  listAccounts(): Promise<ProviderAccount[]>;
  connectAccount(request: ConnectAccountRequest): Promise<ProviderAccount>;
  /** Forget an account's tokens on the server (refused while it keeps a share's folder). */
  disconnectAccount(id: string): Promise<void>;
  listShares(): Promise<ShareInfo[]>;
  createShare(request: CreateShareRequest): Promise<ShareInfo>;
  createInvite(shareId: string): Promise<ShareInviteResponse>;
  preview(token: string): Promise<ShareInvitePreview>;
  accept(request: AcceptShareRequest): Promise<ShareInfo>;
  /** Leave a share (the folder stays as it is; the owner leaves last). */
  leave(shareId: string): Promise<void>;
}

/** A refusal from the proxy, with its status and the server's message. */
export class ShareApiError extends Error {
  override readonly name = 'ShareApiError';
  constructor(
    readonly status: number,
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

/** The share routes (docs/formats/api.md "Shares"), relative to API_PREFIX. */
export const SHARE_ROUTES = {
  accounts: '/accounts',
  account: (id: string) => `/accounts/${encodeURIComponent(id)}`,
  shares: '/shares',
  invites: (id: string) => `/shares/${encodeURIComponent(id)}/invites`,
  preview: '/shares/invites/preview',
  accept: '/shares/accept',
  leave: (id: string) => `/shares/${encodeURIComponent(id)}/leave`,
} as const;

export function httpShareBackend(options: {
  /** The server, or where it is now (several proxy instances: the agent's current one). */
  server: string | (() => string);
  token: string;
  fetch?: typeof fetch;
}): ShareBackend {
  const doFetch = options.fetch ?? fetch;
  const server = options.server;
  const base = (): string =>
    (typeof server === 'string' ? server : server()).replace(/\/+$/, '') + API_PREFIX;
  async function call<T>(
    method: string,
    route: string,
    body: unknown,
    schema: z.ZodType<T> | undefined,
  ): Promise<T> {
    let res: Response;
    try {
      res = await doFetch(base() + route, {
        method,
        headers: {
          authorization: `Bearer ${options.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(30_000),
      });
    } catch (e) {
      throw new ShareApiError(
        0,
        `cannot reach the Weft server (${e instanceof Error ? e.message : String(e)})`,
      );
    }
    const text = await res.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (!res.ok) {
      const err = (json as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
      const message = typeof err?.message === 'string' ? err.message : `${res.status} ${res.statusText}`;
      throw new ShareApiError(res.status, message, typeof err?.code === 'string' ? err.code : undefined);
    }
    if (!schema) return undefined as T;
    const parsed = schema.safeParse(json);
    if (!parsed.success) throw new ShareApiError(res.status, `unexpected answer from the server to ${route}`);
    return parsed.data;
  }
  return {
    listAccounts: async () =>
      (await call('GET', SHARE_ROUTES.accounts, undefined, AccountsResponse)).accounts,
    connectAccount: (request) => call('POST', SHARE_ROUTES.accounts, request, ProviderAccount),
    disconnectAccount: (id) => call('DELETE', SHARE_ROUTES.account(id), undefined, undefined),
    listShares: async () => (await call('GET', SHARE_ROUTES.shares, undefined, SharesResponse)).shares,
    createShare: (request) => call('POST', SHARE_ROUTES.shares, request, ShareInfo),
    createInvite: (id) => call('POST', SHARE_ROUTES.invites(id), {}, ShareInviteResponse),
    preview: (token) => call('POST', SHARE_ROUTES.preview, { token }, ShareInvitePreview),
    accept: (request) => call('POST', SHARE_ROUTES.accept, request, ShareInfo),
    leave: (id) => call('POST', SHARE_ROUTES.leave(id), {}, undefined),
  };
}
