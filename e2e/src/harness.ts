/**
 * Scenario helpers: a real proxy server (object tier on the embedded fs default or on
 * s3proxy), real agents (in-process engines, or `weft agent` child processes for crash
 * tests), and tree comparisons by content hash.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, writeFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { Engine, type EngineOptions, type FolderStatus, ProxyClient } from '@weft/core';
import type { S3Endpoint } from '@weft/providers/testing';
import { type ProxyConfigInput, startProxyServer } from '@weft/proxy-server';
import { AGENT_ENV, AGENT_NODE_FLAGS } from '../../packages/core/bin/launch-settings.js';

export interface TestProxy {
  readonly url: string;
  readonly adminToken: string;
  readonly dataDir: string;
  /** The object tier's key prefix on s3proxy (pass it back to restart on the same data). */
  readonly s3Prefix: string;
  close(): Promise<void>;
}

/**
 * A running agent's status (`GET /api/status`, as `weft status` asks it) from its state
 * folder's agent.json (address and the 0600 secret); undefined while there is no agent
 * answering there yet.
 */
export async function agentStatus(stateDir: string): Promise<FolderStatus | undefined> {
  try {
    const info = JSON.parse(await fsp.readFile(nodePath.join(stateDir, 'agent.json'), 'utf8')) as {
      statusUrl: string;
      secret?: string;
    };
    const res = await fetch(new URL('/api/status', info.statusUrl), {
      headers: info.secret ? { 'x-weft-secret': info.secret } : {},
    });
    return res.ok ? ((await res.json()) as FolderStatus) : undefined;
  } catch {
    return undefined;
  }
}

/** The `weft` command (packages/core/bin/weft.js). */
export const WEFT_BIN = nodePath.resolve(
  new URL('../../packages/core/bin/weft.js', import.meta.url).pathname,
);

/**
 * A `weft agent` process on `folder` with its state in `state`, as a person starts it. The
 * token travels in a 0600 file beside the state folder, never on the command line (where
 * `ps` shows it). Its stderr is a pipe for the test to read; more arguments (`--device`)
 * go after the rest.
 */
export function spawnAgent(
  folder: string,
  state: string,
  server: string,
  token: string,
  more: readonly string[] = [],
): ChildProcess {
  const tokenFile = `${state}.token`;
  writeFileSync(tokenFile, token, { mode: 0o600 });
  const args = ['agent', '--folder', folder, '--server', server, '--state', state, '--token-file', tokenFile];
  // With the node flags and environment of weft's #! line, as the command runs.
  return spawn(process.execPath, [...AGENT_NODE_FLAGS, WEFT_BIN, ...args, ...more], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...AGENT_ENV },
  });
}

export async function tempDir(prefix: string): Promise<string> {
  return fsp.mkdtemp(nodePath.join(os.tmpdir(), `weft-e2e-${prefix}-`));
}

export async function startTestProxy(
  tier: 'fs' | S3Endpoint,
  dataDir?: string,
  port = 0,
  s3Prefix = `e2e-${randomBytes(4).toString('hex')}`,
  /** More of the proxy's configuration (quota, shares, a given admin token, …). */
  more: ProxyConfigInput = {},
): Promise<TestProxy> {
  const dir = dataDir ?? (await tempDir('proxy'));
  const adminToken = more.adminToken ?? randomBytes(24).toString('hex');
  const server = await startProxyServer({
    ...more,
    dataDir: dir,
    port,
    adminToken,
    logLevel: 'warn',
    gcGraceMs: 0,
    objectTier:
      tier === 'fs'
        ? { type: 'fs' }
        : {
            type: 's3',
            bucket: tier.bucket,
            prefix: s3Prefix,
            endpoint: tier.endpoint,
            region: tier.region,
            forcePathStyle: true,
            accessKeyId: tier.accessKeyId,
            secretAccessKey: tier.secretAccessKey,
          },
  });
  return { url: server.url, adminToken, dataDir: dir, s3Prefix, close: () => server.close() };
}

export interface Device {
  readonly name: string;
  readonly folder: string;
  readonly stateDir: string;
  readonly engine: Engine;
  readonly client: ProxyClient;
  stop(): Promise<void>;
}

