/**
 * The agent's UI server over HTTP: guards (host, secret), validation, the status stream,
 * static files with the secret injected, conflict resolution and settings on disk.
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

async function serve(handlers: Partial<ApiHandlers>, staticDir?: string) {
  const model = new StatusModel('/f');
  const ui = createUiHttpHandler({
    handlers: handlers as ApiHandlers,
    secret: 's3cret',
    ...(staticDir ? { staticDir } : {}),
    onStatus: (l) => model.onChange(l),
    status: () => toStatusDto(model.get()),
    pushIntervalMs: 1,
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
  return { base: `http://127.0.0.1:${port}`, port, model };
}

function rawRequest(
  port: number,
  path: string,
  headers: Record<string, string>,
  method = 'GET',
): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method, headers }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
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
    const call = (method: string, body: string, secret = 's3cret') =>
      fetch(`${base}/api/rpc/${method}`, { method: 'POST', headers: { 'x-weft-secret': secret }, body });
    expect((await call('pause', '{"duration":"1h"}', 'wrong')).status).toBe(403);
    expect((await call('pause', '{"duration":"1y"}')).status).toBe(400);
    expect((await call('pause', 'not json')).status).toBe(400);
    expect((await call('nope', '{}')).status).toBe(404);
    expect(paused).toBe(0);
    const ok = await call('pause', '{"duration":"1h"}');
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { ok: boolean }).ok).toBe(true);
    expect(paused).toBe(1);
  });

  it('refuses other Host names (DNS rebinding)', async () => {
    const { port } = await serve({});
    expect(await rawRequest(port, '/api/events', { host: 'evil.example' })).toBe(421);
    expect(isLoopbackHost('localhost:1234')).toBe(true);
    expect(isLoopbackHost('127.0.0.1.evil.example')).toBe(false);
  });

  it('streams status changes as server-sent events', async () => {
    const { base, model } = await serve({});
    const res = await fetch(`${base}/api/events`);
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

  it('serves the renderer with the secret in a meta tag, and nothing outside its folder', async () => {
    const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-ui-'));
    await fsp.writeFile(nodePath.join(dir, 'index.html'), '<head><!--weft:secret--></head>');
    await fsp.writeFile(nodePath.join(dir, 'app.js'), 'x');
    const { base, port } = await serve({}, dir);
    const page = await fetch(`${base}/`);
    expect(await page.text()).toContain('<meta name="weft-secret" content="s3cret">');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect((await fetch(`${base}/app.js`)).headers.get('content-type')).toMatch(/javascript/);
    expect(await rawRequest(port, '/../../etc/passwd', { host: `127.0.0.1:${port}` })).toBe(404);
    expect(await rawRequest(port, '/%2e%2e/secret', { host: `127.0.0.1:${port}` })).toBe(404);
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
    const res = await fetch(`http://127.0.0.1:${(server.address() as { port: number }).port}/api/events`);
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
