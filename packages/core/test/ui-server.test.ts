/**
 * The agent's UI server over HTTP: guards (Host, Origin, the session cookie from a one-time
 * login link or the secret for local tools), validation, the status stream, static files
 * (no secret in any of them), conflict resolution and settings on disk.
 */
import * as fsp from 'node:fs/promises';
import * as http from 'node:http';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { DEFAULT_SETTINGS, type ApiHandlers } from '@weft/ui-contract';
import { conflictedCopyPath } from '@weft/wire';
import { afterEach, describe, expect, it } from 'vitest';
import { Emitter } from '../src/lifecycle.ts';
import { StatusModel } from '../src/status.ts';
import { createUiHttpHandler, isLoopbackHost } from '../src/ui-server/http.ts';
import { copyIsMine, loadSettings, toStatusDto } from '../src/ui-server/service.ts';

const disposers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const d of disposers.splice(0).reverse()) await d();
});

const SECRET = 's3cret-0123456789abcdef';

async function serve(
  handlers: Partial<ApiHandlers>,
  staticDir?: string,
  extra: { now?: () => number; loginTtlMs?: number; plainPage?: () => string } = {},
) {
  const model = new StatusModel('/f');
  const ui = createUiHttpHandler({
    handlers: handlers as ApiHandlers,
    secret: SECRET,
    ...(staticDir ? { staticDir } : {}),
    onStatus: (l) => model.onChange(l),
    status: () => toStatusDto(model.get()),
    pushIntervalMs: 1,
    ...extra,
  });
  const server = http.createServer((req, res) => {
    void ui.handle(req, res).then((done) => {
      if (!done) res.writeHead(404).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  disposers.push(async () => {
    ui.dispose();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    model.dispose();
  });
  const base = `http://127.0.0.1:${port}`;
  /** What a browser does with a login link: follow it once and keep the cookie. */
  const login = async (): Promise<string> => {
    const res = await fetch(`${base}/login?token=${ui.issueLoginToken()}`, { redirect: 'manual' });
    expect(res.status).toBe(303);
    const cookie = res.headers.get('set-cookie') ?? '';
    return cookie.split(';')[0] ?? '';
  };
  return { base, port, model, ui, login };
}

interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A request with exactly these headers (fetch would not let a test set Host or Origin). */
function raw(
  port: number,
  path: string,
  headers: Record<string, string>,
  method = 'GET',
  body?: string,
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
        // A status stream never ends: its first event is enough.
        if (res.headers['content-type']?.startsWith('text/event-stream')) res.destroy();
      });
      const done = (): void => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text });
      res.on('end', done);
      res.on('close', done);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const rawRequest = async (
  port: number,
  path: string,
  headers: Record<string, string>,
  method = 'GET',
): Promise<number> => (await raw(port, path, headers, method)).status;

/** Every route of the UI server, as another local process would try it. */
const ROUTES: readonly (readonly [method: string, path: string])[] = [
  ['GET', '/'],
  ['GET', '/index.html'],
  ['GET', '/app.js'],
  ['GET', '/api/status'],
  ['GET', '/api/events'],
  ['POST', '/api/rpc/getStatus'],
  ['POST', '/api/rpc/pause'],
  ['POST', '/api/login'],
  ['POST', '/api/pause'],
  ['POST', '/api/resume'],
  ['POST', '/api/sync'],
];

async function rendererDir(): Promise<string> {
  const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-ui-'));
  // The old placeholder stays in the file: the server must not fill it.
  await fsp.writeFile(
    nodePath.join(dir, 'index.html'),
    '<head><!--weft:secret--></head><nav id="nav"></nav>',
  );
  await fsp.writeFile(nodePath.join(dir, 'app.js'), 'x');
  return dir;
}

describe('UI server', () => {
  it('needs the secret for calls and validates input', async () => {
    let paused = 0;
    const { base } = await serve({
      pause: async () => {
        paused++;
        return toStatusDto(new StatusModel('/f').get());
      },
    });
    const call = (method: string, body: string, secret = SECRET) =>
      fetch(`${base}/api/rpc/${method}`, { method: 'POST', headers: { 'x-weft-secret': secret }, body });
    for (const wrong of ['wrong', '', SECRET.slice(0, -1), `${SECRET}x`, SECRET.toUpperCase()])
      expect((await call('pause', '{"duration":"1h"}', wrong)).status, wrong).toBe(401);
    expect((await call('pause', '{"duration":"1y"}')).status).toBe(400);
    expect((await call('pause', 'not json')).status).toBe(400);
    expect((await call('nope', '{}')).status).toBe(404);
    expect(paused).toBe(0);
    const ok = await call('pause', '{"duration":"1h"}');
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { ok: boolean }).ok).toBe(true);
    expect(paused).toBe(1);
  });

  it('gives another local process nothing: no secret in any page, 401 on every route', async () => {
    let called = 0;
    const count = async () => {
      called++;
      return toStatusDto(new StatusModel('/f').get());
    };
    const { port } = await serve({ getStatus: count, pause: count }, await rendererDir(), {
      plainPage: () => '<p>status</p>',
    });
    const host = `127.0.0.1:${port}`;
    for (const [method, path] of ROUTES) {
      const answer = await raw(port, path, { host }, method, method === 'POST' ? '{}' : undefined);
      expect(answer.status, `${method} ${path}`).toBe(401);
      expect(answer.body, `${method} ${path}`).not.toContain(SECRET);
      expect(answer.headers['set-cookie'], `${method} ${path}`).toBeUndefined();
      // Not even with a cookie someone made up.
      const guessed = await raw(
        port,
        path,
        { host, cookie: `weft-session-${port}=${SECRET}` },
        method,
        method === 'POST' ? '{}' : undefined,
      );
      expect(guessed.status, `${method} ${path} with a made-up cookie`).toBe(401);
    }
    expect(called).toBe(0);
    // The page a signed-in browser gets holds no secret either.
    const page = await raw(port, '/', { host, 'x-weft-secret': SECRET });
    expect(page.status).toBe(200);
    expect(page.body).toContain('<nav id="nav">');
    expect(page.body).not.toContain(SECRET);
    expect(page.body).not.toContain('weft-secret');
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
  });

  it('refuses other Host names, and loopback names on another port (DNS rebinding)', async () => {
    const { port, ui } = await serve({ getStatus: async () => toStatusDto(new StatusModel('/f').get()) });
    for (const host of ['evil.example', `evil.example:${port}`, `127.0.0.1:${port + 1}`, '127.0.0.1']) {
      for (const [method, path] of ROUTES)
        expect(
          await rawRequest(port, path, { host, 'x-weft-secret': SECRET }, method),
          `${host} ${path}`,
        ).toBe(421);
      expect(await rawRequest(port, `/login?token=${ui.issueLoginToken()}`, { host }), host).toBe(421);
    }
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `LOCALHOST:${port}`])
      expect(await rawRequest(port, '/api/status', { host, 'x-weft-secret': SECRET }), host).toBe(200);
    expect(isLoopbackHost('localhost:1234')).toBe(true);
    expect(isLoopbackHost('127.0.0.1.evil.example')).toBe(false);
    expect(isLoopbackHost('localhost:1234', 1234)).toBe(true);
    expect(isLoopbackHost('localhost:1234', 1235)).toBe(false);
  });

  it('refuses cross-origin and cross-site requests, even with a valid session', async () => {
    let called = 0;
    const { port, login } = await serve({
      pause: async () => {
        called++;
        return toStatusDto(new StatusModel('/f').get());
      },
    });
    const cookie = await login();
    const host = `127.0.0.1:${port}`;
    const body = '{"duration":"1h"}';
    const post = (headers: Record<string, string>) =>
      raw(
        port,
        '/api/rpc/pause',
        { host, cookie, 'content-type': 'application/json', ...headers },
        'POST',
        body,
      );
    for (const origin of ['http://evil.example', `http://127.0.0.1:${port + 1}`, 'null', `https://${host}`])
      expect((await post({ origin })).status, origin).toBe(403);
    // A browser always names the origin of a POST; a cookie alone does not change state.
    expect((await post({})).status).toBe(403);
    expect((await post({ origin: `http://${host}`, 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect((await post({ origin: `http://${host}`, 'sec-fetch-site': 'same-site' })).status).toBe(403);
    // The secret does not excuse a foreign origin either.
    expect((await post({ cookie: '', 'x-weft-secret': SECRET, origin: 'http://evil.example' })).status).toBe(
      403,
    );
    expect(called).toBe(0);
    // The status stream and the pages: same origin only.
    for (const path of ['/api/events', '/api/status']) {
      expect((await raw(port, path, { host, cookie, origin: 'http://evil.example' })).status, path).toBe(403);
      expect((await raw(port, path, { host, cookie, 'sec-fetch-site': 'cross-site' })).status, path).toBe(
        403,
      );
    }
    expect((await post({ origin: `http://${host}`, 'sec-fetch-site': 'same-origin' })).status).toBe(200);
    expect((await raw(port, '/api/events', { host, cookie, 'sec-fetch-site': 'same-origin' })).status).toBe(
      200,
    );
    expect(called).toBe(1);
  });

  it('a login link works once and for a short time, for an HttpOnly SameSite=Strict cookie', async () => {
    let t = 1_000_000;
    const { base, port, ui, login } = await serve({}, await rendererDir(), {
      now: () => t,
      loginTtlMs: 60_000,
    });
    const token = ui.issueLoginToken();
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(token).not.toContain(SECRET);
    const first = await fetch(`${base}/login?token=${token}`, { redirect: 'manual' });
    expect(first.status).toBe(303);
    expect(first.headers.get('location')).toBe('/');
    const setCookie = first.headers.get('set-cookie') ?? '';
    expect(setCookie).toMatch(new RegExp(`^weft-session-${port}=[A-Za-z0-9_-]{43}; `));
    expect(setCookie).toContain('HttpOnly');
    expect(setCookie).toContain('SameSite=Strict');
    expect(setCookie).toContain('Path=/');
    expect(setCookie).not.toMatch(/Expires|Max-Age|Domain/i);
    const cookie = setCookie.split(';')[0] ?? '';
    // The cookie opens the page, the stream and the calls (from this origin).
    const host = `127.0.0.1:${port}`;
    expect((await raw(port, '/', { host, cookie })).status).toBe(200);
    expect((await raw(port, '/api/events', { host, cookie })).status).toBe(200);
    const rpc = await raw(port, '/api/rpc/getStatus', { host, cookie, origin: base }, 'POST', '{}');
    expect(rpc.status).not.toBe(401);
    expect(rpc.status).not.toBe(403);
    // Used: refused, and no cookie.
    const again = await fetch(`${base}/login?token=${token}`, { redirect: 'manual' });
    expect(again.status).toBe(403);
    expect(again.headers.get('set-cookie')).toBeNull();
    // Expired: refused.
    const late = ui.issueLoginToken();
    t += 60_001;
    expect((await fetch(`${base}/login?token=${late}`, { redirect: 'manual' })).status).toBe(403);
    // Made up, empty or missing: refused.
    for (const q of ['?token=' + 'A'.repeat(43), '?token=', ''])
      expect((await fetch(`${base}/login${q}`, { redirect: 'manual' })).status, q).toBe(403);
    // A link within its time still works, and each gives its own session.
    const other = await login();
    expect(other).not.toBe(cookie);
  });

  it('a login link opened from a file or another site lands on the UI by a same-origin step', async () => {
    const { ui, port } = await serve({}, await rendererDir());
    const host = `127.0.0.1:${port}`;
    const answer = await raw(port, `/login?token=${ui.issueLoginToken()}`, {
      host,
      'sec-fetch-site': 'cross-site',
    });
    // A Strict cookie would not go with a redirect that started elsewhere; a page of ours
    // that moves on to `/` is a same-origin navigation, which carries it.
    expect(answer.status).toBe(200);
    expect(answer.headers['set-cookie']?.[0]).toMatch(/SameSite=Strict/);
    expect(answer.body).toContain('<meta http-equiv="refresh" content="0;url=/">');
  });

  it('mints login links for the holder of the secret only', async () => {
    const { base, port, login } = await serve({});
    const host = `127.0.0.1:${port}`;
    const cookie = await login();
    expect((await raw(port, '/api/login', { host, cookie, origin: base }, 'POST', '{}')).status).toBe(401);
    const minted = await raw(port, '/api/login', { host, 'x-weft-secret': SECRET }, 'POST', '{}');
    expect(minted.status).toBe(200);
    const { url } = JSON.parse(minted.body) as { url: string };
    expect(url).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${port}/login\\?token=[A-Za-z0-9_-]{43}$`));
    expect((await fetch(url, { redirect: 'manual' })).status).toBe(303);
    expect(
      (await raw(port, '/api/login', { host, 'x-weft-secret': SECRET }, 'POST', '{"validForSeconds":100000}'))
        .status,
    ).toBe(400);
  });

  it('streams status changes as server-sent events', async () => {
    const { base, model } = await serve({});
    const res = await fetch(`${base}/api/events`, { headers: { 'x-weft-secret': SECRET } });
    const reader = res.body!.getReader();
    const seen: string[] = [];
    const decoder = new TextDecoder();
    let buf = '';
    model.update({ state: 'syncing' });
    while (!seen.includes('syncing')) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value);
      for (const m of buf.matchAll(/data: (.*)\n/g))
        seen.push((JSON.parse(m[1] ?? '{}') as { state: string }).state);
      buf = '';
    }
    expect(seen[0]).toBe('idle');
    expect(seen).toContain('syncing');
    await reader.cancel();
  });

  it('serves the renderer, and nothing outside its folder', async () => {
    const { base, port } = await serve({}, await rendererDir());
    const auth = { 'x-weft-secret': SECRET };
    const page = await fetch(`${base}/`, { headers: auth });
    expect(await page.text()).toContain('<nav id="nav">');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect((await fetch(`${base}/app.js`, { headers: auth })).headers.get('content-type')).toMatch(
      /javascript/,
    );
    const host = `127.0.0.1:${port}`;
    expect(await rawRequest(port, '/../../etc/passwd', { host, ...auth })).toBe(404);
    expect(await rawRequest(port, '/%2e%2e/secret', { host, ...auth })).toBe(404);
  });
});

describe('UI server lifetime', () => {
  it('leaves no listener, timer or open stream behind once disposed', async () => {
    const changes = new Emitter<void>();
    const ui = createUiHttpHandler({
      handlers: {} as ApiHandlers,
      secret: 's',
      onStatus: (l) => changes.on(l),
      status: () => ({}),
      pushIntervalMs: 1,
    });
    const server = http.createServer((req, res) => void ui.handle(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const res = await fetch(`http://127.0.0.1:${(server.address() as { port: number }).port}/api/events`, {
      headers: { 'x-weft-secret': 's' },
    });
    const reader = res.body!.getReader();
    await reader.read();
    expect(changes.listenerCount).toBe(1);
    ui.dispose();
    expect(changes.listenerCount).toBe(0);
    // The stream ends on dispose (no hanging clients keep the server from closing).
    for (;;) if ((await reader.read()).done) break;
    await new Promise((r) => server.close(r));
  });
});

