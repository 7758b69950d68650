// Shared by the small-files and many-files benches: a `weft-proxy` process and a `weft agent`
// process driven through their own interfaces (the proxy's /metrics, the agent's
// /api/status), the synthetic many-files tree, peak resident sets, the machine's load, and
// Syncthing's own scan of a folder (headless, temporary home, REST API).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleToRun } from '../packages/core/bin/entry.js';
// How `weft` runs: the environment and node flags of its #! line (one module says them).
import { AGENT_ENV, AGENT_NODE_FLAGS } from '../packages/core/bin/launch-settings.js';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const WEFT = join(ROOT, 'packages/core/bin/weft.js');
const PROXY = join(ROOT, 'packages/proxy-server/bin/weft-proxy.mjs');

/**
 * Build `weft`'s bundle (packages/core/dist/weft.mjs) unless it is up to date, so the agents
 * the benches start run what a built checkout runs (bin/entry.js; a stale bundle would make
 * them run the sources through tsx, about a CPU-second more per start). Not with
 * WEFT_FROM_SOURCES=1 (the sources on purpose).
 */
export function ensureBundle(): void {
  if (process.env.WEFT_FROM_SOURCES === '1') return;
  if (bundleToRun(join(ROOT, 'packages/core'), {}).bundle) return;
  const built = spawnSync('npm', ['run', 'build', '-w', '@weft/core'], { cwd: ROOT, encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`building weft's bundle failed: ${built.stderr}`);
}

export function has(tool: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0;
}

/** The 1-minute load average, as `uptime` prints it (2 cores shared: say what else ran). */
export function load(): string {
  return (os.loadavg()[0] ?? 0).toFixed(2);
}

/**
 * The synthetic tree of `n` files of 1–16 KiB (random bytes), 1,000 to a folder, cached in
 * .cache/many-N (made once; files dated in the past, settled).
 */
export async function syntheticTree(n: number): Promise<string> {
  const dir = join(ROOT, '.cache', `many-${n}`);
  const done = join(ROOT, '.cache', `many-${n}.done`);
  if (await fsp.stat(done).catch(() => undefined)) return dir;
  await fsp.rm(dir, { recursive: true, force: true });
  const old = new Date(Date.now() - 3_600_000);
  for (let start = 0; start < n; start += 1_000) {
    const sub = join(dir, `d${Math.floor(start / 10_000)}`, `s${(start / 1_000) % 10}`);
    await fsp.mkdir(sub, { recursive: true });
    await Promise.all(
      Array.from({ length: Math.min(1_000, n - start) }, async (_, k) => {
        const f = join(sub, `f${start + k}.txt`);
        await fsp.writeFile(f, randomBytes(1024 + (((start + k) * 7919) % (15 * 1024))));
        await fsp.utimes(f, old, old);
      }),
    );
  }
  await fsp.writeFile(done, '');
  return dir;
}

/** Peak resident set (VmHWM) of a live process, MiB; 0 once it has gone. */
export function peakRssMiB(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** Resident set (VmRSS) of a live process now, MiB; 0 once it has gone. */
function rssMiB(pid: number | undefined): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** CPU-seconds (user + system) a live process has used so far; 0 once it has gone. */
export function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 (utime, stime) in clock ticks; 100 a second on Linux.
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return 0;
  }
}

/** Peak resident sets of a process and its descendants, summed (MiB): Syncthing runs a monitor process. */
export function treePeakRssMiB(pid: number | undefined): number {
  if (pid === undefined) return 0;
  const children = new Map<number, number[]>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(d)]);
    } catch {
      // gone meanwhile
    }
  }
  let sum = 0;
  const todo = [pid];
  for (let p = todo.pop(); p !== undefined; p = todo.pop()) {
    sum += peakRssMiB(p);
    todo.push(...(children.get(p) ?? []));
  }
  return sum;
}

