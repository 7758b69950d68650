/**
 * Delta routes over the DeltaService: upload a delta (its body streamed, patched as it
 * arrives), the signature a client computes an upload against, and a delta download
 * against the client's own signature.
 */
import { parseSignature } from '@weft/rsync-wasm';
import { DeltaDownloadQuery, DeltaUploadQuery, type EntryInfo, OpResult, PathQuery } from '@weft/wire';
import type { DeltaService } from '../deltas.ts';
import { writerOf } from '../ops.ts';
import type { HybridStore } from '../store/hybrid.ts';
import { binaryBody, entryAt, fileHeaders, type RouteContext, streamBody } from './route.ts';

export async function registerDeltaRoutes(
  ctx: RouteContext,
  deps: { deltas: DeltaService; store: HybridStore; maxSignatureBytes: number },
): Promise<void> {
  const { app, route, auth, parse } = ctx;
  const { deltas, store, maxSignatureBytes } = deps;
  const stat = (userId: string, path: string): Promise<EntryInfo | undefined> => store.stat(userId, path);

  // The delta upload reads its body as a stream (patched as it arrives, never buffered), so
  // it lives in a scope whose octet-stream parser hands the request stream through.
  await app.register(async (scope) => {
    scope.removeContentTypeParser('application/octet-stream');
    scope.addContentTypeParser('application/octet-stream', (_req, payload, done) => done(null, payload));
    route(
      {
        method: 'POST',
        url: '/v1/deltas',
        summary:
          'Upload a large file as a delta against its base revision (streamed; FILE_TOO_LARGE above maxFileBytes)',
        auth: 'device',
        query: DeltaUploadQuery,
        binaryBody: 'application/octet-stream',
        response: OpResult,
      },
      async (req, reply) => {
        try {
          const a = auth(req);
          const q = parse(DeltaUploadQuery, req.query);
          const length = req.headers['content-length'] ? Number(req.headers['content-length']) : undefined;
          return await deltas.upload(writerOf(a), q, streamBody(req), length);
        } catch (e) {
          // Refused before the body was read to its end: close the connection rather than
          // read and discard the rest of a body of up to maxDeltaBytes.
          if (!req.raw.complete) void reply.header('connection', 'close');
          throw e;
        }
      },
      undefined,
      scope,
    );
  });

  route(
    {
      method: 'GET',
      url: '/v1/signature',
      summary: "rsync signature of a large file's current version (a base for a delta upload)",
      auth: 'device',
      query: PathQuery,
      binaryResponse: 'application/octet-stream',
    },
    async (req, reply) => {
      const { a, e } = await entryAt(ctx, stat, req, PathQuery);
      const sig = await deltas.signature(a.userId, e);
      // The revision and SHA-256 say which version the signature describes.
      fileHeaders(reply, { ...e, sha256: sig.sha256 });
      void reply.type('application/octet-stream').header('content-length', String(sig.bytes.byteLength));
      return reply.send(Buffer.from(sig.bytes.buffer, sig.bytes.byteOffset, sig.bytes.byteLength));
    },
  );

  route(
    {
      method: 'POST',
      url: '/v1/files/delta',
      summary:
        'Delta download: send a signature (at most maxSignatureBytes), receive a delta container (streamed)',
      auth: 'device',
      query: DeltaDownloadQuery,
      binaryBody: 'application/octet-stream',
      binaryResponse: 'application/octet-stream',
    },
    async (req, reply) => {
      const sig = parseSignature(binaryBody(req));
      const { a, q, e } = await entryAt(ctx, stat, req, DeltaDownloadQuery, 'content');
      // Written to a temporary file and streamed from there: never a file-sized buffer.
      const out = await deltas.download(a.userId, e, sig, q.baseSha256);
      fileHeaders(reply, e);
      void reply.type('application/octet-stream').header('content-length', String(out.length));
      return reply.send(out.body);
    },
    maxSignatureBytes,
  );

  route(
    {
      method: 'GET',
      url: '/v1/files/delta',
      summary:
        'Server-side diff: a delta container against a base version the server holds for the caller (DELTA_BASE_UNKNOWN otherwise); no signature sent',
      auth: 'device',
      query: DeltaDownloadQuery,
      binaryResponse: 'application/octet-stream',
    },
    async (req, reply) => {
      const { a, q, e } = await entryAt(ctx, stat, req, DeltaDownloadQuery, 'content');
      const out = await deltas.serverDiff(a.userId, e, q.baseSha256);
      fileHeaders(reply, e);
      void reply.type('application/octet-stream').header('content-length', String(out.length));
      return reply.send(out.body);
    },
  );
}
