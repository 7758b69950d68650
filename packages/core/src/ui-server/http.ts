/**
 * The UI over HTTP, for `weft agent` on 127.0.0.1: the renderer build (static files), the
 * typed API as `POST /api/rpc/<method>`, the status as `GET /api/status` and as server-sent
 * events on `GET /api/events`, and the sign-in route `GET /login?token=…`.
 *
 * Who may use it (docs/desktop.md "Who can use the local UI"): every route but `/login`
 * needs either the session cookie that a one-time login link gives (the browser the agent
 * opened) or the per-run secret in `x-weft-secret` (local tools that read the 0600
 * `agent.json`). No page ever holds the secret. Every route checks the Host header (the
 * loopback names on this server's port only: no DNS rebinding) and refuses requests that
 * come from another origin or site (Origin, Sec-Fetch-Site); a request that changes state
 * on a cookie must name this origin. Secrets, tokens and session ids are compared by their
 * SHA-256 digests (constant time; a Map lookup on a digest says nothing about the value).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import type * as http from 'node:http';
import * as nodePath from 'node:path';
import { type ApiHandlers, dispatch } from '@weft/ui-contract';
import { z } from 'zod';
import { type Disposable, DisposableStore, toDisposable } from '../lifecycle.ts';

export interface UiHttpOptions {
  readonly handlers: ApiHandlers;
  /**
   * The per-run control secret, for local tools (`x-weft-secret`); it is never put in a page.
   * Browsers sign in with a one-time login link instead (issueLoginToken).
   */
  readonly secret: string;
  /** The renderer build (index.html, app.js, app.css); without it only the API is served. */
  readonly staticDir?: string;
  /** The page at `/` when there is no renderer build (the agent's plain status page). */
  readonly plainPage?: () => string;
  /** Subscribe to status changes (the engine's StatusModel.onChange). */
  readonly onStatus: (listener: () => void) => Disposable;
  readonly status: () => unknown;
  /** Coalesce status pushes to at most one per this many ms. Default 200. */
  readonly pushIntervalMs?: number;
  /** How long a login link stays valid unless said otherwise. Default 60 s. */
  readonly loginTtlMs?: number;
  readonly now?: () => number;
}

export interface UiHttpHandler extends Disposable {
  /**
   * Handle the request: answers every refusal (421 wrong Host, 403 other origin, 401 not
   * signed in) itself; false when it is an allowed request for a route that is not ours.
   */
  handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<boolean>;
  /**
   * A one-time token for `GET /login?token=<token>`: valid once, for ttlMs (default
   * loginTtlMs); it gives the browser that uses it a session cookie.
   */
  issueLoginToken(ttlMs?: number): string;
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
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
};

/** The longest a login link may be valid (one asked for over `POST /api/login`). */
export const MAX_LOGIN_TTL_MS = 10 * 60_000;
const DEFAULT_LOGIN_TTL_MS = 60_000;
/** At most this many unused login links and signed-in browsers; the oldest go first. */
const MAX_LOGIN_TOKENS = 32;
const MAX_SESSIONS = 64;

const NOT_SIGNED_IN =
  'Not signed in. Open Weft again from the command that started it (npm start, weft agent --open, or weft open).';

/**
 * Whether a Host header names this machine's loopback interface (127.0.0.1, localhost,
 * [::1]) — on `port` when given, which the server's own port must be.
 */
export function isLoopbackHost(host: string | undefined, port?: number): boolean {
  if (!host) return false;
  const m = /^(127\.0\.0\.1|localhost|\[::1\])(?::(\d{1,5}))?$/i.exec(host);
  if (!m) return false;
  return port === undefined || m[2] === String(port);
}

const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();
const digestKey = (value: string): string => digest(value).toString('hex');

/** Constant-time equality of two strings of any length. */
export function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

const LoginRequestSchema = z
  .object({
    validForSeconds: z
      .number()
      .int()
      .min(1)
      .max(MAX_LOGIN_TTL_MS / 1000)
      .optional(),
  })
  .strict();

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

