/**
 * A `weft-proxy` as its own process, so that a scenario can `kill -9` it and start it again
 * on the same port and data (proxy-kill, agent-failover, cluster-harness.ts), and the
 * pieces such scenarios share: a free loopback port and one SQL statement on PostgreSQL.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as net from 'node:net';
import * as nodePath from 'node:path';
import postgres from 'postgres';

const PROXY = nodePath.resolve(
  new URL('../../packages/proxy-server/bin/weft-proxy.mjs', import.meta.url).pathname,
);

/**
 * What `node` runs: the bundle the e2e global setup built (proxy-bundle.ts), else the bin
 * (TypeScript through tsx).
 */
const proxyScript = (): string => process.env.WEFT_PROXY_BUNDLE ?? PROXY;

/** A loopback port free a moment ago (the process started next binds it). */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as net.AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** One statement on a PostgreSQL database (CREATE DATABASE for startPostgres). */
export async function adminSql(url: string, statement: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => undefined });
  try {
    await sql.unsafe(statement);
  } finally {
    await sql.end();
  }
}

export interface ProxyProcessOptions {
  /** Named in errors (default 'the proxy'). */
  readonly name?: string;
  /** Called with the process as soon as it is spawned, before it answers. */
  readonly onSpawn?: (child: ChildProcess) => void;
  /** Its output (stdout and stderr: its log), as it comes. */
  readonly onOutput?: (text: string) => void;
}

/**
 * `weft-proxy --config <configFile>`; resolves once `<url>/healthz` answers. Starting takes
 * seconds, much longer on a busy machine: it waits up to two minutes. When it exits first or
 * never answers, the error carries its last output.
 */
export async function startProxyProcess(
  configFile: string,
  url: string,
  o: ProxyProcessOptions = {},
): Promise<ChildProcess> {
  const name = o.name ?? 'the proxy';
  const child = spawn(process.execPath, [proxyScript(), '--config', configFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  o.onSpawn?.(child);
  let tail = '';
  const keep = (b: Buffer): void => {
    const text = b.toString();
    tail = (tail + text).slice(-2000);
    o.onOutput?.(text);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  for (let i = 0; i < 2400; i++) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${name} exited (${child.exitCode ?? child.signalCode}): ${tail}`);
    try {
      if ((await fetch(new URL('/healthz', url))).ok) return child;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill('SIGKILL');
  throw new Error(`${name} did not start: ${tail}`);
}
