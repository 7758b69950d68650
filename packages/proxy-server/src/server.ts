/**
 * The Weft proxy server: Fastify HTTP API + WebSockets (change feed, block stream) over the
 * hybrid store. `startProxyServer(config)` runs it in-process (tests, `npm start`);
 * bin/weft-proxy.mjs runs it from a config file.
 */
import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { Readable } from 'node:stream';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import websocket from '@fastify/websocket';
import pino, { type Logger } from 'pino';
import { z } from 'zod/v4';
import { FsProvider, S3Provider, type Provider } from '@weft/providers';
import { parseSignature, type OldFileReader } from '@weft/rsync-wasm';
import {
  API_PREFIX,
  ApiErrorBody,
  BlockNack,
  BundleDownloadRequest,
  BundleUploadResponse,
  ChangesQuery,
  ChangesResponse,
  DeltaDownloadQuery,
  DeltaUploadQuery,
  EnrolRequest,
  EnrolResponse,
  EntryInfo,
  FeedClientMessage,
  type FeedServerMessage,
  type FileOp,
  HealthResponse,
  InviteRequest,
  InviteResponse,
  ListQuery,
  ListResponse,
  MAX_BUNDLE_BYTES,
  MerkleRequest,
  MerkleResponse,
  OpResult,
  OpsRequest,
  OpsResponse,
  PathQuery,
  TransferCreateRequest,
  TransferState,
  BlockAck,
  WhoAmIResponse,
  UsageResponse,
  scanBundleEntries,
  decodeBundle,
  sha256Hex,
  encodeBundle,
  bundleEntrySize,
  BUNDLE_DEFERRED_RECORD_SIZE,
  BUNDLE_OVERHEAD,
  type BundleDeferred,
  peekTransferBlockHeader,
  type BundleEntry,
  type ChangeRecord,
  type ErrorCode,
  BLOCK_HEADER_SIZE,
  MAX_BLOCK_PAYLOAD,
} from '@weft/wire';
import {
  type AuthContext,
  bearer,
  FailureLimiter,
  hashSecret,
  newInvite,
  newToken,
  adminTokenMatches,
} from './auth.ts';
import { parseConfig, quotaLimit, type ProxyConfig, type ProxyConfigInput } from './config.ts';
import { ApiError, toApiError } from './errors.ts';
import { MerkleIndex } from './merkle.ts';
import { ProxyMetrics } from './metrics.ts';
import { registerPeerLink, type PeerLink } from './peer-link.ts';
import { OpScheduler } from './scheduler.ts';
import { checkNewPath, checkUserPath, HybridStore, type Writer } from './store/hybrid.ts';
import { RelayCache } from './store/relay-cache.ts';
import { SqliteMetadataStore } from './store/sqlite.ts';
import { TransferService } from './transfers.ts';
import { privateDir } from './private-files.ts';
import { deltaDownload, openDeltaUpload, patchToFile } from './delta-io.ts';
import { SlowClientGuard } from './http/slow-clients.ts';
import { DeviceSessions, registerDeviceRoutes } from './http/devices.ts';
import { registerShareRoutes } from './http/shares.ts';
import {
  binaryBody,
  entryAt,
  errorBody,
  fileHeaders,
  parse,
  type RouteDoc,
  safeJson,
  streamBody,
} from './http/route.ts';
import { PeerRouter } from './peer-routing.ts';
import { MIRROR_DEVICE_PREFIX, ShareService, type ShareServiceOptions } from './shares/service.ts';

export const SERVER_VERSION = '0.1.0';

declare module 'fastify' {
  interface FastifyRequest {
    auth?: AuthContext;
  }
}

export interface RunningProxyServer {
  /** Base URL, e.g. http://127.0.0.1:41234 */
  readonly url: string;
  /**
   * The admin token guarding enrolment (the configured one, or a generated one). A server
   * configured with `adminTokenSha256` never holds the token: reading this then throws.
   */
  readonly adminToken: string;
  readonly config: ProxyConfig;
  readonly app: FastifyInstance;
  readonly store: HybridStore;
  readonly scheduler: OpScheduler;
  /** The inter-proxy endpoint, when the config has a `peer` section. */
  readonly peerLink?: PeerLink;
  /** Bandwidth probes and write routing between proxies (when the peer link is configured). */
  readonly peerRouter?: PeerRouter;
  /** Run garbage collection now (grace period from the config unless given). */
  gc(graceMs?: number): Promise<{ objects: number; orphans: number; transfers: number }>;
  /** Enrol a device directly (for `npm start` and tests). */
  enrol(user: string, deviceName: string): Promise<{ token: string; deviceId: string }>;
  /** Cross-cloud shared folders (absent when config.shares.enabled is false). */
  readonly shares?: ShareService;
  close(): Promise<void>;
}

