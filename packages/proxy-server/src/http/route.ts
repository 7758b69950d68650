/**
 * What every route module (http/*.ts) is written with: the route description that feeds
 * the OpenAPI document, the registration context the server hands each module, and the
 * request helpers they share — body access, zod parsing into API errors, file headers and
 * the auth → parse → stat → NOT_FOUND preamble of routes that read one entry.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod/v4';
import { type ApiErrorBody, type EntryInfo, HEADER_MTIME, HEADER_REVISION, HEADER_SHA256 } from '@weft/wire';
import type { AuthContext } from '../auth.ts';
import { ApiError } from '../errors.ts';

/** One route as the OpenAPI document describes it. */
export interface RouteDoc {
  method: string;
  url: string;
  summary: string;
  auth: 'device' | 'admin' | 'none';
  query?: z.ZodType;
  body?: z.ZodType;
  binaryBody?: string;
  response?: z.ZodType;
  binaryResponse?: string;
  /** What the binary response holds, when a summary does not say enough. */
  responseDescription?: string;
  websocket?: boolean;
}

export type RouteHandler = (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/** What the server gives each route module to register its routes with. */
export interface RouteContext {
  readonly app: FastifyInstance;
  /** Register a route and document it; `scope` is an encapsulated plugin (own body parsers). */
  route(doc: RouteDoc, handler: RouteHandler, bodyLimit?: number, scope?: FastifyInstance): void;
  /** Document a route registered directly on `app` (WebSocket upgrades). */
  document(doc: RouteDoc): void;
  /** The calling device (set by the server's authentication hook); UNAUTHORIZED without one. */
  auth(req: FastifyRequest): AuthContext;
  parse<T extends z.ZodType>(schema: T, data: unknown): z.infer<T>;
}

/** `data` checked against `schema`; BAD_REQUEST (INVALID_PATH for a path field) otherwise. */
export function parse<T extends z.ZodType>(schema: T, data: unknown): z.infer<T> {
  const r = schema.safeParse(data);
  if (r.success) return r.data;
  const pathIssue = r.error.issues.some((i) =>
    i.path.some((k) => ['path', 'from', 'to', 'paths'].includes(String(k))),
  );
  throw new ApiError(pathIssue ? 'INVALID_PATH' : 'BAD_REQUEST', z.prettifyError(r.error).slice(0, 2000));
}

export function errorBody(e: ApiError): ApiErrorBody {
  return { error: { code: e.code, message: e.message, ...(e.details ? { details: e.details } : {}) } };
}

/**
 * The preamble of a route that reads one entry: the caller, the query (its `path`) and the
 * entry there. NOT_FOUND when there is none; with `want: 'file'`, also when it is a folder
 * ("not a file"); with `want: 'content'`, unless it is a file with a known SHA-256.
 */
export function entryAt<S extends z.ZodType<{ path: string }>>(
  ctx: Pick<RouteContext, 'auth' | 'parse'>,
  stat: (userId: string, path: string) => Promise<EntryInfo | undefined>,
  req: FastifyRequest,
  schema: S,
  want?: 'any' | 'file',
): Promise<{ a: AuthContext; q: z.infer<S>; e: EntryInfo }>;
export function entryAt<S extends z.ZodType<{ path: string }>>(
  ctx: Pick<RouteContext, 'auth' | 'parse'>,
  stat: (userId: string, path: string) => Promise<EntryInfo | undefined>,
  req: FastifyRequest,
  schema: S,
  want: 'content',
): Promise<{ a: AuthContext; q: z.infer<S>; e: EntryInfo & { sha256: string } }>;
export async function entryAt<S extends z.ZodType<{ path: string }>>(
  ctx: Pick<RouteContext, 'auth' | 'parse'>,
  stat: (userId: string, path: string) => Promise<EntryInfo | undefined>,
  req: FastifyRequest,
  schema: S,
  want: 'any' | 'file' | 'content' = 'any',
): Promise<{ a: AuthContext; q: z.infer<S>; e: EntryInfo }> {
  const a = ctx.auth(req);
  const q = ctx.parse(schema, req.query);
  const e = await stat(a.userId, (q as { path: string }).path);
  if (!e || (want === 'content' && (e.kind !== 'file' || !e.sha256)))
    throw new ApiError('NOT_FOUND', 'not found');
  if (want === 'file' && e.kind !== 'file') throw new ApiError('NOT_FOUND', 'not a file');
  return { a, q, e };
}

/** The request body as a stream (routes registered with the pass-through parser). */
export function streamBody(req: FastifyRequest): AsyncIterable<Uint8Array> {
  const b = req.body as unknown;
  if (typeof b !== 'object' || b === null || !(Symbol.asyncIterator in b))
    throw new ApiError('BAD_REQUEST', 'send the body as application/octet-stream');
  return b as AsyncIterable<Uint8Array>;
}

export function binaryBody(req: FastifyRequest): Uint8Array {
  const b = req.body;
  if (!(b instanceof Buffer)) throw new ApiError('BAD_REQUEST', 'send the body as application/octet-stream');
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

/** Revision, mtime, ETag and SHA-256 headers of a file response. */
export function fileHeaders(reply: FastifyReply, e: EntryInfo): void {
  void reply
    .header(HEADER_REVISION, e.revision)
    .header(HEADER_MTIME, String(e.mtimeMs))
    .header('etag', `"${e.revision}"`);
  if (e.sha256) void reply.header(HEADER_SHA256, e.sha256);
}

export function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
