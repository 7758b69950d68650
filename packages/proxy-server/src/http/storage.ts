/**
 * The health of the object tier when it is redundant (issue #17, docs/redundancy.md): a
 * user's view of their own files (`GET /v1/storage/health`, device token) and the
 * operator's routes (admin token): the whole status, start a scrub, replace a backend,
 * and the running job's progress.
 */
import { z } from 'zod/v4';
import {
  AdminStorageResponse,
  JobResponse,
  ScrubRequest,
  StorageHealthResponse,
  StorageJob,
} from '@weft/wire';
import { bearer } from '../auth.ts';
import { ApiError } from '../errors.ts';
import { RedundantBackendConfig } from '../redundant-tier.ts';
import type { StorageMaintenance } from '../storage-maintenance.ts';
import type { RouteContext } from './route.ts';

export const ReplaceRequest = z
  .object({
    /** The id of the backend to replace (gone for good). */
    backend: z.string().min(1).max(64),
    /** The new backend, as in objectTier.backends (a new id). */
    with: RedundantBackendConfig,
  })
  .strict();

const JobQuery = z.object({
  id: z
    .string()
    .regex(/^[0-9a-f]{12}$/)
    .optional(),
});

export function registerStorageRoutes(
  ctx: RouteContext,
  deps: {
    objectTier: 'fs' | 's3' | 'redundant';
    /** Absent unless the object tier is redundant. */
    maintenance: StorageMaintenance | undefined;
    requireAdmin: (token: string | undefined) => void;
    /** The caller's files in the object tier: key → how many of their files refer to it. */
    userObjects: (userId: string) => Promise<Map<string, number>>;
    now?: () => number;
  },
): void {
  const { route, auth, parse } = ctx;
  const { maintenance, requireAdmin } = deps;
  const now = deps.now ?? Date.now;
  const redundant = (): StorageMaintenance => {
    if (!maintenance)
      throw new ApiError(
        'BAD_REQUEST',
        `the object tier is ${deps.objectTier}, not redundant: nothing to do`,
      );
    return maintenance;
  };

  route(
    {
      method: 'GET',
      url: '/v1/storage/health',
      summary:
        "How the caller's files stand on a redundant object tier: each backend's class and state, the caller's files by redundancy left, and how many one more backend failure would make unreadable (no other users' data)",
      auth: 'device',
      response: StorageHealthResponse,
    },
    async (req): Promise<StorageHealthResponse> => {
      const a = auth(req);
      if (!maintenance) return { redundant: false };
      return {
        redundant: true,
        ...(await maintenance.userStatus(await deps.userObjects(a.userId))),
        checkedAtMs: now(),
      };
    },
  );

  route(
    {
      method: 'GET',
      url: '/v1/admin/storage',
      summary:
        'The object tier: each backend (class, measured latency and throughput, price, state since when, outage-log entries, blobs, bad blobs), objects by redundancy left, what one more failure would do, the scrub schedule, the last scrub and the running job',
      auth: 'admin',
      response: AdminStorageResponse,
    },
    async (req): Promise<AdminStorageResponse> => {
      requireAdmin(bearer(req.headers.authorization));
      return {
        objectTier: deps.objectTier,
        ...(maintenance ? { redundant: await maintenance.adminStatus() } : {}),
      };
    },
  );

  route(
    {
      method: 'POST',
      url: '/v1/admin/storage/scrub',
      summary:
        'Start a scrub now (202): every replica and fragment read and checked, what is missing or corrupt rebuilt; 409 ALREADY_EXISTS while another job runs',
      auth: 'admin',
      body: ScrubRequest,
      response: StorageJob,
    },
    async (req, reply) => {
      requireAdmin(bearer(req.headers.authorization));
      const body = parse(ScrubRequest, req.body ?? {});
      const job = redundant().startScrub(body, 'admin');
      void reply.code(202);
      return job;
    },
  );

  route(
    {
      method: 'POST',
      url: '/v1/admin/storage/replace',
      summary:
        'Replace a backend gone for good (202): its replicas and fragments are rebuilt onto the new one from the others; progress in GET /v1/admin/storage/job; 409 ALREADY_EXISTS while another job runs',
      auth: 'admin',
      body: ReplaceRequest,
      response: StorageJob,
    },
    async (req, reply) => {
      requireAdmin(bearer(req.headers.authorization));
      const body = parse(ReplaceRequest, req.body);
      const job = await redundant().startReplace(body.backend, body.with);
      void reply.code(202);
      return job;
    },
  );

  route(
    {
      method: 'GET',
      url: '/v1/admin/storage/job',
      summary:
        'The running maintenance job (scrub or replacement) with its progress, or the last one; with `id`, that job (the current one, the last scrub or the last replacement); null: none',
      auth: 'admin',
      query: JobQuery,
      response: JobResponse,
    },
    async (req): Promise<JobResponse> => {
      requireAdmin(bearer(req.headers.authorization));
      const q = parse(JobQuery, req.query);
      return { job: maintenance?.currentJob(q.id) ?? null };
    },
  );
}
