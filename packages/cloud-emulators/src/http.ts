/**
 * What every emulator shares: an HTTP(S) server on a loopback port, routing to named
 * endpoints, fault injection applied per request, bearer-token checks against the
 * emulator's OAuth server, and the control endpoints under /__emulator/.
 */
import { once } from 'node:events';
import * as http from 'node:http';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import { type FaultDecision, FaultInjector, FaultRuleSchema } from './faults.ts';
import { OAuthServer, type OAuthPaths } from './oauth.ts';

export interface EmulatorOptions {
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** Default 0 (a free port). */
  readonly port?: number;
  /** Keep state on disk here; default in memory. */
  readonly dataDir?: string;
  /** Serve HTTPS with this certificate (PEM). */
  readonly tls?: { readonly cert: string | Buffer; readonly key: string | Buffer };
  /** A long-lived access token accepted besides those the OAuth endpoint issues. Default 'weft-emulator-token'. */
  readonly accessToken?: string;
  /** Largest request body accepted, bytes. Default 200 MiB. */
  readonly maxBodyBytes?: number;
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly headers: Record<string, string> = {},
  ) {
    super(`HTTP ${status}`);
  }
}

/** Body bytes an emulator received (uploads, request JSON) and sent (downloads, answers). */
export interface Traffic {
  requestBytes: number;
  responseBytes: number;
}

/** One request as the emulators see it. */
export class Exchange {
  readonly url: URL;
  private bodyPromise: Promise<Buffer> | undefined;
  /** Set once a response was sent (or the connection dropped). */
  done = false;

  constructor(
    readonly req: http.IncomingMessage,
    readonly res: http.ServerResponse,
    readonly fault: FaultDecision,
    base: string,
    private readonly maxBody: number,
    private readonly traffic?: Traffic,
  ) {
    this.url = new URL(req.url ?? '/', base);
  }

  get method(): string {
    return (this.req.method ?? 'GET').toUpperCase();
  }

  header(name: string): string | undefined {
    const v = this.req.headers[name.toLowerCase()];
    return Array.isArray(v) ? v.join(', ') : v;
  }

  /** The request body if a handler already read it (never starts reading). */
  bodyIfRead(): Promise<Buffer> | undefined {
    return this.bodyPromise;
  }

  body(): Promise<Buffer> {
    this.bodyPromise ??= (async () => {
      const chunks: Buffer[] = [];
      let total = 0;
      for await (const chunk of this.req as AsyncIterable<Buffer>) {
        total += chunk.byteLength;
        if (total > this.maxBody) throw new HttpError(413, { error: 'request body too large' });
        chunks.push(chunk);
      }
      if (this.traffic) this.traffic.requestBytes += total;
      return Buffer.concat(chunks);
    })();
    return this.bodyPromise;
  }

  async json(): Promise<unknown> {
    const b = await this.body();
    if (b.byteLength === 0) return undefined;
    try {
      return JSON.parse(b.toString('utf8')) as unknown;
    } catch {
      throw new HttpError(400, { error: 'request body is not valid JSON' });
    }
  }

  sendJson(status: number, value: unknown, headers: Record<string, string> = {}): Promise<void> {
    return this.send(status, Buffer.from(JSON.stringify(value)), {
      'content-type': 'application/json',
      ...headers,
    });
  }