describe('UI service helpers', () => {
  it('tells whose version a conflicted copy holds from its name', () => {
    const when = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
    expect(copyIsMine(conflictedCopyPath('a/b.txt', when, 'laptop'), 'laptop')).toBe(true);
    expect(copyIsMine(conflictedCopyPath('a/b.txt', when, 'phone'), 'laptop')).toBe(false);
    expect(copyIsMine(conflictedCopyPath('b', when, 'laptop 2'), 'laptop')).toBe(true);
    // The server may know this device by its id rather than the local name.
    expect(copyIsMine(conflictedCopyPath('b', when, 'd_42'), ['laptop', 'd_42'])).toBe(true);
    expect(copyIsMine('b.txt', ['laptop'])).toBe(false);
  });

  it('reads settings with defaults for anything missing or invalid', async () => {
    const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-ui-'));
    expect(await loadSettings(dir)).toEqual(DEFAULT_SETTINGS);
    await fsp.writeFile(nodePath.join(dir, 'settings.json'), JSON.stringify({ massDeletePercent: 20 }));
    expect((await loadSettings(dir)).massDeletePercent).toBe(20);
    await fsp.writeFile(nodePath.join(dir, 'settings.json'), JSON.stringify({ massDeletePercent: 'lots' }));
    expect(await loadSettings(dir)).toEqual(DEFAULT_SETTINGS);
  });
});
