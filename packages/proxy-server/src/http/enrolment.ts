/**
 * Invites and enrolment (admin token or invite), and what a device asks about itself: who
 * it is, and its user's storage usage.
 */
import {
  EnrolRequest,
  EnrolResponse,
  InviteRequest,
  InviteResponse,
  UsageResponse,
  WhoAmIResponse,
} from '@weft/wire';
import { bearer } from '../auth.ts';
import type { Enrolment } from '../enrolment.ts';
import { ApiError } from '../errors.ts';
import type { HybridStore } from '../store/hybrid.ts';
import type { RouteContext } from './route.ts';

export function registerEnrolmentRoutes(
  ctx: RouteContext,
  deps: { enrolment: Enrolment; store: HybridStore },
): void {
  const { route, auth, parse } = ctx;
  const { enrolment, store } = deps;

  route(
    {
      method: 'POST',
      url: '/v1/invites',
      summary: 'Create a one-time enrolment invite',
      auth: 'admin',
      body: InviteRequest,
      response: InviteResponse,
    },
    async (req, reply) => {
      enrolment.requireAdmin(bearer(req.headers.authorization));
      const body = parse(InviteRequest, req.body);
      const { invite, expiresMs } = await enrolment.invite(body.user, body.ttlHours);
      void reply.code(201);
      return { user: body.user, invite, expiresMs };
    },
  );

  route(
    {
      method: 'POST',
      url: '/v1/enrol',
      summary: 'Enrol a device (admin token or invite)',
      auth: 'admin',
      body: EnrolRequest,
      response: EnrolResponse,
    },
    async (req, reply) => {
      const wait = enrolment.blockedFor(req.ip);
      if (wait > 0) {
        void reply.header('retry-after', String(Math.ceil(wait / 1000)));
        throw new ApiError('SLOW_DOWN', 'too many refused enrolments from this address; retry later');
      }
      const body = parse(EnrolRequest, req.body);
      const { token, deviceId } = await enrolment.enrol(req.ip, body, bearer(req.headers.authorization));
      void reply.code(201);
      return { user: body.user, deviceId, deviceName: body.deviceName, token };
    },
  );

  route(
    {
      method: 'GET',
      url: '/v1/whoami',
      summary: 'The calling device',
      auth: 'device',
      response: WhoAmIResponse,
    },
    async (req) => {
      const a = auth(req);
      return {
        user: a.userId,
        deviceId: a.deviceId,
        deviceName: a.deviceName,
        seq: await store.meta.currentSeq(a.userId),
      };
    },
  );

  route(
    {
      method: 'GET',
      url: '/v1/usage',
      summary: "The calling user's storage: logical bytes used and the quota (null: unlimited)",
      auth: 'device',
      response: UsageResponse,
    },
    async (req) => {
      const a = auth(req);
      const usage = { user: a.userId, ...(await store.quota.usage(a.userId)) };
      if (!store.keepsVersions) return usage;
      const kept = await store.meta.versions.bytes(a.userId);
      return { ...usage, versionsBytes: kept.small + kept.large };
    },
  );
}