  /** Send a response, applying the request's faults ('after' reset, mid-body reset, bandwidth). */
  async send(status: number, body: Buffer, headers: Record<string, string | string[]> = {}): Promise<void> {
    if (this.done) return;
    this.done = true;
    const { reset, bytesPerSecond } = this.fault;
    if (reset?.when === 'after') {
      this.req.socket.destroy();
      return;
    }
    this.res.writeHead(status, { 'content-length': String(body.byteLength), ...headers });
    if (this.method === 'HEAD') {
      this.res.end();
      return;
    }
    const cut = reset?.when === 'mid-body' ? Math.min(reset.afterBytes ?? 0, body.byteLength) : undefined;
    const limit = cut ?? body.byteLength;
    if (this.traffic) this.traffic.responseBytes += limit;
    const step = bytesPerSecond === undefined ? 1 << 20 : Math.max(1, Math.floor(bytesPerSecond / 10));
    for (let i = 0; i < limit; i += step) {
      const piece = body.subarray(i, Math.min(limit, i + step));
      if (!this.res.write(piece)) await once(this.res, 'drain');
      if (bytesPerSecond !== undefined) {
        await new Promise((r) => setTimeout(r, (piece.byteLength / bytesPerSecond) * 1000));
      }
    }
    if (cut !== undefined) {
      // Let what was written reach the client, then drop the connection mid-body.
      await new Promise((r) => setImmediate(r));
      this.req.socket.destroy();
      return;
    }
    this.res.end();
  }

  redirect(location: string, status = 302): Promise<void> {
    return this.send(status, Buffer.alloc(0), { location });
  }
}

export interface Route {
  /** The endpoint's name, used by fault rules. */
  readonly endpoint: string;
  /** No bearer token needed (Dropbox longpoll, pre-authenticated upload/download URLs). */
  readonly noAuth?: boolean;
  readonly handle: (x: Exchange) => Promise<void>;
}

export abstract class EmulatorServer {
  readonly faults = new FaultInjector();
  /** Request and response body bytes of the API endpoints (not /__emulator/), since start. */
  readonly traffic: Traffic = { requestBytes: 0, responseBytes: 0 };
  readonly oauth: OAuthServer;
  readonly accessToken: string;
  private server: http.Server | undefined;
  private readonly sockets = new Set<import('node:net').Socket>();
  private baseUrl = '';
  /** Requests seen, in order (endpoint and method), for wire-level assertions. */
  /**
   * Every request: endpoint, method, URL, when it arrived, and (for diagnosis) the start of
   * its Dropbox-API-Arg header or JSON body and the status answered (`fault` when injected).
   */
  readonly requestLog: {
    endpoint: string;
    method: string;
    url: string;
    time: number;
    arg?: string;
    status?: number | 'fault';
  }[] = [];
  private hooks: { endpoint: string; fn: () => void | Promise<void>; left: number }[] = [];

  constructor(
    protected readonly options: EmulatorOptions,
    oauthPaths: OAuthPaths,
  ) {
    this.accessToken = options.accessToken ?? 'weft-emulator-token';
    this.oauth = new OAuthServer(oauthPaths);
  }

  /** Base URL, e.g. http://127.0.0.1:41234 (no trailing slash). */
  get url(): string {
    return this.baseUrl;
  }

  get port(): number {
    return Number(new URL(this.baseUrl).port);
  }

  protected abstract route(x: {
    method: string;
    url: URL;
    header: (n: string) => string | undefined;
  }): Route | undefined;

  /** The provider's body for an injected or real throttling/server error. */
  protected abstract faultResponse(
    status: number,
    reason: string | undefined,
    retryAfterSeconds: number | undefined,
  ): { body: unknown; headers?: Record<string, string> };

  /** The provider's 401 for a missing or bad token. */
  protected abstract authError(expired: boolean): HttpError;

  /** Expire every change cursor issued so far (the next use gets the provider's reset/410). */
  abstract expireCursors(): void;

  /** Persist state now (when a data directory is set). */
  abstract flush(): void;

