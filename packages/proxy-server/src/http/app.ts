/**
 * The Fastify instance every route module registers on: TLS when configured, the body
 * parsers, WebSockets, errors as `{error: {code, message, details}}`, device-token
 * authentication of every /v1 route (read from the store on each request, so a revocation
 * takes effect at once) but enrolment and /v1/admin/* (which check the admin token), the
 * proxy's own time as a Server-Timing header, and per-request metrics.
 */
import { readFileSync } from 'node:fs';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import websocket from '@fastify/websocket';
import type { Logger } from 'pino';
import {
  API_PREFIX,
  BLOCK_HEADER_SIZE,
  formatServerTiming,
  MAX_BLOCK_PAYLOAD,
  SERVER_TIMING_HEADER,
} from '@weft/wire';
import { type AuthContext, bearer, hashSecret } from '../auth.ts';
import type { ProxyConfig } from '../config.ts';
import { ApiError, toApiError } from '../errors.ts';
import type { ProxyMetrics } from '../metrics.ts';
import type { MetadataStore } from '../store/metadata.ts';
import type { DeviceSessions } from './devices.ts';
import { errorBody, parse, type RouteContext, type RouteDoc } from './route.ts';
import { SlowClientGuard } from './slow-clients.ts';

declare module 'fastify' {
  interface FastifyRequest {
    auth?: AuthContext;
    /** When the handler began, the body parsed (performance.now(); the Server-Timing header). */
    handlerStartMs?: number;
  }
}

export async function createHttpApp(o: {
  config: ProxyConfig;
  log: Logger;
  meta: MetadataStore;
  devices: DeviceSessions;
  metrics: ProxyMetrics;
  /** Runs first on every request, before authentication (cluster/role.ts: writes refused while cut off). */
  gate?: (req: FastifyRequest, reply: FastifyReply) => void;
}): Promise<{ app: FastifyInstance; slowClients: SlowClientGuard }> {
  const { config, log, meta, devices, metrics } = o;
  const tls = config.tls
    ? { key: readFileSync(config.tls.keyFile), cert: readFileSync(config.tls.certFile) }
    : undefined;
  const app = (tls
    ? Fastify({
        loggerInstance: log,
        https: tls,
        bodyLimit: 1 << 20,
        forceCloseConnections: true,
      })
    : Fastify({
        loggerInstance: log,
        bodyLimit: 1 << 20,
        forceCloseConnections: true,
      })) as unknown as FastifyInstance;
  const slowClients = new SlowClientGuard(app.server, config.timeouts, log);
  await app.register(websocket, {
    options: { maxPayload: BLOCK_HEADER_SIZE + MAX_BLOCK_PAYLOAD + 1024 * 1024 },
  });
  app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer' }, (_req, body, done) =>
    done(null, body),
  );
  app.setErrorHandler((err: Error & { code?: string; statusCode?: number }, req, reply) => {
    let e: ApiError;
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
      e = new ApiError('PAYLOAD_TOO_LARGE', 'request body too large');
    else if (typeof err.code === 'string' && err.code.startsWith('FST_ERR_CTP'))
      e = new ApiError('BAD_REQUEST', err.message);
    else if (
      err instanceof SyntaxError ||
      (err.statusCode !== undefined &&
        err.statusCode >= 400 &&
        err.statusCode < 500 &&
        !(err instanceof ApiError))
    )
      e = new ApiError('BAD_REQUEST', err.message);
    else e = toApiError(err);
    if (e.status >= 500) req.log.error({ err }, 'request failed');
    void reply.code(e.status).send(errorBody(e));
  });
  app.setNotFoundHandler((_req, reply) => {
    void reply.code(404).send(errorBody(new ApiError('NOT_FOUND', 'no such route')));
  });

  const gate = o.gate;
  if (gate) app.addHook('onRequest', async (req, reply) => gate(req, reply));
  app.addHook('onRequest', async (req: FastifyRequest) => {
    const url = req.url.split('?')[0] ?? '';
    if (
      !url.startsWith(API_PREFIX + '/') ||
      url === `${API_PREFIX}/enrol` ||
      url === `${API_PREFIX}/invites` ||
      // The operator's routes check the admin token themselves (http/storage.ts).
      url.startsWith(`${API_PREFIX}/admin/`)
    )
      return;
    const token = bearer(req.headers.authorization);
    // Read from the store on every request: a revocation takes effect at once.
    const found = token ? await meta.lookupToken(hashSecret(token)) : ({ state: 'unknown' } as const);
    if (found.state === 'revoked')
      throw new ApiError('DEVICE_REVOKED', 'this device was removed from its account; enrol it again');
    if (found.state !== 'active') throw new ApiError('UNAUTHORIZED', 'missing or unknown device token');
    const device = found.device;
    await devices.seen(device.id, Date.now());
    req.auth = { userId: device.userId, deviceId: device.id, deviceName: device.name };
  });
  // The proxy's own time on each request (wire/server-timing.ts), from the parsed body to the
  // response: the agent takes it off the request's time to measure its link (issue #16).
  app.addHook('preHandler', async (req: FastifyRequest) => {
    req.handlerStartMs = performance.now();
  });
  app.addHook('onSend', async (req, reply, payload) => {
    if (req.handlerStartMs !== undefined && !reply.hasHeader(SERVER_TIMING_HEADER))
      void reply.header(SERVER_TIMING_HEADER, formatServerTiming(performance.now() - req.handlerStartMs));
    return payload;
  });
  app.addHook('onResponse', async (req, reply) => {
    metrics.requests.inc({
      method: req.method,
      route: req.routeOptions.url ?? 'unmatched',
      status: String(reply.statusCode),
    });
    const inBytes = Number(req.headers['content-length'] ?? 0);
    if (inBytes > 0) metrics.bytes.inc({ tier: 'client', direction: 'in' }, inBytes);
    const out = Number(reply.getHeader('content-length') ?? 0);
    if (out > 0) metrics.bytes.inc({ tier: 'client', direction: 'out' }, out);
  });
  return { app, slowClients };
}

/** The registration context route modules are given; every route is documented into `docs`. */
export function routeContext(app: FastifyInstance, docs: RouteDoc[]): RouteContext {
  return {
    app,
    route(doc, handler, bodyLimit, scope = app) {
      docs.push(doc);
      scope.route({
        method: doc.method as 'GET',
        url: doc.url,
        handler,
        ...(bodyLimit ? { bodyLimit } : {}),
      });
    },
    document(doc) {
      docs.push(doc);
    },
    auth(req) {
      if (!req.auth) throw new ApiError('UNAUTHORIZED', 'missing or unknown device token');
      return req.auth;
    },
    parse,
  };
}