export async function enrol(proxy: TestProxy, user: string, deviceName: string): Promise<string> {
  const r = await ProxyClient.enrol(proxy.url, { user, deviceName, adminToken: proxy.adminToken });
  return r.token;
}

export async function startDevice(
  proxy: TestProxy,
  name: string,
  options: {
    user?: string;
    token?: string;
    folder?: string;
    stateDir?: string;
    /** Engine options; a client given here must be a ProxyClient (the device exposes it). */
    engine?: Partial<EngineOptions> & { client?: ProxyClient };
  } = {},
): Promise<Device> {
  const token = options.token ?? (await enrol(proxy, options.user ?? 'alice', name));
  const folder = options.folder ?? nodePath.join(await tempDir(name), 'Weft');
  const stateDir = options.stateDir ?? nodePath.join(nodePath.dirname(folder), 'state');
  const client = options.engine?.client ?? new ProxyClient({ baseUrl: proxy.url, token });
  const engine = await Engine.open({
    folder,
    stateDir,
    client,
    deviceName: name,
    watch: false,
    settleMs: 0,
    offlineRetryMs: 200,
    ...options.engine,
  });
  await engine.start();
  return { name, folder, stateDir, engine, client, stop: () => engine.stop() };
}

export async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const c of createReadStream(file)) h.update(c as Buffer);
  return h.digest('hex');
}

/** path → sha256 for files, 'dir' for folders, of a local folder (engine files excluded). */
export async function localTree(root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  // A live engine may move things while we look: entries that vanish are skipped.
  const gone = (e: unknown): boolean => (e as NodeJS.ErrnoException).code === 'ENOENT';
  const walk = async (dir: string, rel: string): Promise<void> => {
    let entries: import('node:fs').Dirent[];
    try {
      entries = await fsp.readdir(dir, { withFileTypes: true });
    } catch (e) {
      if (gone(e)) return;
      throw e;
    }
    for (const e of entries) {
      if (e.name.startsWith('.weft-partial-')) continue;
      const p = rel ? `${rel}/${e.name}` : e.name;
      const abs = nodePath.join(dir, e.name);
      if (e.isDirectory()) {
        out.set(p, 'dir');
        await walk(abs, p);
      } else if (e.isFile()) {
        try {
          out.set(p, await sha256File(abs));
        } catch (err) {
          if (!gone(err)) throw err;
        }
      }
    }
  };
  await walk(root, '');
  return out;
}

/** The same map for what the proxy holds for a user (through the API). */
export async function remoteTree(client: ProxyClient): Promise<Map<string, string>> {
  const listing = await client.list('', true);
  return new Map(listing.entries.map((e) => [e.path, e.kind === 'dir' ? 'dir' : (e.sha256 ?? '?')]));
}

export function sorted(m: Map<string, string>): [string, string][] {
  return [...m.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1));
}

/**
 * Sync every device until a full round changes nothing on the server (its sequence stays
 * put) and nothing waits in any queue; bounded.
 */
export async function settle(devices: readonly Device[], rounds = 16): Promise<void> {
  const first = devices[0];
  if (!first) return;
  for (let i = 0; i < rounds; i++) {
    for (const d of devices) await d.engine.waitIdle();
    const before = (await first.client.whoami()).seq;
    for (const d of devices) await d.engine.syncNow();
    const after = (await first.client.whoami()).seq;
    const pending = devices.reduce((n, d) => n + d.engine.journal.pendingOps().length, 0);
    if (after === before && pending === 0) return;
  }
}

export async function copyTree(from: string, to: string): Promise<number> {
  await fsp.cp(from, to, { recursive: true });
  let n = 0;
  const walk = async (d: string): Promise<void> => {
    for (const e of await fsp.readdir(d, { withFileTypes: true })) {
      if (e.isDirectory()) await walk(nodePath.join(d, e.name));
      else n += 1;
    }
  };
  await walk(to);
  return n;
}

/** Repo-root cache folder (gitignored) for corpus downloads. */
export function cacheDir(): string {
  return nodePath.resolve(new URL('../../.cache', import.meta.url).pathname);
}

/** mulberry32: a small deterministic PRNG. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