  async start(): Promise<this> {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      void this.dispatch(req, res);
    };
    const server = this.options.tls
      ? https.createServer({ cert: this.options.tls.cert, key: this.options.tls.key }, handler)
      : http.createServer(handler);
    server.keepAliveTimeout = 5_000;
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    // TLS sockets are tracked through their underlying TCP connection.
    server.listen(this.options.port ?? 0, this.options.host ?? '127.0.0.1');
    await once(server, 'listening');
    this.server = server;
    const addr = server.address() as AddressInfo;
    const host = this.options.host ?? '127.0.0.1';
    this.baseUrl = `${this.options.tls ? 'https' : 'http'}://${host}:${addr.port}`;
    return this;
  }

  async close(): Promise<void> {
    this.flush();
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  /**
   * Test-only: the next `times` (default 1) requests to `endpoint` wait for `fn` before
   * they are handled (after faults and the token check), so a test can place another
   * client's change exactly between two requests of the client under test — e.g. an edit
   * in Drive's web UI between a conditional write's metadata read and its upload.
   * Returns a function that removes the hook.
   */
  beforeRequest(
    endpoint: string,
    fn: () => void | Promise<void>,
    options: { times?: number } = {},
  ): () => void {
    const hook = { endpoint, fn, left: options.times ?? 1 };
    this.hooks.push(hook);
    return () => {
      this.hooks = this.hooks.filter((h) => h !== hook);
    };
  }

  private async runHooks(endpoint: string): Promise<void> {
    for (const h of this.hooks.filter((k) => k.endpoint === endpoint && k.left > 0)) {
      h.left -= 1;
      if (h.left === 0) this.hooks = this.hooks.filter((k) => k !== h);
      await h.fn();
    }
  }

  protected checkAuth(x: Exchange): void {
    const h = x.header('authorization');
    const m = h ? /^Bearer\s+(\S+)$/i.exec(h) : null;
    const token = m?.[1];
    if (!token) throw this.authError(false);
    if (token === this.accessToken) return;
    const state = this.oauth.checkAccessToken(token);
    if (state === 'valid') return;
    throw this.authError(state === 'expired');
  }

  private async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.baseUrl || 'http://127.0.0.1');
    const method = (req.method ?? 'GET').toUpperCase();
    const header = (n: string): string | undefined => {
      const v = req.headers[n.toLowerCase()];
      return Array.isArray(v) ? v.join(', ') : v;
    };
    if (url.pathname.startsWith('/__emulator/')) {
      const x = new Exchange(req, res, { latencyMs: 0 }, this.baseUrl, 1 << 20);
      await this.control(x).catch((e: unknown) => this.fail(x, e));
      return;
    }
    const oauthRoute = this.oauth.route(method, url);
    const route = oauthRoute ?? this.route({ method, url, header });
    const endpoint = route?.endpoint ?? 'unknown';
    const record: (typeof this.requestLog)[number] = {
      endpoint,
      method,
      url: url.pathname + url.search,
      time: Date.now(),
    };
    const apiArg = header('dropbox-api-arg');
    if (apiArg) record.arg = apiArg.slice(0, 300);
    this.requestLog.push(record);
    if (this.requestLog.length > 50_000) this.requestLog.splice(0, 10_000);
    const fault = this.faults.decide(endpoint, method);
    const x = new Exchange(
      req,
      res,
      fault,
      this.baseUrl,
      this.options.maxBodyBytes ?? 200 * 1024 * 1024,
      this.traffic,
    );
    try {
      if (fault.latencyMs > 0) await new Promise((r) => setTimeout(r, fault.latencyMs));
      if (fault.reset?.when === 'before') {
        // Read part of the request first, as a real reset mid-upload would.
        req.socket.destroy();
        return;
      }
      if (fault.status) {
        record.status = 'fault';
        await x.body().catch(() => undefined);
        const { status, reason, retryAfterSeconds, retryAfterForm } = fault.status;
        const out = this.faultResponse(status, reason, retryAfterSeconds);
        const headers: Record<string, string> = { ...out.headers };
        if (retryAfterSeconds !== undefined) {
          headers['retry-after'] =
            retryAfterForm === 'http-date'
              ? new Date(Date.now() + retryAfterSeconds * 1000).toUTCString()
              : String(retryAfterSeconds);
        }
        await x.sendJson(status, out.body, headers);
        return;
      }
      if (!route) throw new HttpError(404, { error: `no such endpoint: ${method} ${url.pathname}` });
      if (!route.noAuth && !oauthRoute) this.checkAuth(x);
      if (this.hooks.length > 0) await this.runHooks(endpoint);
      await route.handle(x);
      if (!x.done) throw new Error(`handler for ${endpoint} sent no response`);
    } catch (e) {
      await this.fail(x, e);
    } finally {
      record.status ??= res.statusCode;
      const read = x.bodyIfRead();
      if (!record.arg && read && (req.headers['content-type'] ?? '').includes('json'))
        record.arg = (await read.catch(() => Buffer.alloc(0))).subarray(0, 300).toString('utf8');
    }
  }

  private async fail(x: Exchange, e: unknown): Promise<void> {
    if (x.done || x.res.headersSent) {
      x.req.socket.destroy();
      return;
    }
    // Drain what the client is still sending so it sees our answer, not a reset.
    await x.body().catch(() => undefined);
    if (e instanceof HttpError) {
      if (typeof e.body === 'string' || Buffer.isBuffer(e.body)) {
        await x.send(e.status, Buffer.from(e.body), {
          'content-type': 'text/plain; charset=utf-8',
          ...e.headers,
        });
      } else await x.sendJson(e.status, e.body, e.headers);
      return;
    }
    const out = this.faultResponse(500, 'internal', undefined);
    await x.sendJson(500, { ...(out.body as object), detail: String(e) });
  }

  private async control(x: Exchange): Promise<void> {
    const p = x.url.pathname;
    if (p === '/__emulator/faults' && x.method === 'POST') {
      const parsed = FaultRuleSchema.safeParse(await x.json());
      if (!parsed.success)
        throw new HttpError(400, { error: 'invalid fault rule', issues: parsed.error.issues });
      this.faults.add(parsed.data);
      await x.sendJson(200, { ok: true });
    } else if (p === '/__emulator/faults' && x.method === 'DELETE') {
      this.faults.clear();
      await x.sendJson(200, { ok: true });
    } else if (p === '/__emulator/stats' && x.method === 'GET') {
      await x.sendJson(200, { faults: this.faults.stats(), ...this.stats() });
    } else if (p === '/__emulator/expire-cursors' && x.method === 'POST') {
      this.expireCursors();
      await x.sendJson(200, { ok: true });
    } else {
      throw new HttpError(404, { error: 'unknown control endpoint' });
    }
  }

  /** Counters for /__emulator/stats. */
  stats(): Record<string, number> {
    return {};
  }
}

