/**
 * HTTP + WebSocket client of the Weft proxy API (docs/formats/api.md). Every response body
 * is validated with the shared schemas of @weft/wire; failures become RemoteError with the
 * server's error code, or OfflineError when the server could not be reached (both, and the
 * fetch and status checks behind them, in http-errors.ts).
 */
import type { z } from 'zod/v4';
import {
  API_PREFIX,
  BlockAck,
  type BundleDeferredReason,
  type BundleUploadResponse,
  BundleUploadResponseCheck,
  ChangesResponse,
  ClusterInstancesResponse,
  DeviceListResponse,
  EnrolResponse,
  EntryInfo,
  type FeedServerMessage,
  type FileOp,
  HEADER_REVISION,
  HEADER_SHA256,
  ListResponse,
  type MerkleNode,
  MerkleResponse,
  OpResult,
  OpsResponse,
  TransferState,
  UsageResponse,
  CostResponse,
  StorageHealthResponse,
  WhoAmIResponse,
  DeletedResponse,
  VersionsResponse,
  decodeBundle,
  decodeDeltaContainer,
  type DecodedBundle,
  type DecodedDeltaContainer,
  parseServerTiming,
  SERVER_TIMING_HEADER,
} from '@weft/wire';
import type { Disposable } from '../lifecycle.ts';
import { type ApiRequest, ApiRequests, apiUrl } from './api-requests.ts';
import { RemoteError, ensureOk, parseJson, safeFetch } from './http-errors.ts';
import { openFeedSocket } from './feed-socket.ts';
import { ByteRateLimiter } from './rate-limit.ts';
import type { ListPageRequest, RemoteStore, RequestTiming } from './remote-store.ts';
import type { ServerPool } from './server-pool.ts';

export interface ProxyClientOptions {
  readonly baseUrl: string;
  readonly token: string;
  /** Count of every request made, for benchmarks and savings figures. */
  readonly onRequest?: (info: { method: string; route: string; bytesOut: number; bytesIn: number }) => void;
  /** Upload limit in bytes per second (request bodies). */
  readonly uploadBytesPerSecond?: number;
  /** Download limit in bytes per second (response bodies). */
  readonly downloadBytesPerSecond?: number;
  /**
   * Several proxy instances serving this storage (server-pool.ts): requests go to the pool's
   * current one, and one that cannot be reached (or answers 502/503/504 twice) is sent again
   * to the next. Absent: `baseUrl` only.
   */
  readonly servers?: ServerPool;
}

type Schema<T> = { parse(input: unknown): T };

export class ProxyClient implements RemoteStore {
  readonly servers: ServerPool | undefined;
  bytesReceived = 0;

  private upLimit: ByteRateLimiter | undefined;
  private downLimit: ByteRateLimiter | undefined;
  /** Sends each request: retries, pushback and failover across the pool (api-requests.ts). */
  private readonly http: ApiRequests;

  constructor(options: ProxyClientOptions) {
    this.servers = options.servers;
    this.http = new ApiRequests({
      baseUrl: options.baseUrl,
      token: options.token,
      ...(options.servers ? { servers: options.servers } : {}),
      upLimit: () => this.upLimit,
      ...(options.onRequest ? { onRequest: options.onRequest } : {}),
    });
    this.upLimit = options.uploadBytesPerSecond
      ? new ByteRateLimiter(options.uploadBytesPerSecond)
      : undefined;
    this.downLimit = options.downloadBytesPerSecond
      ? new ByteRateLimiter(options.downloadBytesPerSecond)
      : undefined;
  }

  /** Requests answered (after any retries). */
  get requests(): number {
    return this.http.requests;
  }

  /** Times the server asked us to slow down and we waited. */
  get busyWaits(): number {
    return this.http.busyWaits;
  }

  get bytesSent(): number {
    return this.http.bytesSent;
  }

  /** The instance requests go to now (the pool's current one, else the configured URL). */
  get baseUrl(): string {
    return this.http.baseUrl;
  }