async function openProviders(
  config: ProxyConfig,
): Promise<{ fs: FsProvider; objects: Provider; fsRoot: string }> {
  const fsRoot = config.fsTierDir ?? nodePath.join(config.dataDir, 'fs');
  // The proxy keeps its own change feed in SQLite; the fs provider's journal is only kept short.
  const fs = await FsProvider.open({ root: fsRoot, portable: false, maxJournal: 2000, private: true });
  const ot = config.objectTier;
  const objects: Provider =
    ot.type === 'fs'
      ? await FsProvider.open({
          root: ot.dir ?? nodePath.join(config.dataDir, 'objects'),
          portable: false,
          maxJournal: 2000,
          private: true,
        })
      : new S3Provider({
          bucket: ot.bucket,
          prefix: ot.prefix,
          ...(ot.endpoint ? { endpoint: ot.endpoint } : {}),
          region: ot.region,
          forcePathStyle: ot.forcePathStyle,
          ...(ot.accessKeyId && ot.secretAccessKey
            ? { credentials: { accessKeyId: ot.accessKeyId, secretAccessKey: ot.secretAccessKey } }
            : {}),
        });
  return { fs, objects, fsRoot };
}

/** Start a proxy server. Defaults: 127.0.0.1, a free port, everything under config.dataDir. */
export async function startProxyServer(
  input: ProxyConfigInput = {},
  options: { logger?: Logger; shares?: Pick<ShareServiceOptions, 'wrap'> } = {},
): Promise<RunningProxyServer> {
  const config = parseConfig(input);
  const log = options.logger ?? pino({ level: config.logLevel, name: 'weft-proxy' });
  // Owner-only, whatever the umask (the data directory, and every folder and file below).
  privateDir(config.dataDir);
  // The check needs only the token's hash; with `adminTokenSha256` the plaintext never exists here.
  const adminToken = config.adminTokenSha256
    ? undefined
    : (config.adminToken ?? 'wfa_' + randomBytes(24).toString('base64url'));
  const adminTokenSha256 = config.adminTokenSha256 ?? hashSecret(adminToken ?? '');
  const metrics = new ProxyMetrics();
  const { fs, objects, fsRoot } = await openProviders(config);
  const meta = new SqliteMetadataStore(
    config.metadataFile ?? nodePath.join(config.dataDir, 'metadata.sqlite'),
  );
  const hub = new EventEmitter();
  hub.setMaxListeners(0);
  // Mirror writes into a namespace reach its feed clients in batches (CoCloud's periodic,
  // batched notifications), not one wake-up per file.
  const batched = new Map<string, NodeJS.Timeout>();
  const notify = (userId: string, records: ChangeRecord[]): void => {
    const mirrorOnly = records.every((r) => r.device?.startsWith(MIRROR_DEVICE_PREFIX));
    if (!mirrorOnly || config.shares.notifyBatchMs === 0) return void hub.emit(`changes:${userId}`);
    if (batched.has(userId)) return;
    batched.set(
      userId,
      setTimeout(() => {
        batched.delete(userId);
        hub.emit(`changes:${userId}`);
      }, config.shares.notifyBatchMs),
    );
  };
  const merkle = new MerkleIndex(meta);
  const devices = new DeviceSessions(meta);
  const enrolFailures = new FailureLimiter(config.enrolFailuresPerMinute);
  const scheduler = new OpScheduler({ concurrency: config.concurrency });
  const relay = new RelayCache(
    nodePath.join(fsRoot, 'relay'),
    config.relayCacheBytes,
    objects,
    (bytes, ms) => {
      metrics.transferSeconds.observe({ kind: 'relay-stage' }, ms / 1000);
      metrics.bytes.inc({ tier: 'object', direction: 'out' }, bytes);
      scheduler.bandwidth.record(bytes, ms);
    },
  );
  await relay.init();
  const store = new HybridStore({
    fs,
    objects,
    meta,
    relay,
    stagingDir: nodePath.join(fsRoot, 'staging'),
    smallFileBytes: config.smallFileBytes,
    quotaLimit: (userId) => quotaLimit(config.quota, userId),
    log,
    metrics,
    onChanges: (userId: string, records: ChangeRecord[]) => {
      for (const r of records) {
        merkle.invalidate(userId, r.path);
        if (r.type === 'move') merkle.invalidate(userId, r.from);
      }
      notify(userId, records);
    },
    onObjectTransfer: (bytes, ms) => scheduler.bandwidth.record(bytes, ms),
  });
  await store.clearTemps();
  // Crash recovery: the filesystem tier is the truth for every namespace.
  for (const user of meta.listUsers()) await store.reconcile(user);
  meta.recomputeRefcounts(Date.now());
  const transfers = new TransferService(store, metrics, config.maxFileBytes);

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

  app.addHook('onRequest', async (req: FastifyRequest) => {
    const url = req.url.split('?')[0] ?? '';
    if (!url.startsWith(API_PREFIX + '/') || url === `${API_PREFIX}/enrol` || url === `${API_PREFIX}/invites`)
      return;
    const token = bearer(req.headers.authorization);
    // Read from the store on every request: a revocation takes effect at once.
    const found = token ? meta.lookupToken(hashSecret(token)) : ({ state: 'unknown' } as const);
    if (found.state === 'revoked')
      throw new ApiError('DEVICE_REVOKED', 'this device was removed from its account; enrol it again');
    if (found.state !== 'active') throw new ApiError('UNAUTHORIZED', 'missing or unknown device token');
    const device = found.device;
    devices.seen(device.id, Date.now());
    req.auth = { userId: device.userId, deviceId: device.id, deviceName: device.name };
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

  const docs: RouteDoc[] = [];
  const auth = (req: FastifyRequest): AuthContext => {
    if (!req.auth) throw new ApiError('UNAUTHORIZED', 'missing or unknown device token');
    return req.auth;
  };
  const requireAdmin = (req: FastifyRequest): void => {
    const t = bearer(req.headers.authorization);
    if (!t || !adminTokenMatches(t, adminTokenSha256))
      throw new ApiError('FORBIDDEN', 'admin token required');
  };
  const ctx = { auth, parse };
  const stat = (userId: string, path: string): EntryInfo | undefined => store.stat(userId, path);
  const writer = (a: AuthContext): Writer => ({
    userId: a.userId,
    deviceId: a.deviceId,
    deviceName: a.deviceName,
  });

  // ---------------------------------------------------------------- ops through the scheduler

  /** Back-pressure: refuse new writes while the scheduler is overloaded. */
  const admit = (reply: FastifyReply, incoming: number): void => {
    if (scheduler.depth + incoming <= config.maxQueueDepth) return;
    void reply.header('retry-after', '1');
    throw new ApiError('SLOW_DOWN', 'the server is busy; retry later', { queueDepth: scheduler.depth });
  };

  const runOp = (a: AuthContext, op: FileOp): Promise<OpResult> => {
    const w = writer(a);
    const paths = op.op === 'move' || op.op === 'copy' ? [op.from, op.to] : [op.path];
    const bytes = op.op === 'commit' ? op.size : 0;
    return scheduler
      .submit({
        namespace: a.userId,
        paths,
        bytes,
        run: async (): Promise<OpResult> => {
          metrics.queueDepth.set(scheduler.depth);
          switch (op.op) {
            case 'mkdir':
              return store.mkdir(w, op.path);
            case 'delete':
              return store.remove(w, op.path, op.baseRevision);
            case 'move':
              return store.move(w, op.from, op.to);
            case 'copy':
              return store.copy(w, op.from, op.to);
            case 'commit': {
              if (!op.transferId)
                return store.linkObject(w, op.path, op.sha256, op.size, op.mtimeMs, op.baseRevision);
              const { t, file } = await transfers.complete(a, op.transferId);
              if (t.sha256 !== op.sha256 || t.size !== op.size || t.path !== op.path) {
                throw new ApiError('BAD_REQUEST', 'commit does not match the transfer (path, size, sha256)');
              }
              try {
                const res = await store.writeFile(
                  w,
                  op.path,
                  { file, size: t.size },
                  t.sha256,
                  op.mtimeMs,
                  op.baseRevision,
                );
                await transfers.remove(t.id);
                return res;
              } catch (e) {
                if (e instanceof ApiError && e.code === 'HASH_MISMATCH') await transfers.remove(t.id);
                throw e;
              }
            }
          }
        },
      })
      .catch((e: unknown): OpResult => {
        const err = toApiError(e);
        if (err.status >= 500) log.error({ err: e }, 'operation failed');
        return { status: 'error', error: errorBody(err).error };
      })
      .finally(() => metrics.queueDepth.set(scheduler.depth));
  };

  // ---------------------------------------------------------------- routes

  const route = (
    doc: RouteDoc,
    handler: (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>,
    bodyLimit?: number,
    scope: FastifyInstance = app,
  ): void => {
    docs.push(doc);
    scope.route({ method: doc.method as 'GET', url: doc.url, handler, ...(bodyLimit ? { bodyLimit } : {}) });
  };

  route(
    { method: 'GET', url: '/healthz', summary: 'Liveness', auth: 'none', response: HealthResponse },
    async () => ({
      status: 'ok',
      version: SERVER_VERSION,
    }),
  );
  route(
    {
      method: 'GET',
      url: '/metrics',
      summary: 'Prometheus metrics',
      auth: 'none',
      binaryResponse: 'text/plain',
    },
    async (_req, reply) => {
      metrics.queueDepth.set(scheduler.depth);
      void reply.header('content-type', metrics.registry.contentType);
      return metrics.registry.metrics();
    },
  );
  route({ method: 'GET', url: '/openapi.json', summary: 'This document', auth: 'none' }, async () =>
    openApi(docs),
  );

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
      requireAdmin(req);
      const body = parse(InviteRequest, req.body);
      const invite = newInvite();
      const now = Date.now();
      const expiresMs =
        now + (body.ttlHours !== undefined ? Math.round(body.ttlHours * 3600_000) : config.inviteTtlMs);
      meta.addInvite(hashSecret(invite), body.user, now, expiresMs);
      void reply.code(201);
      return { user: body.user, invite, expiresMs };
    },
  );

  const enrolDevice = async (
    user: string,
    deviceName: string,
  ): Promise<{ token: string; deviceId: string }> => {
    await store.ensureNamespace(user);
    const token = newToken();
    const deviceId = 'd_' + randomBytes(8).toString('hex');
    meta.addDevice({ id: deviceId, userId: user, name: deviceName }, hashSecret(token), Date.now());
    return { token, deviceId };
  };

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
      const wait = enrolFailures.blockedFor(req.ip);
      if (wait > 0) {
        void reply.header('retry-after', String(Math.ceil(wait / 1000)));
        throw new ApiError('SLOW_DOWN', 'too many refused enrolments from this address; retry later');
      }
      const body = parse(EnrolRequest, req.body);
      try {
        if (body.invite !== undefined) {
          // Used only by its own user: a refused attempt (another user's name, a wrong or
          // expired invite) changes nothing, so the rightful redeemer can still use it.
          const used = meta.consumeInvite(hashSecret(body.invite), body.user, Date.now());
          if (!used.ok && used.reason === 'expired')
            throw new ApiError('INVITE_EXPIRED', 'this invite has expired; ask for a new one');
          if (!used.ok) throw new ApiError('FORBIDDEN', 'invalid or used invite');
        } else requireAdmin(req);
      } catch (e) {
        enrolFailures.fail(req.ip);
        throw e;
      }
      const { token, deviceId } = await enrolDevice(body.user, body.deviceName);
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
        seq: meta.currentSeq(a.userId),
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
      return { user: a.userId, ...store.quota.usage(a.userId) };
    },
  );

  route(
    {
      method: 'GET',
      url: '/v1/list',
      summary: 'List a folder',
      auth: 'device',
      query: ListQuery,
      response: ListResponse,
    },
    async (req) => {
      const a = auth(req);
      const q = parse(ListQuery, req.query);
      const seq = meta.currentSeq(a.userId);
      const entries = store.list(a.userId, q.path, q.recursive === '1' || q.recursive === 'true');
      return { entries, seq };
    },
  );

  route(
    {
      method: 'GET',
      url: '/v1/stat',
      summary: 'One entry',
      auth: 'device',
      query: PathQuery,
      response: EntryInfo,
    },
    async (req) => entryAt(ctx, stat, req, PathQuery).e,
  );

  route(
    {
      method: 'GET',
      url: '/v1/files',
      summary: 'Download a file (Range supported)',
      auth: 'device',
      query: PathQuery,
      binaryResponse: 'application/octet-stream',
    },
    async (req, reply) => {
      const { a, e } = entryAt(ctx, stat, req, PathQuery, 'file');
      const range = parseRange(req.headers.range, e.size);
      const { stream } = await store.openRead(a.userId, e, range && e.size > 0 ? range : undefined);
      fileHeaders(reply, e);
      void reply.header('accept-ranges', 'bytes');
      if (range) {
        void reply
          .code(206)
          .header('content-range', `bytes ${range.start}-${range.end}/${e.size}`)
          .header('content-length', String(range.end - range.start + 1));
      } else void reply.header('content-length', String(e.size));
      void reply.type('application/octet-stream');
      return reply.send(Readable.from(stream));
    },
  );

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
      const results = await Promise.all(body.ops.map((op) => runOp(a, op)));
      return { results };
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
    async (req, reply) => {
      const a = auth(req);
      const bytes = binaryBody(req);
      // Under a quota, the entries are admitted as they are inflated: a compressed bundle is
      // refused at the first entry that takes the running total (each entry's size less the
      // file it replaces) past what is left, before the rest is expanded.
      const left = store.quota.remaining(a.userId);
      if (left !== Infinity) {
        let growth = 0;
        await scanBundleEntries(bytes, (h) => {
          growth += store.growthAt(a.userId, h.path, h.size);
          if (growth > left) throw store.quota.exceeded(a.userId, growth);
        });
      }
      const bundle = decodeBundle(bytes);
      for (const e of bundle.entries) checkNewPath(e.path);
      admit(reply, bundle.entries.length);
      // One scheduled operation for the whole bundle: it waits for every earlier operation on
      // any of its paths (stop-and-wait) and is written and committed as one batch.
      const w = writer(a);
      const results = await scheduler
        .submit({
          namespace: a.userId,
          paths: bundle.entries.map((e) => e.path),
          bytes: 0,
          run: () =>
            store.writeFiles(
              w,
              bundle.entries.map((e) => ({
                path: e.path,
                bytes: e.content,
                sha256: e.sha256,
                mtimeMs: e.mtimeMs,
                base: e.rev,
              })),
            ),
        })
        .catch((err: unknown): OpResult[] => {
          // A bundle over the quota is refused whole, as the request's answer (507).
          if (err instanceof ApiError && err.code === 'QUOTA_EXCEEDED') throw err;
          const error = errorBody(toApiError(err)).error;
          return bundle.entries.map(() => ({ status: 'error', error }));
        });
      return { results: bundle.entries.map((e, i) => ({ path: e.path, result: results[i]! })) };
    },
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
      const entries: BundleEntry[] = [];
      // Every requested path is either an entry or a deferred record (in the body: a list of
      // thousands of paths once outgrew the clients' 16 KiB header limit). Room for a record
      // per path is kept, so the answer never exceeds the bundle limit.
      const deferred: BundleDeferred[] = [];
      let used = BUNDLE_OVERHEAD + BUNDLE_DEFERRED_RECORD_SIZE * body.paths.length;
      for (const [index, p] of body.paths.entries()) {
        const e = store.stat(a.userId, p);
        if (!e || e.kind !== 'file') {
          deferred.push({ index, reason: 'absent' });
          continue;
        }
        if (e.tier === 'large' || !e.sha256) {
          deferred.push({ index, reason: 'large' });
          continue;
        }
        const cost = bundleEntrySize(p, e.revision, e.size);
        if (used + cost > MAX_BUNDLE_BYTES) {
          deferred.push({ index, reason: 'later' });
          continue;
        }
        const content = await store.readAll(a.userId, e);
        if (content.byteLength !== e.size || sha256Hex(content) !== e.sha256) {
          deferred.push({ index, reason: 'changed' }); // changed while reading: fetch again
          continue;
        }
        used += cost;
        entries.push({ path: p, rev: e.revision, mtimeMs: e.mtimeMs, sha256: e.sha256, content });
      }
      let out = encodeBundle(entries, { deferred });
      if (body.compress !== false && entries.length > 0) {
        const packed = encodeBundle(entries, { compress: true, deferred });
        if (packed.byteLength <= out.byteLength * 0.9) out = packed;
      }
      void reply.type('application/octet-stream');
      return reply.send(Buffer.from(out.buffer, out.byteOffset, out.byteLength));
    },
  );

  route(
    {
      method: 'POST',
      url: '/v1/transfers',
      summary: 'Open a large-file transfer (a size above maxFileBytes: 413 FILE_TOO_LARGE)',
      auth: 'device',
      body: TransferCreateRequest,
      response: TransferState,
    },
    async (req, reply) => {
      const a = auth(req);
      const body = parse(TransferCreateRequest, req.body);
      checkNewPath(body.path);
      // Refused when opened, not after the upload: the declared size, with the user's other
      // open transfers, must fit in what the quota leaves (the file it replaces is freed).
      store.quota.check(
        a.userId,
        store.growthAt(a.userId, body.path, body.size) + meta.openTransferBytes(a.userId, body.path),
      );
      const id = randomBytes(16).toString('hex');
      const st = await transfers.create(
        a,
        { id, path: body.path, size: body.size, sha256: body.sha256, mtimeMs: body.mtimeMs },
        Date.now(),
      );
      void reply.code(201);
      return st;
    },
  );
  const TransferParams = z.object({ id: z.string().regex(/^[0-9a-f]{32}$/) });
  route(
    {
      method: 'GET',
      url: '/v1/transfers/:id',
      summary: 'Transfer state (acknowledged ranges)',
      auth: 'device',
      response: TransferState,
    },
    async (req) => {
      const a = auth(req);
      const { id } = parse(TransferParams, req.params);
      return transfers.state(transfers.get(a, id));
    },
  );
  route(
    { method: 'DELETE', url: '/v1/transfers/:id', summary: 'Abandon a transfer', auth: 'device' },
    async (req, reply) => {
      const a = auth(req);
      const { id } = parse(TransferParams, req.params);
      transfers.get(a, id);
      await transfers.remove(id);
      return reply.code(204).send();
    },
  );
  route(
    {
      method: 'PUT',
      url: '/v1/transfers/:id/blocks',
      summary: 'Send one transfer block (synchronous ack)',
      auth: 'device',
      binaryBody: 'application/octet-stream',
      response: BlockAck,
    },
    async (req) => {
      const a = auth(req);
      const { id } = parse(TransferParams, req.params);
      const bytes = binaryBody(req);
      const peek = peekTransferBlockHeader(bytes);
      if (peek && peek.transferId !== id)
        throw new ApiError('BAD_REQUEST', 'block belongs to another transfer');
      return transfers.block(a, bytes);
    },
    BLOCK_HEADER_SIZE + MAX_BLOCK_PAYLOAD + 1024,
  );

  docs.push({
    method: 'GET',
    url: '/v1/stream',
    summary: 'WebSocket: send transfer blocks (binary), receive BlockAck/BlockNack (JSON)',
    auth: 'device',
    websocket: true,
    response: BlockAck,
  });
  app.get('/v1/stream', { websocket: true }, (socket, req) => {
    const a = auth(req);
    if (!devices.track(a.deviceId, socket)) return;
    socket.on('message', (data: Buffer, isBinary: boolean) => {
      const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      const peek = isBinary ? peekTransferBlockHeader(bytes) : undefined;
      const work = isBinary
        ? transfers.block(a, bytes)
        : Promise.reject(new ApiError('BAD_REQUEST', 'send blocks as binary messages'));
      work.then(
        (ack) => socket.send(JSON.stringify(ack)),
        (e: unknown) => {
          const err = toApiError(e);
          const nack: BlockNack = {
            type: 'block-error',
            ...(peek ? { transferId: peek.transferId, seq: peek.seq } : {}),
            error: errorBody(err).error,
          };
          socket.send(JSON.stringify(nack));
        },
      );
    });
  });

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
          return await deltaUpload(req);
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
  const deltaUpload = async (req: FastifyRequest): Promise<OpResult> => {
    const a = auth(req);
    const q = parse(DeltaUploadQuery, req.query);
    checkNewPath(q.path);
    const contentLength = req.headers['content-length'] ? Number(req.headers['content-length']) : undefined;
    const { header: c, delta: deltaStream } = await openDeltaUpload(streamBody(req), contentLength, {
      maxDeltaBytes: config.maxDeltaBytes,
      maxFileBytes: config.maxFileBytes,
    });
    const found = store.findContent(a.userId, q.path, c.baseSha256);
    if (!found)
      throw new ApiError(
        'DELTA_BASE_UNKNOWN',
        'the server does not have the base content; upload the whole file',
      );
    // The patch is capped at the declared target size, so the quota is checked before it runs.
    store.quota.check(a.userId, store.growthAt(a.userId, q.path, c.targetSize));
    const baseEntry = found.entry;
    let old: OldFileReader | Uint8Array;
    let release = (): void => undefined;
    if (baseEntry && baseEntry.tier !== 'large') old = await store.readAll(a.userId, baseEntry);
    else {
      const size = baseEntry?.size ?? found.objectSize ?? 0;
      const staged = await store.stageObject(c.baseSha256, size);
      release = staged.release;
      const fh = await fsp.open(staged.file, 'r');
      const prev = release;
      let closed = false;
      release = () => {
        if (closed) return;
        closed = true;
        fh.close().catch(() => undefined);
        prev();
      };
      old = {
        size,
        read: async (offset, length) => {
          const buf = Buffer.alloc(length);
          let got = 0;
          while (got < length) {
            const { bytesRead } = await fh.read(buf, got, length - got, offset + got);
            if (bytesRead === 0) break;
            got += bytesRead;
          }
          return buf.subarray(0, got);
        },
      };
    }
    const tmp = store.tempFile();
    try {
      const { size } = await patchToFile(old, deltaStream, c, tmp);
      release();
      return await scheduler.submit({
        namespace: a.userId,
        paths: [q.path],
        bytes: size,
        run: () =>
          store.writeFile(
            writer(a),
            q.path,
            { file: tmp, size },
            c.targetSha256,
            q.mtimeMs,
            q.baseRevision,
            true,
          ),
      });
    } finally {
      release();
      await fsp.rm(tmp, { force: true });
    }
  };

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
      const { a, e } = entryAt(ctx, stat, req, PathQuery);
      const sig = await store.signatureOf(a.userId, e);
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
      const { a, q, e } = entryAt(ctx, stat, req, DeltaDownloadQuery, 'content');
      // Written to a temporary file and streamed from there: never a file-sized buffer.
      const out = await deltaDownload(store, a.userId, e, sig, q.baseSha256);
      fileHeaders(reply, e);
      void reply.type('application/octet-stream').header('content-length', String(out.length));
      return reply.send(out.body);
    },
    config.maxSignatureBytes,
  );

  route(
    {
      method: 'GET',
      url: '/v1/changes',
      summary: 'Changes after a cursor (polling)',
      auth: 'device',
      query: ChangesQuery,
      response: ChangesResponse,
    },
    async (req) => {
      const a = auth(req);
      const q = parse(ChangesQuery, req.query);
      const seq = meta.currentSeq(a.userId);
      if (q.cursor > seq) return { changes: [], cursor: seq, hasMore: false, reset: true };
      const changes = meta.changesSince(a.userId, q.cursor, q.limit);
      const cursor = changes.at(-1)?.seq ?? q.cursor;
      return { changes, cursor, hasMore: cursor < seq, reset: false };
    },
  );

  docs.push({
    method: 'GET',
    url: '/v1/feed',
    summary: 'WebSocket change feed: ?cursor=N, then hello / changes / reset messages',
    auth: 'device',
    websocket: true,
  });
  app.get('/v1/feed', { websocket: true }, (socket, req) => {
    const a = auth(req);
    if (!devices.track(a.deviceId, socket)) return;
    const cursorRaw = (req.query as Record<string, unknown>).cursor ?? '0';
    const parsed = z.coerce.number().int().min(0).safeParse(cursorRaw);
    const send = (m: FeedServerMessage): void => socket.send(JSON.stringify(m));
    if (!parsed.success) {
      send({
        type: 'error',
        error: { code: 'BAD_REQUEST', message: 'cursor must be a non-negative integer' },
      });
      socket.close(1008, 'bad cursor');
      return;
    }
    metrics.feedClients.inc();
    let sent = parsed.data;
    const seqNow = meta.currentSeq(a.userId);
    send({ type: 'hello', user: a.userId, seq: seqNow, cursor: Math.min(sent, seqNow) });
    if (sent > seqNow) {
      send({ type: 'reset', cursor: seqNow });
      sent = seqNow;
    }
    let busy = false;
    let again = false;
    const pump = (): void => {
      if (busy) {
        again = true;
        return;
      }
      busy = true;
      try {
        do {
          again = false;
          for (;;) {
            if (socket.readyState !== socket.OPEN) return;
            const page = meta.changesSince(a.userId, sent, 500);
            const last = page.at(-1);
            if (!last) break;
            send({ type: 'changes', changes: page, cursor: last.seq });
            sent = last.seq;
          }
        } while (again);
      } finally {
        busy = false;
      }
    };
    const key = `changes:${a.userId}`;
    hub.on(key, pump);
    socket.on('message', (data: Buffer) => {
      const msg = FeedClientMessage.safeParse(safeJson(data.toString('utf8')));
      if (!msg.success) send({ type: 'error', error: { code: 'BAD_REQUEST', message: 'unknown message' } });
    });
    socket.on('close', () => {
      hub.off(key, pump);
      metrics.feedClients.dec();
    });
    pump();
  });

  route(
    {
      method: 'POST',
      url: '/v1/merkle',
      summary: 'Merkle hashes of entries and their children (top-down check)',
      auth: 'device',
      body: MerkleRequest,
      response: MerkleResponse,
    },
    async (req) => {
      const a = auth(req);
      const body = parse(MerkleRequest, req.body);
      return { nodes: body.paths.map((p) => merkle.node(a.userId, p)) };
    },
  );

  const shares = config.shares.enabled
    ? new ShareService({
        config: config.shares,
        dataDir: config.dataDir,
        store,
        scheduler,
        log,
        ...(options.shares?.wrap ? { wrap: options.shares.wrap } : {}),
        waitForSeq: (user, seq, signal) =>
          new Promise<void>((resolve) => {
            const check = (): void => {
              if (meta.currentSeq(user) <= seq && !signal.aborted) return;
              hub.off(`changes:${user}`, check);
              signal.removeEventListener('abort', check);
              resolve();
            };
            hub.on(`changes:${user}`, check);
            signal.addEventListener('abort', check);
            check();
          }),
      })
    : undefined;
  if (shares) registerShareRoutes({ route, auth, parse }, shares);
  registerDeviceRoutes({ route, auth, parse }, meta, devices);

  let gcTimer: NodeJS.Timeout | undefined;
  if (config.gcIntervalMs > 0) {
    gcTimer = setInterval(() => {
      store.gc(config.gcGraceMs).catch((err: unknown) => log.error({ err }, 'garbage collection failed'));
    }, config.gcIntervalMs);
    gcTimer.unref();
  }

  const peerLink = config.peer ? await registerPeerLink(app, config.peer, config.dataDir, log) : undefined;
  const peerRouter =
    peerLink && config.peer?.routing.enabled
      ? new PeerRouter({
          link: peerLink,
          endpoints: config.shares.endpoints,
          intervalMs: config.peer.routing.intervalMs,
          probeBytes: config.peer.routing.probeBytes,
          writeTimeoutMs: config.peer.routing.writeTimeoutMs,
          log,
        })
      : undefined;
  if (peerRouter && shares) shares.providerRoute = peerRouter.route;
  const address = await app.listen({ host: config.host, port: config.port });
  await shares?.start();
  peerRouter?.start();
  const url = address.replace('[::1]', 'localhost');
  log.info({ url, dataDir: config.dataDir, objectTier: config.objectTier.type }, 'weft proxy listening');
  if (!config.adminToken && !config.adminTokenSha256)
    log.info('no adminToken configured: a random one was generated for this run');

  let closed = false;
  return {
    url,
    get adminToken(): string {
      if (adminToken === undefined)
        throw new Error('this server was given only the admin token’s hash (adminTokenSha256)');
      return adminToken;
    },
    config,
    app,
    store,
    scheduler,
    ...(peerLink ? { peerLink } : {}),
    ...(peerRouter ? { peerRouter } : {}),
    gc: (graceMs?: number) => store.gc(graceMs ?? config.gcGraceMs),
    enrol: enrolDevice,
    ...(shares ? { shares } : {}),
    async close() {
      if (closed) return;
      closed = true;
      if (gcTimer) clearInterval(gcTimer);
      await peerRouter?.stop();
      await shares?.close();
      for (const t of batched.values()) clearTimeout(t);
      for (const c of app.websocketServer?.clients ?? []) c.terminate();
      slowClients.close();
      await app.close();
      await fs.close();
      await objects.close?.();
      meta.close();
    },
  };
}