/** The entity tags of an If-Match header: quoted strings (which may contain commas) or '*'. */
export function parseEntityTags(header: string): string[] {
  return [...header.matchAll(/(?:W\/)?"[^"]*"|\*/g)].map((m) => m[0].replace(/^W\//, ''));
}

/** Parse `Range: bytes=a-b` against a size. undefined: no (usable) range; 'unsatisfiable' → 416. */
export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | 'unsatisfiable' | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m) return undefined;
  const [, a, b] = m;
  if (a === '' && b === '') return undefined;
  let start: number;
  let end: number;
  if (a === '') {
    const suffix = Number(b);
    if (suffix === 0) return 'unsatisfiable';
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(a);
    end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  }
  if (start >= size || start > end) return 'unsatisfiable';
  return { start, end };
}

/** Answer a download with Range support: 206 with Content-Range, 416 when unsatisfiable. */
export async function sendContent(
  x: Exchange,
  content: Buffer,
  headers: Record<string, string>,
  on416: () => HttpError = () => new HttpError(416, '', { 'content-range': `bytes */${content.byteLength}` }),
): Promise<void> {
  const range = parseRange(x.header('range'), content.byteLength);
  if (range === 'unsatisfiable') throw on416();
  if (range === undefined) {
    await x.send(200, content, { 'accept-ranges': 'bytes', ...headers });
    return;
  }
  await x.send(206, content.subarray(range.start, range.end + 1), {
    'accept-ranges': 'bytes',
    'content-range': `bytes ${range.start}-${range.end}/${content.byteLength}`,
    ...headers,
  });
}
