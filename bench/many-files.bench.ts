// The agent at 10,000 and 100,000 files (issue #16; 1,000,000 with WEFT_BENCH_1M=1): a
// `weft agent` process and a `weft-proxy` process (object tier: the embedded fs default),
// a synthetic tree of 1–16 KiB files, 1,000 to a folder. Prints, per size: time to the end
// of the first full scan (the status leaves "scanning" with everything queued), time to idle
// (everything uploaded), a no-change restart (start → idle again: the full rescan of an
// unchanged folder), and the peak resident set (VmHWM) of the agent and of the proxy.
// Syncthing's own scan of the same folder is still to be driven from here (the issue asks for
// it beside these figures); figures are printed, never asserted.
//
//   npx tsx bench/many-files.bench.ts [10000 100000 …]     (from the repository root)
//
// Goals (issue #16): 100k reaches idle; agent peak RSS ≤ 250 MB at 100k, sub-linear; a
// no-change rescan of 100k ≤ 3 s.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ProxyClient } from '@weft/core';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const WEFT = join(ROOT, 'packages/core/bin/weft.js');
const PROXY = join(ROOT, 'packages/proxy-server/bin/weft-proxy.mjs');
const SIZES = process.argv
  .slice(2)
  .map(Number)
  .filter((n) => n > 0);
if (SIZES.length === 0) SIZES.push(10_000, 100_000, ...(process.env.WEFT_BENCH_1M ? [1_000_000] : []));

/** The tree, cached in .cache/many-N (made once; files dated in the past, settled). */
async function tree(n: number): Promise<string> {
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

function peakRssMiB(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(
      spawnSync('cat', [`/proc/${pid}/status`], { encoding: 'utf8' }).stdout,
    );
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

async function startProxy(dir: string, admin: string): Promise<{ child: ChildProcess; url: string }> {
  const config = join(dir, 'proxy.json');
  await fsp.writeFile(
    config,
    JSON.stringify({
      dataDir: join(dir, 'data'),
      adminToken: admin,
      logLevel: 'warn',
      objectTier: { type: 'fs' },
    }),
  );
  const child = spawn(process.execPath, [PROXY, '--config', config], {
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
  return { child, url };
}

interface Status {
  state: string;
  pendingOperations: number;
  files: number;
}

async function status(state: string): Promise<Status | undefined> {
  try {
    const info = JSON.parse(await fsp.readFile(join(state, 'agent.json'), 'utf8')) as {
      statusUrl: string;
      secret: string;
    };
    const res = await fetch(new URL('/api/status', info.statusUrl), {
      headers: { 'x-weft-secret': info.secret },
    });
    return res.ok ? ((await res.json()) as Status) : undefined;
  } catch {
    return undefined;
  }
}

/** Run the agent until idle with `files` files; times from spawn, peak RSS at the end. */
async function runAgent(
  folder: string,
  state: string,
  url: string,
  tokenFile: string,
  files: number,
  limitMs: number,
): Promise<{ scannedMs: number; idleMs: number; rssMiB: number; slowestStatusMs: number }> {
  await fsp.rm(join(state, 'agent.json'), { force: true });
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [WEFT, 'agent', '--folder', folder, '--server', url, '--state', state, '--token-file', tokenFile],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  let scannedMs = 0;
  let idleMs = 0;
  let sawScanning = false;
  let slowestStatusMs = 0;
  let rssMiB = 0;
  while (performance.now() - t0 < limitMs && idleMs === 0) {
    const asked = performance.now();
    const s = await status(state);
    if (s) slowestStatusMs = Math.max(slowestStatusMs, performance.now() - asked);
    rssMiB = Math.max(rssMiB, peakRssMiB(child.pid));
    if (s?.state === 'scanning') sawScanning = true;
    else if (s && sawScanning && scannedMs === 0) scannedMs = performance.now() - t0;
    if (s?.state === 'idle' && s.pendingOperations === 0 && s.files === files) {
      idleMs = performance.now() - t0;
      if (scannedMs === 0) scannedMs = idleMs;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  rssMiB = Math.max(rssMiB, peakRssMiB(child.pid));
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
  return { scannedMs, idleMs, rssMiB, slowestStatusMs };
}

function syncthingScan(): string {
  if (spawnSync('sh', ['-c', 'command -v syncthing']).status !== 0) return 'syncthing not installed';
  return 'syncthing installed, but its scan is not driven by this bench yet';
}

const rows: string[][] = [
  [
    'files',
    'first full scan (s)',
    'idle (s)',
    'no-change restart → idle (s)',
    'agent peak RSS (MiB)',
    'proxy peak RSS (MiB)',
    'slowest status (ms)',
  ],
];
for (const n of SIZES) {
  const folder = await tree(n);
  const work = await fsp.mkdtemp(join(os.tmpdir(), 'weft-many-'));
  const admin = randomBytes(16).toString('hex');
  const proxy = await startProxy(work, admin);
  const { token } = await ProxyClient.enrol(proxy.url, {
    user: 'bench',
    deviceName: 'bench',
    adminToken: admin,
  });
  const tokenFile = join(work, 'token');
  await fsp.writeFile(tokenFile, token, { mode: 0o600 });
  const state = join(work, 'state');
  const limit = Number(process.env.WEFT_BENCH_LIMIT_MS ?? 3_600_000);
  const first = await runAgent(folder, state, proxy.url, tokenFile, n, limit);
  const again = await runAgent(folder, state, proxy.url, tokenFile, n, limit);
  const proxyRss = peakRssMiB(proxy.child.pid);
  proxy.child.kill('SIGTERM');
  await new Promise((r) => proxy.child.once('exit', r));
  await fsp.rm(work, { recursive: true, force: true });
  const s = (ms: number): string => (ms > 0 ? (ms / 1000).toFixed(1) : 'not reached');
  rows.push([
    n.toLocaleString('en'),
    s(first.scannedMs),
    s(first.idleMs),
    s(again.idleMs),
    Math.max(first.rssMiB, again.rssMiB).toFixed(0),
    proxyRss.toFixed(0),
    Math.max(first.slowestStatusMs, again.slowestStatusMs).toFixed(0),
  ]);
  console.log(`${n}: beside Syncthing — ${syncthingScan()}`);
}
const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
for (const r of rows) console.log(r.map((c, i) => c.padStart(widths[i] ?? 0)).join('  '));