function page(title: string, body: string, extraHead = ''): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8">${extraHead}<title>${title}</title></head><body><h1>Weft</h1><p>${body}</p></body></html>`;
}

export function createUiHttpHandler(options: UiHttpOptions): UiHttpHandler {
  const store = new DisposableStore();
  const clients = new Set<http.ServerResponse>();
  const now = options.now ?? Date.now;
  const loginTtl = options.loginTtlMs ?? DEFAULT_LOGIN_TTL_MS;
  /** Unused login tokens by digest → when they stop working. */
  const loginTokens = new Map<string, number>();
  /** Signed-in browsers by the digest of their cookie's value. */
  const sessions = new Set<string>();
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
      loginTokens.clear();
      sessions.clear();
    }),
  );
  // Keep idle streams open through proxies and notice dead ones.
  const ping = setInterval(() => {
    for (const c of clients) c.write(': ping\n\n');
  }, 15_000);
  ping.unref();
  store.add(toDisposable(() => clearInterval(ping)));

  const dropExpired = (): void => {
    const t = now();
    for (const [k, until] of loginTokens) if (until <= t) loginTokens.delete(k);
  };

  const issueLoginToken = (ttlMs = loginTtl): string => {
    dropExpired();
    while (loginTokens.size >= MAX_LOGIN_TOKENS)
      loginTokens.delete(loginTokens.keys().next().value as string);
    const token = randomBytes(32).toString('base64url');
    loginTokens.set(digestKey(token), now() + Math.min(ttlMs, MAX_LOGIN_TTL_MS));
    return token;
  };

  /** Use a login token up: true once, while it is valid. */
  const redeem = (token: string | null): boolean => {
    if (!token) return false;
    const key = digestKey(token);
    const until = loginTokens.get(key);
    loginTokens.delete(key);
    return until !== undefined && until > now();
  };

  const newSession = (): string => {
    while (sessions.size >= MAX_SESSIONS) sessions.delete(sessions.values().next().value as string);
    const id = randomBytes(32).toString('base64url');
    sessions.add(digestKey(id));
    return id;
  };

  const json = (res: http.ServerResponse, code: number, body: unknown): void => {
    res.writeHead(code, {
      'content-type': 'application/json',
      'cache-control': 'no-store',
      ...SECURITY_HEADERS,
    });
    res.end(JSON.stringify(body));
  };

  const html = (
    res: http.ServerResponse,
    code: number,
    body: string,
    headers: Record<string, string> = {},
  ): void => {
    res.writeHead(code, {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      ...SECURITY_HEADERS,
      ...headers,
    });
    res.end(body);
  };

  const serveStatic = async (res: http.ServerResponse, pathname: string): Promise<boolean> => {
    if (!options.staticDir) {
      if (pathname !== '/' || !options.plainPage) return false;
      html(res, 200, options.plainPage());
      return true;
    }
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
    res.writeHead(200, {
      'content-type': TYPES[ext] ?? 'application/octet-stream',
      'cache-control': 'no-store',
      ...SECURITY_HEADERS,
    });
    res.end(body);
    return true;
  };

  /** GET /login?token=…: a valid, unused token becomes a session cookie. */
  const login = (req: http.IncomingMessage, res: http.ServerResponse, url: URL, port: number): void => {
    if (!redeem(url.searchParams.get('token'))) {
      html(
        res,
        403,
        page(
          'Weft — link expired',
          'This sign-in link has expired or was already used. Open Weft again from the command that started it (npm start, weft agent --open, or weft open).',
        ),
      );
      return;
    }
    // A session cookie (no expiry: it goes when the browser closes, and the agent forgets it
    // when it stops), never sent to other sites, unreadable by scripts. Named after the port
    // because cookies are not kept apart by port.
    const cookie = `weft-session-${port}=${newSession()}; HttpOnly; SameSite=Strict; Path=/`;
    const site = req.headers['sec-fetch-site'];
    if (site === undefined || site === 'none' || site === 'same-origin') {
      res.writeHead(303, {
        location: '/',
        'set-cookie': cookie,
        'cache-control': 'no-store',
        ...SECURITY_HEADERS,
      });
      res.end();
      return;
    }
    // Opened from a file (the launcher page) or another site: a browser does not send a
    // Strict cookie along a redirect that started elsewhere, but does on a navigation that
    // this page starts itself.
    html(
      res,
      200,
      page('Weft', '<a href="/">Continue to Weft</a>', '<meta http-equiv="refresh" content="0;url=/">'),
      { 'set-cookie': cookie },
    );
  };

  return {
    issueLoginToken,
    async handle(req, res) {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const port = req.socket.localPort ?? 0;
      const host = (req.headers.host ?? '').toLowerCase();
      if (!isLoopbackHost(host, port)) {
        json(res, 421, { error: 'wrong host' });
        return true;
      }
      if (url.pathname === '/login') {
        if (req.method !== 'GET') json(res, 405, { error: 'GET only' });
        else login(req, res, url, port);
        return true;
      }
      const isApi = url.pathname.startsWith('/api/');
      const refuse = (code: 401 | 403, message: string): true => {
        if (isApi) json(res, code, { ok: false, error: { code: 'failed', message } });
        else html(res, code, page('Weft', message));
        return true;
      };
      // Same origin only: a page elsewhere (another site, another port, a file) gets nothing.
      const origin = req.headers.origin;
      if (origin !== undefined && origin.toLowerCase() !== `http://${host}`)
        return refuse(403, 'Requests from other origins are refused.');
      const site = req.headers['sec-fetch-site'];
      if (site !== undefined && site !== 'same-origin' && site !== 'none')
        return refuse(403, 'Requests from other sites are refused.');
      const presented = req.headers['x-weft-secret'];
      const bySecret = typeof presented === 'string' && sameSecret(presented, options.secret);
      const session = cookieValue(req.headers.cookie, `weft-session-${port}`);
      const bySession = !bySecret && session !== undefined && sessions.has(digestKey(session));
      if (!bySecret && !bySession) return refuse(401, NOT_SIGNED_IN);
      const changesState = req.method !== 'GET' && req.method !== 'HEAD';
      // A browser names the origin of every POST; on a cookie, one that does not is refused.
      if (bySession && changesState && origin === undefined)
        return refuse(403, 'A request that changes something must come from this page.');

      if (url.pathname === '/api/login') {
        // New login links, for `weft open`: the secret only (a page cannot mint more).
        if (!bySecret) return refuse(401, 'Only local tools with the secret can ask for a login link.');
        if (req.method !== 'POST') {
          json(res, 405, { error: 'POST only' });
          return true;
        }
        let ttl: number | undefined;
        try {
          const text = await readBody(req);
          const parsed = LoginRequestSchema.parse(text === '' ? {} : (JSON.parse(text) as unknown));
          if (parsed.validForSeconds !== undefined) ttl = parsed.validForSeconds * 1000;
        } catch (e) {
          json(res, 400, {
            error: e instanceof z.ZodError ? 'validForSeconds: 1 to 600' : (e as Error).message,
          });
          return true;
        }
        json(res, 200, { url: `http://${host}/login?token=${issueLoginToken(ttl)}` });
        return true;
      }
      if (url.pathname === '/api/status') {
        if (req.method !== 'GET') json(res, 405, { error: 'GET only' });
        else json(res, 200, options.status());
        return true;
      }
      if (url.pathname === '/api/events') {
        if (req.method !== 'GET') {
          json(res, 405, { error: 'GET only' });
          return true;
        }
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
      if (isApi || req.method !== 'GET') return false;
      return serveStatic(res, url.pathname);
    },
    dispose() {
      store.dispose();
    },
  };
}