  /**
   * Change the bandwidth limits at once (bytes per second; 0: none). Transfers under way
   * take the new limit from their next chunk on; the settings screen calls this (issue #19).
   */
  setLimits(limits: { uploadBytesPerSecond: number; downloadBytesPerSecond: number }): void {
    const make = (bps: number): ByteRateLimiter | undefined =>
      bps > 0 ? new ByteRateLimiter(bps) : undefined;
    if (this.upLimit?.bytesPerSecond !== limits.uploadBytesPerSecond)
      this.upLimit = make(limits.uploadBytesPerSecond);
    if (this.downLimit?.bytesPerSecond !== limits.downloadBytesPerSecond)
      this.downLimit = make(limits.downloadBytesPerSecond);
  }

  /** The limits in force (bytes per second; 0: none). */
  limits(): { uploadBytesPerSecond: number; downloadBytesPerSecond: number } {
    return {
      uploadBytesPerSecond: this.upLimit?.bytesPerSecond ?? 0,
      downloadBytesPerSecond: this.downLimit?.bytesPerSecond ?? 0,
    };
  }

  private request(method: string, route: string, options?: ApiRequest): Promise<Response> {
    return this.http.send(method, route, options);
  }

  private async parseJson<T>(res: Response, schema: Schema<T>): Promise<T> {
    return parseJson(res, schema, async (r) => Buffer.from(await this.bodyBytes(r)).toString('utf8'));
  }

  /** Read a whole response body, counting it and honouring the download limit. */
  private async bodyBytes(res: Response): Promise<Uint8Array> {
    const parts: Uint8Array[] = [];
    let n = 0;
    for await (const chunk of this.limitDown(res.body as unknown as AsyncIterable<Uint8Array> | null)) {
      parts.push(chunk);
      n += chunk.byteLength;
    }
    return Buffer.concat(parts, n);
  }

  private limitDown(body: AsyncIterable<Uint8Array> | null): AsyncIterable<Uint8Array> {
    if (!body) return (async function* () {})();
    return this.countedBody(body);
  }

  private async *countedBody(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
    for await (const chunk of body) {
      this.bytesReceived += chunk.byteLength;
      if (this.downLimit) await this.downLimit.take(chunk.byteLength);
      yield chunk;
    }
  }

