/** Versions and deleted files (docs/formats/api.md "Versions and deleted files"). */
import { Readable } from 'node:stream';
import {
  DeletedQuery,
  DeletedResponse,
  HEADER_MTIME,
  HEADER_SHA256,
  OpResult,
  RestoreRequest,
  VersionContentQuery,
  VersionsQuery,
  VersionsResponse,
} from '@weft/wire';
import type { VersionService } from '../versions.ts';
import type { RouteContext } from './route.ts';

export function registerVersionRoutes(ctx: RouteContext, versions: VersionService): void {
  const { route, auth, parse } = ctx;

  route(
    {
      method: 'GET',
      url: '/v1/versions',
      summary: "A file's versions: the current one and those kept after an overwrite or a delete",
      auth: 'device',
      query: VersionsQuery,
      response: VersionsResponse,
    },
    async (req) => {
      const a = auth(req);
      const q = parse(VersionsQuery, req.query);
      return versions.list(a.userId, q.path);
    },
  );

  route(
    {
      method: 'GET',
      url: '/v1/deleted',
      summary: 'Files deleted below a folder that can still be restored',
      auth: 'device',
      query: DeletedQuery,
      response: DeletedResponse,
    },
    async (req) => {
      const a = auth(req);
      const q = parse(DeletedQuery, req.query);
      return versions.deleted(a.userId, q.path, q.limit);
    },
  );

  route(
    {
      method: 'POST',
      url: '/v1/versions/restore',
      summary: 'Make a kept version (or a deleted file) current again: a write that every device syncs',
      auth: 'device',
      body: RestoreRequest,
      response: OpResult,
    },
    async (req) => {
      const a = auth(req);
      const b = parse(RestoreRequest, req.body);
      return versions.restore(a, b.path, b.version);
    },
  );

  route(
    {
      method: 'GET',
      url: '/v1/versions/content',
      summary: 'Download a kept version',
      auth: 'device',
      query: VersionContentQuery,
      binaryResponse: 'application/octet-stream',
    },
    async (req, reply) => {
      const a = auth(req);
      const q = parse(VersionContentQuery, req.query);
      const { version, body } = await versions.open(a.userId, q.path, q.version);
      void reply
        .header(HEADER_SHA256, version.sha256)
        .header(HEADER_MTIME, String(version.mtimeMs))
        .header('content-length', String(version.size))
        .type('application/octet-stream');
      return reply.send(body instanceof Uint8Array ? Buffer.from(body) : Readable.from(body));
    },
  );
}
