/**
 * The share API routes (docs/formats/api.md "Shares"): connected accounts, shares,
 * invitations, members. Device-token authenticated like every /v1 route; everything is
 * confined to the caller (see ShareService).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod/v4';
import {
  AcceptShareRequest,
  AccountParams,
  AccountsResponse,
  ConnectAccountRequest,
  CreateShareInviteRequest,
  CreateShareRequest,
  ProviderAccount,
  ShareInfo,
  ShareInvitePreview,
  ShareInvitePreviewRequest,
  ShareInviteResponse,
  ShareMemberParams,
  ShareParams,
  SharesResponse,
} from '@weft/wire';
import type { AuthContext } from '../auth.ts';
import type { ShareService } from '../shares/service.ts';

export interface ShareRouteDoc {
  method: string;
  url: string;
  summary: string;
  auth: 'device';
  body?: z.ZodType;
  response?: z.ZodType;
}

export interface ShareRouteContext {
  route(doc: ShareRouteDoc, handler: (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>): void;
  auth(req: FastifyRequest): AuthContext;
  parse<T extends z.ZodType>(schema: T, data: unknown): z.infer<T>;
}

export function registerShareRoutes(ctx: ShareRouteContext, shares: ShareService): void {
  const { route, auth, parse } = ctx;

  route(
    {
      method: 'GET',
      url: '/v1/accounts',
      summary: 'Connected cloud accounts (never their tokens)',
      auth: 'device',
      response: AccountsResponse,
    },
    async (req) => ({ accounts: await shares.accounts(auth(req).userId) }),
  );
  route(
    {
      method: 'POST',
      url: '/v1/accounts',
      summary: 'Connect a cloud account: its OAuth tokens, stored encrypted at rest',
      auth: 'device',
      body: ConnectAccountRequest,
      response: ProviderAccount,
    },
    async (req, reply) => {
      const a = auth(req);
      const body = parse(ConnectAccountRequest, req.body);
      void reply.code(201);
      return shares.connectAccount(a.userId, body);
    },
  );
  route(
    {
      method: 'DELETE',
      url: '/v1/accounts/:id',
      summary: 'Disconnect an account (not while it keeps a share replica)',
      auth: 'device',
    },
    async (req, reply) => {
      const a = auth(req);
      const { id } = parse(AccountParams, req.params);
      await shares.disconnectAccount(a.userId, id);
      return reply.code(204).send();
    },
  );

  route(
    {
      method: 'GET',
      url: '/v1/shares',
      summary: "The caller's shares with members, clouds and mirror status",
      auth: 'device',
      response: SharesResponse,
    },
    async (req) => ({ shares: await shares.list(auth(req).userId) }),
  );
  route(
    {
      method: 'POST',
      url: '/v1/shares',
      summary: 'Share an existing folder (Weft storage or a connected account)',
      auth: 'device',
      body: CreateShareRequest,
      response: ShareInfo,
    },
    async (req, reply) => {
      const a = auth(req);
      const body = parse(CreateShareRequest, req.body);
      const info = await shares.create(a.userId, body.name, body.replica);
      void reply.code(201);
      return info;
    },
  );
  route(
    {
      method: 'POST',
      url: '/v1/shares/invites/preview',
      summary: 'What an invitation leads to (does not use it)',
      auth: 'device',
      body: ShareInvitePreviewRequest,
      response: ShareInvitePreview,
    },
    async (req) => {
      auth(req);
      const body = parse(ShareInvitePreviewRequest, req.body);
      return shares.preview(body.token);
    },
  );
  route(
    {
      method: 'POST',
      url: '/v1/shares/accept',
      summary: "Accept an invitation with one's own cloud and folder (seeded from the share)",
      auth: 'device',
      body: AcceptShareRequest,
      response: ShareInfo,
    },
    async (req, reply) => {
      const a = auth(req);
      const body = parse(AcceptShareRequest, req.body);
      const info = await shares.accept(a.userId, body.token, body.replica);
      void reply.code(201);
      return info;
    },
  );
  route(
    { method: 'GET', url: '/v1/shares/:id', summary: 'One share', auth: 'device', response: ShareInfo },
    async (req) => {
      const a = auth(req);
      const { id } = parse(ShareParams, req.params);
      return shares.get(a.userId, id);
    },
  );
  route(
    {
      method: 'POST',
      url: '/v1/shares/:id/invites',
      summary: 'Create a single-use invitation (token and link)',
      auth: 'device',
      body: CreateShareInviteRequest,
      response: ShareInviteResponse,
    },
    async (req, reply) => {
      const a = auth(req);
      const { id } = parse(ShareParams, req.params);
      const body = parse(CreateShareInviteRequest, req.body ?? {});
      const res = await shares.invite(a.userId, id, body.ttlHours);
      void reply.code(201);
      return res;
    },
  );
  route(
    {
      method: 'POST',
      url: '/v1/shares/:id/leave',
      summary: 'Leave a share (the folder stays as it is; the owner leaves last)',
      auth: 'device',
    },
    async (req, reply) => {
      const a = auth(req);
      const { id } = parse(ShareParams, req.params);
      await shares.leave(a.userId, id);
      return reply.code(204).send();
    },
  );
  route(
    {
      method: 'DELETE',
      url: '/v1/shares/:id/members/:member',
      summary: 'Remove a member (owner only)',
      auth: 'device',
    },
    async (req, reply) => {
      const a = auth(req);
      const { id, member } = parse(ShareMemberParams, req.params);
      await shares.remove(a.userId, id, member);
      return reply.code(204).send();
    },
  );
}