  /** Enrol a device: admin token or invite. Returns the device token (shown once). */
  static async enrol(
    baseUrl: string,
    request: { user: string; deviceName: string; adminToken?: string; invite?: string },
  ): Promise<z.infer<typeof EnrolResponse>> {
    const res = await safeFetch(`${baseUrl.replace(/\/+$/, '')}${API_PREFIX}/enrol`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(request.adminToken ? { authorization: `Bearer ${request.adminToken}` } : {}),
      },
      body: JSON.stringify({
        user: request.user,
        deviceName: request.deviceName,
        ...(request.invite ? { invite: request.invite } : {}),
      }),
    });
    return parseJson(res, EnrolResponse);
  }

  /**
   * The proxy instances serving this storage, as the instance at `url` lists them (`GET
   * /v1/cluster/instances`); sent there only — never moved to another instance — because it
   * is the probe of that instance (server-watch.ts). Undefined from an older server (404).
   */
  async clusterInstancesAt(url: string, signal?: AbortSignal): Promise<ClusterInstancesResponse | undefined> {
    const res = await safeFetch(`${url.replace(/\/+$/, '')}${API_PREFIX}/cluster/instances`, {
      headers: { authorization: `Bearer ${this.http.token}` },
      ...(signal ? { signal } : {}),
    });
    if (res.status === 404) {
      await res.body?.cancel();
      return undefined;
    }
    return parseJson(res, ClusterInstancesResponse);
  }

  async whoami(): Promise<z.infer<typeof WhoAmIResponse>> {
    return this.parseJson(await this.request('GET', '/whoami'), WhoAmIResponse);
  }

  /**
   * This user's storage (`GET /v1/usage`): logical bytes used and the quota (`limitBytes`
   * null: unlimited). Writes refused with QUOTA_EXCEEDED wait until this shows room.
   */
  async usage(): Promise<UsageResponse> {
    return this.parseJson(await this.request('GET', '/usage'), UsageResponse);
  }

  /** This month's bill (`GET /v1/cost`, docs/cost.md): this user's and the proxy's, so far and projected. */
  async cost(): Promise<CostResponse> {
    return this.parseJson(await this.request('GET', '/cost'), CostResponse);
  }

  /** How this user's files stand on a redundant object tier (`GET /v1/storage/health`, docs/redundancy.md). */
  async storageHealth(): Promise<StorageHealthResponse> {
    return this.parseJson(await this.request('GET', '/storage/health'), StorageHealthResponse);
  }

  /** This user's devices (`current`: this one). */
  async listDevices(): Promise<DeviceListResponse> {
    return this.parseJson(await this.request('GET', '/devices'), DeviceListResponse);
  }

  /**
   * Revoke one of this user's devices (this one: sign out). Its token stops working at once;
   * an unknown id, or another user's device, is a RemoteError 404.
   */
  async revokeDevice(deviceId: string): Promise<void> {
    const res = await this.request('DELETE', `/devices/${encodeURIComponent(deviceId)}`);
    await ensureOk(res);
    await res.body?.cancel();
  }

  /** A file's versions, the current one first (`GET /v1/versions`); NOT_FOUND when it has none. */
  async versions(path: string): Promise<VersionsResponse> {
    return this.parseJson(await this.request('GET', '/versions', { query: { path } }), VersionsResponse);
  }

  /** Files deleted below `dir` ('' = everywhere) that can still be restored (`GET /v1/deleted`). */
  async deletedFiles(dir: string, limit?: number): Promise<DeletedResponse> {
    return this.parseJson(
      await this.request('GET', '/deleted', { query: { path: dir, limit } }),
      DeletedResponse,
    );
  }

  /** Make a kept version current again: a write the feed brings to every device. */
  async restoreVersion(path: string, version: number): Promise<OpResult> {
    return this.parseJson(
      await this.request('POST', '/versions/restore', { json: { path, version } }),
      OpResult,
    );
  }

  /** A kept version's bytes (streaming). */
  async downloadVersion(
    path: string,
    version: number,
  ): Promise<{ body: AsyncIterable<Uint8Array>; size: number; sha256: string; mtimeMs: number }> {
    const res = await this.request('GET', '/versions/content', { query: { path, version } });
    await ensureOk(res);
    return {
      body: this.limitDown(res.body as unknown as AsyncIterable<Uint8Array> | null),
      size: Number(res.headers.get('content-length') ?? 0),
      sha256: res.headers.get('x-weft-sha256') ?? '',
      mtimeMs: Number(res.headers.get('x-weft-mtime') ?? 0),
    };
  }

  async list(path = '', recursive = true): Promise<ListResponse> {
    return this.parseJson(
      await this.request('GET', '/list', { query: { path, recursive: recursive ? '1' : '0' } }),
      ListResponse,
    );
  }

  async listPage(path: string, page: ListPageRequest): Promise<ListResponse> {
    const query = { path, recursive: '1', limit: page.limit, after: page.after, seq: page.seq };
    return this.parseJson(await this.request('GET', '/list', { query }), ListResponse);
  }

  async stat(path: string): Promise<EntryInfo | undefined> {
    const res = await this.request('GET', '/stat', { query: { path } });
    if (res.status === 404) {
      await res.body?.cancel();
      return undefined;
    }
    return this.parseJson(res, EntryInfo);
  }

  /** Download a file (optionally a byte range); the body streams. */
  async download(
    path: string,
    range?: { offset: number; length?: number },
    signal?: AbortSignal,
  ): Promise<{ body: AsyncIterable<Uint8Array>; revision: string; sha256: string; size: number }> {
    const headers: Record<string, string> = {};
    if (range)
      headers.range = `bytes=${range.offset}-${range.length === undefined ? '' : range.offset + range.length - 1}`;
    const res = await this.request('GET', '/files', { query: { path }, headers, signal });
    await ensureOk(res);
    const body = res.body as unknown as AsyncIterable<Uint8Array> | null;
    return {
      body: this.limitDown(body),
      revision: res.headers.get('x-weft-revision') ?? '',
      sha256: res.headers.get('x-weft-sha256') ?? '',
      size: Number(res.headers.get('content-length') ?? 0),
    };
  }

  async ops(ops: readonly FileOp[]): Promise<OpResult[]> {
    return (await this.parseJson(await this.request('POST', '/ops', { json: { ops } }), OpsResponse)).results;
  }

  async uploadBundle(bundle: Uint8Array, timing?: RequestTiming): Promise<BundleUploadResponse['results']> {
    // Checked by hand when every result is applied (wire fast-check.ts: zod cost a few µs a
    // file, issue #16), by the schema otherwise; a malformed answer is refused either way.
    const res = await this.request('POST', '/bundles', { body: bundle });
    if (timing) {
      const serverMs = parseServerTiming(res.headers.get(SERVER_TIMING_HEADER));
      if (serverMs !== undefined) timing.serverMs = serverMs;
    }
    return (await this.parseJson(res, BundleUploadResponseCheck)).results;
  }

  /**
   * Ask for small files in one bundle. Every requested path comes back either as an entry
   * or as a deferred one with its reason (from a version-2 bundle; a version-1 bundle from an
   * older server leaves them unstated, which reads as `later`). An answer that does not
   * account for each requested path exactly once is refused.
   */
  async downloadBundle(
    paths: readonly string[],
    compress = true,
  ): Promise<{ bundle: DecodedBundle; deferred: { path: string; reason: BundleDeferredReason }[] }> {
    const res = await this.request('POST', '/bundles/download', { json: { paths, compress } });
    await ensureOk(res);
    const bundle = decodeBundle(await this.bodyBytes(res));
    const malformed = (why: string): RemoteError =>
      new RemoteError(502, 'UNKNOWN', `malformed bundle download answer: ${why}`);
    const requested = new Set(paths);
    const got = new Set<string>();
    for (const e of bundle.entries) {
      if (!requested.has(e.path)) throw malformed(`unrequested entry ${JSON.stringify(e.path)}`);
      got.add(e.path);
    }
    if (bundle.version === 1) {
      return {
        bundle,
        deferred: paths.filter((p) => !got.has(p)).map((path) => ({ path, reason: 'later' as const })),
      };
    }
    const deferred = bundle.deferred.map((d) => {
      const path = paths[d.index];
      if (path === undefined) throw malformed(`deferred index ${d.index} of ${paths.length} paths`);
      if (got.has(path)) throw malformed(`${JSON.stringify(path)} both sent and deferred`);
      return { path, reason: d.reason };
    });
    if (got.size + deferred.length !== requested.size)
      throw malformed('not every requested path is accounted for');
    return { bundle, deferred };
  }

  async createTransfer(req: {
    path: string;
    size: number;
    sha256: string;
    mtimeMs: number;
    baseRevision?: string | null;
  }): Promise<TransferState> {
    return this.parseJson(await this.request('POST', '/transfers', { json: req }), TransferState);
  }

  async getTransfer(id: string): Promise<TransferState | undefined> {
    const res = await this.request('GET', `/transfers/${id}`);
    if (res.status === 404) {
      await res.body?.cancel();
      return undefined;
    }
    return this.parseJson(res, TransferState);
  }

  async putBlock(id: string, frame: Uint8Array): Promise<z.infer<typeof BlockAck>> {
    return this.parseJson(await this.request('PUT', `/transfers/${id}/blocks`, { body: frame }), BlockAck);
  }

  /**
   * The instance the server steers this transfer's blocks to (`state.preferred`, HyCloud
   * Eq. 7–8), only when the pool trusts it (ServerPool.steerable: already listed, up, not the
   * current one): the device token never goes to a URL that an answer alone named.
   */
  steeredUrl(state: TransferState): string | undefined {
    return this.servers?.steerable(state.preferred?.url);
  }

  async putBlockAt(url: string, id: string, frame: Uint8Array): Promise<z.infer<typeof BlockAck>> {
    return this.parseJson(
      await this.request('PUT', `/transfers/${id}/blocks`, { body: frame, at: url }),
      BlockAck,
    );
  }

  async abandonTransfer(id: string): Promise<void> {
    const res = await this.request('DELETE', `/transfers/${id}`);
    if (res.status !== 404) await ensureOk(res);
    await res.body?.cancel();
  }

  async uploadDelta(
    path: string,
    baseRevision: string,
    mtimeMs: number,
    container: Uint8Array,
    own?: readonly string[],
  ): Promise<OpResult> {
    const query = { path, baseRevision, mtimeMs, ...(own && own.length > 0 ? { own: own.join(',') } : {}) };
    return this.parseJson(await this.request('POST', '/deltas', { query, body: container }), OpResult);
  }

  async downloadDelta(
    path: string,
    baseSha256: string,
    signatureBytes: Uint8Array,
  ): Promise<DecodedDeltaContainer> {
    const res = await this.request('POST', '/files/delta', {
      query: { path, baseSha256 },
      body: signatureBytes,
    });
    await ensureOk(res);
    return decodeDeltaContainer(await this.bodyBytes(res));
  }

  /** Server-side diff (`GET /files/delta`): the server diffs against its copy of `baseSha256`. */
  async serverDelta(path: string, baseSha256: string): Promise<DecodedDeltaContainer> {
    const res = await this.request('GET', '/files/delta', { query: { path, baseSha256 } });
    await ensureOk(res);
    return decodeDeltaContainer(await this.bodyBytes(res));
  }

  /**
   * The server's rsync signature of a large file's current version (`GET /signature`): a
   * base for a delta upload when this device kept neither that version's signature nor,
   * perhaps, the version itself. `sha256` and `revision` name the version it describes.
   */
  async signature(path: string): Promise<{ bytes: Uint8Array; sha256: string; revision: string }> {
    const res = await this.request('GET', '/signature', { query: { path } });
    await ensureOk(res);
    const sha256 = res.headers.get(HEADER_SHA256) ?? '';
    const revision = res.headers.get(HEADER_REVISION) ?? '';
    if (!/^[0-9a-f]{64}$/.test(sha256) || revision === '')
      throw new RemoteError(502, 'UNKNOWN', 'signature response without its version headers');
    return { bytes: await this.bodyBytes(res), sha256, revision };
  }

  async changes(cursor: number, limit = 1000): Promise<ChangesResponse> {
    return this.parseJson(
      await this.request('GET', '/changes', { query: { cursor, limit } }),
      ChangesResponse,
    );
  }

  async merkle(paths: readonly string[]): Promise<MerkleNode[]> {
    return (await this.parseJson(await this.request('POST', '/merkle', { json: { paths } }), MerkleResponse))
      .nodes;
  }

  /**
   * Open the live change feed from `cursor`. `onMessage` gets each validated message;
   * `onClose` fires once when the socket ends for any reason. Dispose to close.
   */
  openFeed(
    cursor: number,
    onMessage: (m: FeedServerMessage) => void,
    onClose: (reason: string) => void,
  ): Disposable {
    const base = this.baseUrl;
    return openFeedSocket(
      { url: apiUrl(base, '/feed', { cursor }), base, token: this.http.token, servers: this.servers },
      onMessage,
      onClose,
    );
  }
}

export { OpResult };
export { OfflineError, RemoteError } from './http-errors.ts';
