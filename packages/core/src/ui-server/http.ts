/**
 * The UI over HTTP, for `weft agent` on 127.0.0.1: the renderer build (static files), the
 * typed API as `POST /api/rpc/<method>` and the status stream as server-sent events on
 * `GET /api/events`.
 *
 * Guards: the Host header must name the loopback address (no DNS rebinding); calls need the
 * per-run secret in `x-weft-secret`, which the page receives in a <meta> tag (other origins
 * cannot read it) — a cross-site page cannot set that header without a CORS preflight,
 * which this server never grants.
 */
import * as fsp from 'node:fs/promises';
import type * as http from 'node:http';
import * as nodePath from 'node:path';
import { type ApiHandlers, dispatch } from '@weft/ui-contract';
import { type Disposable, DisposableStore, toDisposable } from '../lifecycle.ts';

export interface UiHttpOptions {
  readonly handlers: ApiHandlers;
  readonly secret: string;
  /** The renderer build (index.html, app.js, app.css); without it only the API is served. */
  readonly staticDir?: string;
  /** Subscribe to status changes (the engine's StatusModel.onChange). */
  readonly onStatus: (listener: () => void) => Disposable;
  readonly status: () => unknown;
  /** Coalesce status pushes to at most one per this many ms. Default 200. */
  readonly pushIntervalMs?: number;
}

export interface UiHttpHandler extends Disposable {
  /** Handle the request if it is a UI/API request; false when it is not ours. */
  handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<boolean>;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.map': 'application/json',
};

const MAX_BODY = 64 * 1024;

const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
};

export function isLoopbackHost(host: string | undefined): boolean {
  if (!host) return false;
  return /^(127\.0\.0\.1|localhost|\[::1\])(:\d+)?$/i.test(host);
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req) {
    const b = chunk as Buffer;
    size += b.byteLength;
    if (size > MAX_BODY) throw new Error('request body too large');
    chunks.push(b);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export function createUiHttpHandler(options: UiHttpOptions): UiHttpHandler {
  const store = new DisposableStore();
  const clients = new Set<http.ServerResponse>();
  let timer: NodeJS.Timeout | undefined;
  const interval = options.pushIntervalMs ?? 200;
  const push = (): void => {
    timer = undefined;
    const data = `event: status\ndata: ${JSON.stringify(options.status())}\n\n`;
    for (const c of clients) c.write(data);
  };
  store.add(
    options.onStatus(() => {
      if (clients.size > 0 && !timer) timer = setTimeout(push, interval);
    }),
  );
  store.add(
    toDisposable(() => {
      if (timer) clearTimeout(timer);
      for (const c of clients) c.end();
      clients.clear();
    }),
  );
  // Keep idle streams open through proxies and notice dead ones.
  const ping = setInterval(() => {
    for (const c of clients) c.write(': ping\n\n');
  }, 15_000);
  ping.unref();
  store.add(toDisposable(() => clearInterval(ping)));

  const json = (res: http.ServerResponse, code: number, body: unknown): void => {
    res.writeHead(code, {
      'content-type': 'application/json',
      'cache-control': 'no-store',
      ...SECURITY_HEADERS,
    });
    res.end(JSON.stringify(body));
  };

  const serveStatic = async (res: http.ServerResponse, pathname: string): Promise<boolean> => {
    if (!options.staticDir) return false;
    const rel = pathname === '/' ? 'index.html' : pathname.slice(1);
    if (!/^[a-zA-Z0-9._-]+(\/[a-zA-Z0-9._-]+)*$/.test(rel) || rel.split('/').includes('..')) return false;
    const file = nodePath.join(options.staticDir, rel);
    let body: Buffer;
    try {
      body = await fsp.readFile(file);
    } catch {
      return false;
    }
    const ext = nodePath.extname(file);
    let out: Buffer | string = body;
    if (rel === 'index.html') {
      out = body
        .toString('utf8')
        .replace('<!--weft:secret-->', `<meta name="weft-secret" content="${options.secret}">`);
    }
    res.writeHead(200, {
      'content-type': TYPES[ext] ?? 'application/octet-stream',
      'cache-control': 'no-store',
      ...SECURITY_HEADERS,
    });
    res.end(out);
    return true;
  };

  return {
    async handle(req, res) {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const isApi = url.pathname === '/api/events' || url.pathname.startsWith('/api/rpc/');
      if (!isApi && (req.method !== 'GET' || !options.staticDir)) return false;
      if (!isLoopbackHost(req.headers.host)) {
        json(res, 421, { error: 'wrong host' });
        return true;
      }
      if (req.method === 'GET' && url.pathname === '/api/events') {
        res.writeHead(200, {
          'content-type': 'text/event-stream',
          'cache-control': 'no-store',
          connection: 'keep-alive',
          ...SECURITY_HEADERS,
        });
        res.write(`event: status\ndata: ${JSON.stringify(options.status())}\n\n`);
        clients.add(res);
        req.on('close', () => clients.delete(res));
        return true;
      }
      if (url.pathname.startsWith('/api/rpc/')) {
        if (req.method !== 'POST') {
          json(res, 405, { error: 'POST only' });
          return true;
        }
        if (req.headers['x-weft-secret'] !== options.secret) {
          json(res, 403, { ok: false, error: { code: 'bad-request', message: 'forbidden' } });
          return true;
        }
        let input: unknown;
        try {
          const text = await readBody(req);
          input = text === '' ? {} : (JSON.parse(text) as unknown);
        } catch (e) {
          json(res, 400, { ok: false, error: { code: 'bad-request', message: (e as Error).message } });
          return true;
        }
        const method = decodeURIComponent(url.pathname.slice('/api/rpc/'.length));
        const answer = await dispatch(options.handlers, method, input);
        const code = answer.ok
          ? 200
          : answer.error.code === 'unknown-method'
            ? 404
            : answer.error.code === 'bad-request'
              ? 400
              : answer.error.code === 'unavailable'
                ? 501
                : 500;
        json(res, code, answer);
        return true;
      }
      return serveStatic(res, url.pathname);
    },
    dispose() {
      store.dispose();
    },
  };
}