/** Prometheus text: the sum of `name`'s samples whose labels include every one of `labels`. */
export function metric(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const l = m[2] ?? '';
    if (Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`))) sum += Number(m[3]);
  }
  return sum;
}

export interface ProxyProcess {
  readonly child: ChildProcess;
  readonly url: string;
  metrics(): Promise<string>;
  peakRssMiB(): number;
  /** CPU-seconds (user + system) the proxy has used so far. */
  cpuSeconds(): number;
  stop(): Promise<void>;
}

/**
 * A `weft-proxy` process on port 0 with this object tier (`{ type: 'fs' }`: the embedded
 * default) and `more` of its configuration.
 */
export async function startProxy(
  dir: string,
  admin: string,
  objectTier: Record<string, unknown>,
  more: Record<string, unknown> = {},
): Promise<ProxyProcess> {
  const config = join(dir, 'proxy.json');
  // WEFT_BENCH_FS_COPY=keep|drop|cost: the proxy's packs.fsCopy (default: the proxy's, 'keep').
  const fsCopy = process.env.WEFT_BENCH_FS_COPY;
  await fsp.writeFile(
    config,
    JSON.stringify({
      dataDir: join(dir, 'data'),
      adminToken: admin,
      logLevel: 'warn',
      objectTier,
      ...(fsCopy ? { packs: { fsCopy } } : {}),
      ...more,
    }),
    { mode: 0o600 },
  );
  // WEFT_BENCH_PROXY_NODE_ARGS: node flags for the proxy, e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof'.
  const nodeArgs = process.env.WEFT_BENCH_PROXY_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = spawn(process.execPath, [...nodeArgs, PROXY, '--config', config], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((ok, fail) => {
    let out = '';
    child.stdout?.on('data', (b: Buffer) => {
      out += b.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) ok(m[1]);
    });
    child.once('exit', (code) => fail(new Error(`proxy exited ${code}`)));
  });
  return {
    child,
    url,
    metrics: async () => (await fetch(new URL('/metrics', url))).text(),
    peakRssMiB: () => peakRssMiB(child.pid),
    cpuSeconds: () => cpuSeconds(child.pid),
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

export interface AgentStatus {
  state: string;
  pendingOperations: number;
  files: number;
  bytesUploaded: number;
  uploadCompression?: { deflated: number; raw: number; last: 'deflate' | 'raw' };
}

async function agentStatus(state: string): Promise<AgentStatus | undefined> {
  try {
    const info = JSON.parse(await fsp.readFile(join(state, 'agent.json'), 'utf8')) as {
      statusUrl: string;
      secret: string;
    };
    const res = await fetch(new URL('/api/status', info.statusUrl), {
      headers: { 'x-weft-secret': info.secret },
    });
    return res.ok ? ((await res.json()) as AgentStatus) : undefined;
  } catch {
    return undefined;
  }
}

export interface AgentRun {
  /** From spawn to the end of the first full scan (the status leaves "scanning"); 0: not reached. */
  scannedMs: number;
  /** From spawn to idle with nothing queued and every file known; 0: not reached. */
  idleMs: number;
  /** From spawn to `durable()` answering true after idle (0: not reached or not asked). */
  durableMs: number;
  rssMiB: number;
  /** CPU-seconds the agent used (user + system), read last before it was stopped. */
  cpuSeconds: number;
  slowestStatusMs: number;
  last: AgentStatus | undefined;
  /** Set when the agent exited by itself before the run was over (its stderr is the bench's). */
  exited?: number | null;
}

/**
 * Run `weft agent` on `folder` until idle with `files` files (or, when the scanner leaves
 * some out, idle with nothing queued for 5 s), then until `durable()` says so; times from
 * spawn, peak RSS sampled every 100 ms and at the end.
 */
export async function runAgent(o: {
  folder: string;
  state: string;
  server: string;
  tokenFile: string;
  files: number;
  limitMs: number;
  durable?: () => Promise<boolean>;
  /** Told the agent's pid once spawned (timeline.ts samples its CPU). */
  onSpawn?: (pid: number | undefined) => void;
  /** Told each state the agent reports when it changes, and when durable() first holds. */
  onState?: (state: string) => void;
}): Promise<AgentRun> {
  await fsp.rm(join(o.state, 'agent.json'), { force: true });
  ensureBundle();
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [
      // As `weft agent` runs (its #! line's flags), and node flags for the agent alone, e.g.
      // '--cpu-prof --cpu-prof-dir=/tmp/prof' or '--heap-prof'.
      ...AGENT_NODE_FLAGS,
      ...(process.env.WEFT_BENCH_AGENT_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
      WEFT,
      'agent',
      '--folder',
      o.folder,
      '--server',
      o.server,
      '--state',
      o.state,
      '--token-file',
      o.tokenFile,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ...AGENT_ENV } },
  );
  o.onSpawn?.(child.pid);
  let lastState = '';
  const run: AgentRun = {
    scannedMs: 0,
    idleMs: 0,
    durableMs: 0,
    rssMiB: 0,
    cpuSeconds: 0,
    slowestStatusMs: 0,
    last: undefined,
  };
  let sawScanning = false;
  let quietSince = 0;
  let traced = 0;
  while (performance.now() - t0 < o.limitMs && child.exitCode === null) {
    const asked = performance.now();
    const s = await agentStatus(o.state);
    if (s) {
      run.slowestStatusMs = Math.max(run.slowestStatusMs, performance.now() - asked);
      run.last = s;
    }
    run.rssMiB = Math.max(run.rssMiB, peakRssMiB(child.pid));
    run.cpuSeconds = Math.max(run.cpuSeconds, cpuSeconds(child.pid));
    // WEFT_BENCH_TRACE=1: a line a second — where in the run the memory and the CPU go.
    if (process.env.WEFT_BENCH_TRACE && performance.now() - traced >= 1_000) {
      traced = performance.now();
      console.error(
        `  ${((traced - t0) / 1000).toFixed(1)} s: ${s?.state ?? '(no answer)'}, ` +
          `${s?.pendingOperations ?? '?'} queued, ${s?.files ?? '?'} files, ` +
          `${s ? (s.bytesUploaded / 1048576).toFixed(0) : '?'} MiB up, ` +
          `RSS ${rssMiB(child.pid).toFixed(0)} MiB (peak ${run.rssMiB.toFixed(0)}), ` +
          `CPU ${run.cpuSeconds.toFixed(1)} s, status ${(performance.now() - asked).toFixed(0)} ms`,
      );
    }
    if (s && s.state !== lastState) {
      lastState = s.state;
      o.onState?.(`${s.state} (${s.pendingOperations} queued, ${s.files} files)`);
    }
    if (s?.state === 'scanning') sawScanning = true;
    else if (s && sawScanning && run.scannedMs === 0) run.scannedMs = performance.now() - t0;
    if (run.idleMs === 0 && s?.state === 'idle' && s.pendingOperations === 0) {
      quietSince ||= performance.now();
      if (s.files === o.files || (sawScanning && performance.now() - quietSince > 5_000)) {
        run.idleMs = (s.files === o.files ? performance.now() : quietSince) - t0;
        if (run.scannedMs === 0) run.scannedMs = run.idleMs;
      }
    } else if (run.idleMs === 0) quietSince = 0;
    if (run.idleMs > 0) {
      if (!o.durable) break;
      if (await o.durable()) {
        run.durableMs = performance.now() - t0;
        o.onState?.('durable in S3');
        break;
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  run.rssMiB = Math.max(run.rssMiB, peakRssMiB(child.pid));
  run.cpuSeconds = Math.max(run.cpuSeconds, cpuSeconds(child.pid));
  if (child.exitCode !== null || child.signalCode !== null) run.exited = child.exitCode;
  if (child.exitCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
  return run;
}

/** A free loopback port (for Syncthing, which takes its GUI address on the command line). */
async function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = net.createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => ok(port));
    });
  });
}

export interface SyncthingScan {
  readonly version: string;
  /** From adding the folder to Syncthing's index holding every file, idle. */
  readonly seconds: number;
  readonly localFiles: number;
  readonly rssMiB: number;
}

/**
 * Syncthing's own first scan of `folder` (send-only, no watcher, no peers, no discovery):
 * `syncthing serve` with a temporary home, the folder added through the REST API, then
 * `/rest/db/status` polled until the folder is idle with `files` files in its index.
 * Its `.stfolder` marker is removed afterwards. Returns a reason when it cannot run.
 */
export async function syncthingScan(
  folder: string,
  files: number,
  limitMs: number,
): Promise<SyncthingScan | string> {
  if (!has('syncthing')) {
    // Debian's syncthing, installed by the project script (apt-get; needs root).
    const r = spawnSync('sh', [join(ROOT, 'scripts', 'ensure-syncthing.sh')], { encoding: 'utf8' });
    if (r.status !== 0) return `syncthing not installed (ensure-syncthing: ${r.stderr.trim().slice(-200)})`;
  }
  const version =
    /syncthing (v\S+)/.exec(spawnSync('syncthing', ['--version'], { encoding: 'utf8' }).stdout)?.[1] ?? '?';
  const home = await fsp.mkdtemp(join(os.tmpdir(), 'weft-bench-syncthing-'));
  const apiKey = randomBytes(16).toString('hex');
  const port = await freePort();
  const api = `http://127.0.0.1:${port}`;
  const child = spawn(
    'syncthing',
    [
      'serve',
      `--home=${home}`,
      '--no-browser',
      '--no-restart',
      '--no-upgrade',
      '--no-default-folder',
      '--skip-port-probing',
      `--gui-address=${api}`,
      `--gui-apikey=${apiKey}`,
    ],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, STNOUPGRADE: '1', STNODEFAULTFOLDER: '1' },
    },
  );
  let stderr = '';
  child.stderr?.on('data', (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
  const call = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(api + path, {
      method,
      headers: { 'X-API-Key': apiKey, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!res.ok) throw new Error(`syncthing ${method} ${path}: ${res.status} ${await res.text()}`);
    const text = await res.text();
    return text ? (JSON.parse(text) as unknown) : undefined;
  };
  try {
    const up = performance.now();
    for (;;) {
      if (child.exitCode !== null) return `syncthing exited ${child.exitCode}: ${stderr.slice(-300)}`;
      if (performance.now() - up > 60_000) return 'syncthing API did not answer in 60 s';
      try {
        await call('GET', '/rest/system/ping');
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    // Alone: no discovery, relays, NAT or usage reporting; listening on loopback only.
    await call('PATCH', '/rest/config/options', {
      globalAnnounceEnabled: false,
      localAnnounceEnabled: false,
      relaysEnabled: false,
      natEnabled: false,
      urAccepted: -1,
      listenAddresses: ['tcp://127.0.0.1:0'],
    });
    const t0 = performance.now();
    await call('POST', '/rest/config/folders', {
      id: 'bench',
      label: 'bench',
      path: folder,
      type: 'sendonly',
      rescanIntervalS: 3600,
      fsWatcherEnabled: false,
    });
    let rssMiB = 0;
    let status: { state?: string; localFiles?: number } = {};
    while (performance.now() - t0 < limitMs) {
      rssMiB = Math.max(rssMiB, treePeakRssMiB(child.pid));
      status = ((await call('GET', '/rest/db/status?folder=bench').catch(() => ({}))) ?? {}) as typeof status;
      if (status.state === 'idle' && (status.localFiles ?? 0) >= files) {
        return {
          version,
          seconds: (performance.now() - t0) / 1000,
          localFiles: status.localFiles ?? 0,
          rssMiB,
        };
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    return `syncthing ${version}: not idle with ${files} files after ${limitMs / 1000} s (${JSON.stringify(status)})`;
  } finally {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    await fsp.rm(home, { recursive: true, force: true });
    await fsp.rm(join(folder, '.stfolder'), { recursive: true, force: true });
  }
}

/**
 * Every file of the corpus read once, so that each row starts with it in the OS's page cache:
 * the rows ran one after another, and the first to read a cold corpus paid its disk (the
 * agent's first scan of the 100k tree: 13.6 s of reads cold, 1.6 s warm) while the next
 * found it warm — Weft's rows, run first, were measured cold and rclone's warm. A file just
 * dropped into a folder is in the cache anyway. Returns the seconds it took (printed).
 */
export async function warm(dir: string): Promise<number> {
  const t0 = performance.now();
  const files: string[] = [];
  for (const e of await fsp.readdir(dir, { withFileTypes: true, recursive: true }))
    if (e.isFile()) files.push(join(e.parentPath, e.name));
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < files.length) await fsp.readFile(files[next++]!);
    }),
  );
  return (performance.now() - t0) / 1000;
}
