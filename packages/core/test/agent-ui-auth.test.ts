/**
 * The running agent's UI server as another local user or process sees it (a plain fetch to
 * the port): nothing without the session cookie of a one-time login link or the secret
 * from the 0600 agent.json; and the ways the real UI gets in — the launcher page that
 * openInBrowser writes, `weft open`, `weft status`.
 */
import { execFile } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { type RunningAgent, startAgent } from '../src/agent.ts';
import { memorySecretStore } from '../src/secret-store.ts';

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

const WEFT_BIN = nodePath.resolve(import.meta.dirname, '..', 'bin', 'weft.js');

async function agentWithUi(): Promise<{ agent: RunningAgent; stateDir: string; opened: string[] }> {
  const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-agent-ui-'));
  const uiDir = nodePath.join(root, 'renderer');
  await fsp.mkdir(uiDir);
  await fsp.writeFile(
    nodePath.join(uiDir, 'index.html'),
    '<head><!--weft:secret--></head><nav id="nav"></nav>',
  );
  await fsp.writeFile(nodePath.join(uiDir, 'app.js'), 'x');
  const stateDir = nodePath.join(root, 'state');
  // A leftover agent.json that others could read: the new one must not inherit its mode.
  await fsp.mkdir(stateDir, { mode: 0o700 });
  await fsp.writeFile(nodePath.join(stateDir, 'agent.json'), '{}', { mode: 0o644 });
  await fsp.chmod(nodePath.join(stateDir, 'agent.json'), 0o644);
  const opened: string[] = [];
  const agent = await startAgent({
    folder: nodePath.join(root, 'Weft'),
    stateDir,
    uiDir,
    secrets: memorySecretStore(),
    openBrowser: (target) => void opened.push(target),
  });
  cleanup.push(async () => {
    await agent.stop();
    await fsp.rm(root, { recursive: true, force: true });
  });
  return { agent, stateDir, opened };
}

describe('the agent UI against another local process', () => {
  it('answers 401 on every route without a session or the secret, and no page holds the secret', async () => {
    const { agent, stateDir } = await agentWithUi();
    const base = agent.statusUrl;
    const routes: [string, string][] = [
      ['GET', ''],
      ['GET', 'index.html'],
      ['GET', 'app.js'],
      ['GET', 'api/status'],
      ['GET', 'api/events'],
      ['POST', 'api/rpc/getStatus'],
      ['POST', 'api/rpc/connectWeft'],
      ['POST', 'api/rpc/shareFolder'],
      ['POST', 'api/login'],
      ['POST', 'api/pause'],
      ['POST', 'api/resume'],
      ['POST', 'api/sync'],
    ];
    for (const [method, path] of routes) {
      const res = await fetch(new URL(path, base), { method, ...(method === 'POST' ? { body: '{}' } : {}) });
      expect(res.status, `${method} /${path}`).toBe(401);
      expect(await res.text(), `${method} /${path}`).not.toContain(agent.secret);
    }
    // The secret lives in a file only this user can read.
    const file = nodePath.join(stateDir, 'agent.json');
    expect((await fsp.stat(file)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await fsp.readFile(file, 'utf8'))).toMatchObject({ secret: agent.secret });
    expect(agent.secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // With it: the status; the old unguarded control routes are gone.
    const auth = { 'x-weft-secret': agent.secret };
    expect((await fetch(new URL('api/status', base), { headers: auth })).status).toBe(200);
    for (const legacy of ['api/pause', 'api/resume', 'api/sync'])
      expect((await fetch(new URL(legacy, base), { method: 'POST', headers: auth })).status, legacy).toBe(
        404,
      );
  });

  it('opens the browser on a 0600 launcher page; its link works once, for a cookie that opens the UI', async () => {
    const { agent, stateDir, opened } = await agentWithUi();
    await agent.openInBrowser();
    expect(opened).toHaveLength(1);
    const target = opened[0] ?? '';
    // The opener (a process others can see in `ps`) gets a file address, not the link.
    expect(target).toMatch(/^file:\/\//);
    expect(target).not.toContain('token');
    const launcher = fileURLToPath(target);
    expect(nodePath.dirname(launcher)).toBe(stateDir);
    expect((await fsp.stat(launcher)).mode & 0o777).toBe(0o600);
    const link = /url=([^"]+)"/.exec(await fsp.readFile(launcher, 'utf8'))?.[1] ?? '';
    expect(link).toMatch(new RegExp(`^${agent.statusUrl}login\\?token=[A-Za-z0-9_-]{43}$`));
    const signIn = await fetch(link, { redirect: 'manual' });
    expect(signIn.status).toBe(303);
    const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const page = await fetch(agent.statusUrl, { headers: { cookie } });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('<nav id="nav">');
    expect(html).not.toContain(agent.secret);
    const call = await fetch(new URL('api/rpc/getStatus', agent.statusUrl), {
      method: 'POST',
      headers: { cookie, origin: new URL(agent.statusUrl).origin, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(await call.json()).toMatchObject({ ok: true, value: { state: 'offline' } });
    // Someone who finds the link afterwards gets nothing.
    expect((await fetch(link, { redirect: 'manual' })).status).toBe(403);
    await agent.stop();
    await expect(fsp.stat(launcher)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('`weft open --print` and `weft status` use the secret from agent.json', async () => {
    const { agent, stateDir } = await agentWithUi();
    const run = promisify(execFile);
    const printed = (
      await run(process.execPath, [WEFT_BIN, 'open', '--state', stateDir, '--print'])
    ).stdout.trim();
    expect(printed).toMatch(new RegExp(`^${agent.statusUrl}login\\?token=[A-Za-z0-9_-]{43}$`));
    expect((await fetch(printed, { redirect: 'manual' })).status).toBe(303);
    expect((await fetch(printed, { redirect: 'manual' })).status).toBe(403);
    const status = JSON.parse(
      (await run(process.execPath, [WEFT_BIN, 'status', '--state', stateDir, '--json'])).stdout,
    ) as { state: string };
    expect(status.state).toBe('offline');
    // Two runs of the command through tsx: slow to start on a busy machine.
  }, 60_000);
});
