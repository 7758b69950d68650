// The agent at 10,000 and 100,000 files (issue #16; 1,000,000 with WEFT_BENCH_1M=1): a
// `weft agent` process and a `weft-proxy` process (object tier: the embedded fs default),
// a synthetic tree of 1–16 KiB files, 1,000 to a folder. Prints, per size: time to the end
// of the first full scan (the status leaves "scanning" with everything queued), time to idle
// (everything uploaded), a no-change restart (start → idle again: the full rescan of an
// unchanged folder), and the peak resident set (VmHWM) of the agent and of the proxy, beside
// Syncthing's own first scan of the same folder (Debian's syncthing, headless, temporary home;
// scripts/ensure-syncthing.sh; WEFT_BENCH_SYNCTHING=0 leaves it out), the agent's CPU-seconds
// (from /proc, comparable on a loaded machine where wall times are not) and the 1-minute load
// average. Each of Weft's first run and Syncthing's scan starts with the tree in the page
// cache (read once before it). Figures are printed, never asserted.
//
//   npx tsx bench/many-files.bench.ts [10000 100000 …]     (from the repository root)
//
// Goals (issue #16): 100k reaches idle; agent peak RSS ≤ 250 MB at 100k, sub-linear; a
// no-change rescan of 100k ≤ 3 s.
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import { join } from 'node:path';
import { ProxyClient } from '@weft/core';
import { load, runAgent, startProxy, syncthingScan, syntheticTree, warm } from './agent-procs.ts';

const SIZES = process.argv
  .slice(2)
  .map(Number)
  .filter((n) => n > 0);
if (SIZES.length === 0) SIZES.push(10_000, 100_000, ...(process.env.WEFT_BENCH_1M ? [1_000_000] : []));

const rows: string[][] = [
  [
    'files',
    'first full scan (s)',
    'idle (s)',
    'no-change restart → idle (s)',
    'agent peak RSS first / restart (MiB)',
    'agent CPU first / restart (s)',
    'proxy peak RSS (MiB)',
    'slowest status (ms)',
    'Syncthing first scan (s)',
    'Syncthing peak RSS (MiB)',
    'load',
  ],
];
const limitMs = Number(process.env.WEFT_BENCH_LIMIT_MS ?? 3_600_000);
for (const n of SIZES) {
  const folder = await syntheticTree(n);
  const work = await fsp.mkdtemp(join(os.tmpdir(), 'weft-many-'));
  const admin = randomBytes(16).toString('hex');
  const proxy = await startProxy(work, admin, { type: 'fs' });
  const { token } = await ProxyClient.enrol(proxy.url, {
    user: 'bench',
    deviceName: 'bench',
    adminToken: admin,
  });
  const tokenFile = join(work, 'token');
  await fsp.writeFile(tokenFile, token, { mode: 0o600 });
  const agent = { folder, state: join(work, 'state'), server: proxy.url, tokenFile, files: n, limitMs };
  console.error(`${n}: tree read into the page cache in ${(await warm(folder)).toFixed(1)} s`);
  const first = await runAgent(agent);
  const again = first.idleMs > 0 ? await runAgent(agent) : first;
  const proxyRss = proxy.peakRssMiB();
  await proxy.stop();
  await fsp.rm(work, { recursive: true, force: true });
  const syncthing = async (): Promise<Awaited<ReturnType<typeof syncthingScan>>> => {
    console.error(`${n}: tree read into the page cache in ${(await warm(folder)).toFixed(1)} s`);
    return syncthingScan(folder, n, limitMs);
  };
  const st =
    process.env.WEFT_BENCH_SYNCTHING === '0' ? 'left out (WEFT_BENCH_SYNCTHING=0)' : await syncthing();
  if (typeof st === 'string') console.log(`${n}: Syncthing — ${st}`);
  const s = (ms: number): string => (ms > 0 ? (ms / 1000).toFixed(1) : 'not reached');
  rows.push([
    n.toLocaleString('en'),
    s(first.scannedMs),
    s(first.idleMs),
    s(again.idleMs),
    `${first.rssMiB.toFixed(0)} / ${again.rssMiB.toFixed(0)}`,
    `${first.cpuSeconds.toFixed(1)} / ${again.cpuSeconds.toFixed(1)}`,
    proxyRss.toFixed(0),
    Math.max(first.slowestStatusMs, again.slowestStatusMs).toFixed(0),
    typeof st === 'string' ? 'not run' : st.seconds.toFixed(1),
    typeof st === 'string' ? '—' : st.rssMiB.toFixed(0),
    load(),
  ]);
}
const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
for (const r of rows) console.log(r.map((c, i) => c.padStart(widths[i] ?? 0)).join('  '));
if (process.env.WEFT_BENCH_FS_COPY)
  console.log(`proxy packs.fsCopy: ${process.env.WEFT_BENCH_FS_COPY} (WEFT_BENCH_FS_COPY)`);
