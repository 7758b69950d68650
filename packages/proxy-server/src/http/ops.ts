/**
 * Writes: file operations (POST /v1/ops) and bundles both ways. New writes are refused
 * with SLOW_DOWN (Retry-After: 1) while the scheduler's queue is full.
 */
import type { FastifyReply } from 'fastify';
import {
  BundleDownloadRequest,
  BundleUploadResponse,
  MAX_BUNDLE_BYTES,
  OpsRequest,
  OpsResponse,
} from '@weft/wire';
import type { BundleService } from '../bundles.ts';
import { ApiError } from '../errors.ts';
import type { OpService } from '../ops.ts';
import type { OpScheduler } from '../scheduler.ts';
import { checkNewPath, checkUserPath } from '../store/hybrid.ts';
import { binaryBody, type RouteContext } from './route.ts';

export function registerOpRoutes(
  ctx: RouteContext,
  deps: { ops: OpService; bundles: BundleService; scheduler: OpScheduler; maxQueueDepth: number },
): void {
  const { route, auth, parse } = ctx;
  const { ops, bundles, scheduler, maxQueueDepth } = deps;

  /** Back-pressure: refuse new writes while the scheduler is overloaded. */
  const admit = (reply: FastifyReply, incoming: number): void => {
    if (scheduler.depth + incoming <= maxQueueDepth) return;
    void reply.header('retry-after', '1');
    throw new ApiError('SLOW_DOWN', 'the server is busy; retry later', { queueDepth: scheduler.depth });
  };

  route(
    {
      method: 'POST',
      url: '/v1/ops',
      summary:
        'Apply file operations (ordered per path). A name created must hold no control or bidi character (INVALID_PATH); commit without transferId links only content the caller has held (else OBJECT_UNKNOWN).',
      auth: 'device',
      body: OpsRequest,
      response: OpsResponse,
    },
    async (req, reply) => {
      const a = auth(req);
      const body = parse(OpsRequest, req.body);
      admit(reply, body.ops.length);
      for (const op of body.ops) {
        // What an op creates must be a name every platform can show; what it only reads,
        // moves away or deletes may be an older name that is not.
        if (op.op === 'move' || op.op === 'copy') {
          checkUserPath(op.from);
          checkNewPath(op.to);
        } else if (op.op === 'delete') checkUserPath(op.path);
        else checkNewPath(op.path);
      }
      return { results: await Promise.all(body.ops.map((op) => ops.run(a, op))) };
    },
  );

  route(
    {
      method: 'POST',
      url: '/v1/bundles',
      summary: 'Upload small files as a bundle',
      auth: 'device',
      binaryBody: 'application/octet-stream',
      response: BundleUploadResponse,
    },
    async (req, reply) => ({
      results: await bundles.ingest(auth(req), binaryBody(req), (n) => admit(reply, n)),
    }),
    MAX_BUNDLE_BYTES + 1024,
  );

  route(
    {
      method: 'POST',
      url: '/v1/bundles/download',
      summary: 'Download many small files as one bundle',
      auth: 'device',
      body: BundleDownloadRequest,
      binaryResponse: 'application/octet-stream',
      responseDescription:
        'A version-2 bundle (docs/formats/bundle.md): the files that fit, then one deferred ' +
        'record (request index, reason absent|large|later|changed) for every requested path left out.',
    },
    async (req, reply) => {
      const a = auth(req);
      const body = parse(BundleDownloadRequest, req.body);
      const out = await bundles.download(a.userId, body.paths, body.compress !== false);
      void reply.type('application/octet-stream');
      return reply.send(Buffer.from(out.buffer, out.byteOffset, out.byteLength));
    },
  );
}
