// The proxy alone ingesting a small-file drop (issue #16): the 10,029-file corpus (or any
// folder) encoded into bundles of up to 4 MiB beforehand, uploaded one after another (CONC
// at a time) to an in-process proxy with the embedded object tier, then every file awaited in a pack.
// Prints the proxy's CPU-seconds (process.cpuUsage: every thread of this process, the
// client's share small) for the ingest and until every file is in a pack (the packer left to
// its target, idle flush and timeout; FLUSH=1: flushed at once) — the figure that survives the
// machine's load, unlike wall time — beside the load average; and the main thread's own
// CPU-seconds (Linux: /proc/self/task/<pid>/stat), the proxy's one event loop, which work moved
// to worker threads (the in-place writes, fs/in-place-worker.ts) leaves; then every thread's
// user and system CPU-seconds over the run (the client's share is on the main thread). Printed,
// never asserted.
//
//   npx tsx bench/bundle-ingest.bench.ts [folder]          (default .cache/small)
//   SYNC_MS=0 npx tsx bench/bundle-ingest.bench.ts          (fsync per file, no write-ahead log)
//   node --cpu-prof --import tsx bench/bundle-ingest.bench.ts
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ProxyClient } from '@weft/core';
import { startProxyServer } from '@weft/proxy-server';
import {
  BUNDLE_OVERHEAD,
  type BundleEntry,
  bundleEntrySize,
  encodeBundle,
  MAX_BUNDLE_BYTES,
} from '@weft/wire';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const corpus = process.argv[2] ?? join(ROOT, '.cache', 'small');
const conc = Number(process.env.CONC ?? 1);
const files: string[] = [];
for (const e of await fsp.readdir(corpus, { withFileTypes: true, recursive: true }))
  if (e.isFile()) files.push(join(e.parentPath, e.name));
const bundles: Uint8Array[] = [];
let batch: BundleEntry[] = [];
let bytes = BUNDLE_OVERHEAD;
for (const f of files) {
  const content = await fsp.readFile(f);
  const entry: BundleEntry = {
    path: `c/${f.slice(corpus.length + 1)}`,
    mtimeMs: 1_700_000_000_000,
    sha256: createHash('sha256').update(content).digest('hex'),
    content,
  };
  const size = bundleEntrySize(entry.path, undefined, content.byteLength);
  if (bytes + size > MAX_BUNDLE_BYTES) {
    bundles.push(encodeBundle(batch));
    batch = [];
    bytes = BUNDLE_OVERHEAD;
  }
  batch.push(entry);
  bytes += size;
}
if (batch.length > 0) bundles.push(encodeBundle(batch));

const work = await fsp.mkdtemp(join(os.tmpdir(), 'weft-bundle-ingest-'));
try {
  const adminToken = randomBytes(24).toString('hex');
  const server = await startProxyServer({
    dataDir: join(work, 'proxy'),
    adminToken,
    logLevel: 'warn',
    objectTier: { type: 'fs' },
    // SYNC_MS=0: an fsync per file instead of the write-ahead log (bundleSyncMs), to compare.
    ...(process.env.SYNC_MS !== undefined ? { bundleSyncMs: Number(process.env.SYNC_MS) } : {}),
  });
  const { token } = await ProxyClient.enrol(server.url, { user: 'bench', deviceName: 'bench', adminToken });
  const client = new ProxyClient({ baseUrl: server.url, token });
  const snap0 = threadSnap();
  const main0 = mainThreadCpu();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let next = 0;
  let refused = 0;
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (next < bundles.length) {
        const results = await client.uploadBundle(bundles[next++]!);
        refused += results.filter((r) => r.result.status !== 'applied').length;
      }
    }),
  );
  const t1 = performance.now();
  const cpu1 = process.cpuUsage(cpu0);
  const main1 = mainThreadCpu();
  // The packer left to itself (target size, idle flush, 5 s maximum age) until every small
  // file is in a pack: the tail after the last bundle. FLUSH=1 flushes at once instead.
  if (process.env.FLUSH === '1') await server.packer?.flush();
  // (Polled every 100 ms: each count reads the index, ~6 ms of this process's CPU at 10,000 files,
  // which every 20 ms added ~0.5 CPU-s to the figure below.)
  else while (((await server.packer?.pendingCount()) ?? 0) > 0) await new Promise((r) => setTimeout(r, 100));
  const t2 = performance.now();
  const cpu2 = process.cpuUsage(cpu0);
  const main2 = mainThreadCpu();
  const s = (c: NodeJS.CpuUsage): string => ((c.user + c.system) / 1e6).toFixed(2);
  console.log(
    `${files.length} files in ${bundles.length} bundles (${conc} at a time), ${refused} not applied: ` +
      `ingest ${((t1 - t0) / 1000).toFixed(2)} s, ${s(cpu1)} CPU-s (main thread ${(main1 - main0).toFixed(2)}); all in packs ` +
      `${((t2 - t0) / 1000).toFixed(2)} s (${((t2 - t1) / 1000).toFixed(2)} s after the last bundle), ${s(cpu2)} CPU-s ` +
      `(main thread ${(main2 - main0).toFixed(2)}); load ${(os.loadavg()[0] ?? 0).toFixed(2)}`,
  );
  {
    // Each thread's CPU over the run (Linux): the event loop, the in-place writer (its system
    // time is the kernel's file creation), the pack deflate worker, V8's GC helpers, libuv's pool.
    const snap1 = threadSnap();
    const rows: [string, number, number][] = [];
    for (const [t, [name, u, sy]] of snap1) {
      const o = snap0.get(t);
      rows.push([`${t === String(process.pid) ? 'MAIN' : name}/${t}`, u - (o?.[1] ?? 0), sy - (o?.[2] ?? 0)]);
    }
    for (const [k, u, sy] of rows.sort((x, y) => y[1] + y[2] - x[1] - x[2]))
      if (u + sy > 0.05) console.log(`  thread ${k}: user ${u.toFixed(2)} sys ${sy.toFixed(2)}`);
  }
  await server.close();
} finally {
  await fsp.rm(work, { recursive: true, force: true });
}

/** Every thread of this process: its name, user and system CPU-seconds (empty off Linux). */
function threadSnap(): Map<string, [string, number, number]> {
  const m = new Map<string, [string, number, number]>();
  try {
    for (const t of readdirSync('/proc/self/task')) {
      const stat = readFileSync(`/proc/self/task/${t}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      m.set(t, [name, Number(f[11]) / 100, Number(f[12]) / 100]);
    }
  } catch {
    // not Linux, or a thread ended while read
  }
  return m;
}

/** CPU-seconds of this process's main thread (utime + stime of its task; NaN off Linux). */
function mainThreadCpu(): number {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / 100; // USER_HZ: 100 on Linux
  } catch {
    return NaN;
  }
}