/** One `bytes=` range; undefined for none; RANGE_NOT_SATISFIABLE when it cannot be served. */
export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === ''))
    throw new ApiError('RANGE_NOT_SATISFIABLE', 'only one bytes=a-b range is supported', { size });
  let start: number;
  let end: number;
  if (m[1] === '') {
    const n = Number(m[2]);
    start = Math.max(0, size - n);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (!Number.isSafeInteger(start) || start >= size || end < start) {
    throw new ApiError('RANGE_NOT_SATISFIABLE', `range not satisfiable for ${size} bytes`, { size });
  }
  return { start, end };
}

function openApi(docs: RouteDoc[]): unknown {
  const paths: Record<string, Record<string, unknown>> = {};
  const schema = (s: z.ZodType): unknown => z.toJSONSchema(s, { unrepresentable: 'any', io: 'input' });
  for (const d of docs) {
    const url = d.url.replace(/:(\w+)/g, '{$1}');
    const op: Record<string, unknown> = {
      summary: d.summary,
      ...(d.websocket ? { description: 'WebSocket upgrade (GET with Upgrade: websocket).' } : {}),
      security: d.auth === 'device' ? [{ device: [] }] : d.auth === 'admin' ? [{ admin: [] }] : [],
      responses: {
        '200': d.binaryResponse
          ? {
              description: d.responseDescription ?? 'OK',
              content: { [d.binaryResponse]: { schema: { type: 'string', format: 'binary' } } },
            }
          : {
              description: 'OK',
              ...(d.response ? { content: { 'application/json': { schema: schema(d.response) } } } : {}),
            },
        default: { description: 'Error', content: { 'application/json': { schema: schema(ApiErrorBody) } } },
      },
    };
    const params: unknown[] = [];
    for (const m of d.url.matchAll(/:(\w+)/g))
      params.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } });
    if (d.query) {
      const js = schema(d.query) as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, s] of Object.entries(js.properties ?? {})) {
        params.push({ name, in: 'query', required: js.required?.includes(name) ?? false, schema: s });
      }
    }
    if (params.length) op.parameters = params;
    if (d.body)
      op.requestBody = { required: true, content: { 'application/json': { schema: schema(d.body) } } };
    if (d.binaryBody)
      op.requestBody = {
        required: true,
        content: { [d.binaryBody]: { schema: { type: 'string', format: 'binary' } } },
      };
    paths[url] = { ...(paths[url] ?? {}), [d.method.toLowerCase()]: op };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Weft proxy API', version: SERVER_VERSION, description: 'See docs/formats/api.md' },
    components: {
      securitySchemes: {
        device: { type: 'http', scheme: 'bearer', description: 'Device token from POST /v1/enrol' },
        admin: { type: 'http', scheme: 'bearer', description: 'Admin token from the server configuration' },
      },
    },
    paths,
  };
}

export type { ErrorCode };
