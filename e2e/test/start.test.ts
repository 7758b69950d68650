/**
 * `npm start` (scripts/start.ts) for real: proxy on embedded defaults, agent enrolled on the
 * first run, the desktop UI served (WEFT_NO_OPEN=1: nothing is opened, as on a headless
 * machine: a one-time sign-in link is printed instead), a clean stop on SIGTERM, and a second
 * start that reuses the enrolment. No admin token is ever written down (the proxy gets only
 * its hash); a start.json from an older version that holds one is rewritten without it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../src/harness.ts';

const repoRoot = nodePath.resolve(import.meta.dirname, '..', '..');
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
});

function start(env: Record<string, string>): {
  child: ChildProcess;
  output: () => string;
  ready: Promise<string>;
} {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  const ready = new Promise<string>((resolve, reject) => {
    const onData = (d: Buffer): void => {
      out += d.toString('utf8');
      if (out.includes('Press Ctrl+C to stop.')) resolve(out);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (d: Buffer) => void (out += d.toString('utf8')));
    child.on('exit', (code) => reject(new Error(`start.ts exited ${code}: ${out}`)));
  });
  return { child, output: () => out, ready };
}

const exited = (c: ChildProcess): Promise<number | null> =>
  new Promise((resolve) =>
    c.exitCode !== null ? resolve(c.exitCode) : c.on('exit', (code) => resolve(code)),
  );

describe('npm start', () => {
  it('serves the desktop UI without opening anything when WEFT_NO_OPEN=1, and restarts enrolled', async () => {
    const root = await tempDir('start');
    const env = {
      WEFT_HOME: nodePath.join(root, 'home'),
      WEFT_FOLDER: nodePath.join(root, 'Weft'),
      WEFT_NO_OPEN: '1',
      WEFT_SECRET_KEY_FILE: nodePath.join(root, 'config', 'secret.key'),
    };
    // A home folder left world-readable (umask 022) is made owner-only.
    await fsp.mkdir(env.WEFT_HOME, { recursive: true, mode: 0o755 });
    await fsp.chmod(env.WEFT_HOME, 0o755);
    const first = start(env);
    const out = await first.ready;
    expect((await fsp.stat(env.WEFT_HOME)).mode & 0o777).toBe(0o700);
    const startFile = nodePath.join(env.WEFT_HOME, 'start.json');
    expect((await fsp.stat(startFile)).mode & 0o777).toBe(0o600);
    // No admin token is written down: start.json keeps the port alone.
    const firstStart = JSON.parse(await fsp.readFile(startFile, 'utf8')) as Record<string, unknown>;
    expect(Object.keys(firstStart)).toEqual(['port']);
    expect(out).toContain('Welcome to Weft');
    const link = /Weft window: +(http:\/\/127\.0\.0\.1:\d+\/login\?token=[A-Za-z0-9_-]{43})\n/.exec(out)?.[1];
    expect(link, out).toBeDefined();
    expect(out).not.toContain('opened in your browser');
    const url = new URL('/', link).href;
    const agentFile = nodePath.join(env.WEFT_HOME, 'agent', 'agent.json');
    const { secret } = JSON.parse(await fsp.readFile(agentFile, 'utf8')) as { secret: string };
    expect((await fsp.stat(agentFile)).mode & 0o777).toBe(0o600);
    // Another local process that finds the port: no page, no secret.
    const stranger = await fetch(url);
    expect(stranger.status).toBe(401);
    expect(await stranger.text()).not.toContain(secret);
    // The printed link signs a browser in, once.
    const signIn = await fetch(link ?? '', { redirect: 'manual' });
    expect(signIn.status).toBe(303);
    const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const page = await (await fetch(url, { headers: { cookie } })).text();
    expect(page).toContain('<nav id="nav"');
    expect(page).not.toContain(secret);
    expect((await fetch(link ?? '', { redirect: 'manual' })).status).toBe(403);
    const status = await fetch(`${url}api/rpc/getStatus`, {
      method: 'POST',
      headers: { 'x-weft-secret': secret, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(await status.json()).toMatchObject({ ok: true, value: { folder: env.WEFT_FOLDER } });
    const device = await fsp.readFile(nodePath.join(env.WEFT_HOME, 'agent', 'device.json'), 'utf8');
    expect(JSON.parse(device)).not.toHaveProperty('token');

    first.child.kill('SIGTERM');
    expect(await exited(first.child)).toBe(0);
    await expect(fsp.stat(agentFile)).rejects.toMatchObject({ code: 'ENOENT' });

    // start.json as an older version wrote it, with the admin token in plain text: the next
    // start rewrites it without the token, and the proxy no longer takes that token.
    const legacyToken = 'wfa_legacy-admin-token-written-in-plain-text';
    await fsp.writeFile(startFile, JSON.stringify({ adminToken: legacyToken, port: firstStart.port }));
    const second = start(env);
    const again = await second.ready;
    expect(again).not.toContain('Welcome to Weft');
    expect(JSON.parse(await fsp.readFile(startFile, 'utf8'))).toEqual({ port: firstStart.port });
    expect((await fsp.stat(startFile)).mode & 0o777).toBe(0o600);
    const proxyUrl = /Proxy server: (http:\/\/\S+)/.exec(again)?.[1];
    expect(proxyUrl, again).toBeDefined();
    const enrol = await fetch(`${proxyUrl}/v1/enrol`, {
      method: 'POST',
      headers: { authorization: `Bearer ${legacyToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user: 'mallory', deviceName: 'old-token' }),
    });
    expect(enrol.status).toBe(403);
    // This computer stays enrolled (its own device token), and syncs without an admin token.
    expect(await fsp.readFile(nodePath.join(env.WEFT_HOME, 'agent', 'device.json'), 'utf8')).toBe(device);
    second.child.kill('SIGTERM');
    expect(await exited(second.child)).toBe(0);
  });
});
