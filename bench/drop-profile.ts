// Where the time of a small-file drop goes (issue #16, "the agent at 10,000 and 100,000
// files"): one in-process engine and proxy — the small-files bench's Weft row alone — with
// the phases timed from engine start: end of the scan (the status leaves "scanning"), the
// first bundle request, the last bundle answer, idle, and "stored and durable in S3" (the
// packer flushed); then a no-change rescan (the whole folder again, nothing to send). Also prints the bundles sent, the longest event-loop stall (what the UI
// would wait for) and the peak RSS of this process (agent and proxy together). Run under
// `node --cpu-prof` to see which functions the time goes to. Figures are printed, never
// asserted; run it beside `uptime` (the machine's load moves them a lot).
//
//   npx tsx bench/drop-profile.ts [--tier s3|fs] [--files N] [corpus-folder]
//   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/drop-profile.ts --files 100000
//
// Default corpus: .cache/small (../shared/corpus/small-files.sh, the small-files bench's);
// --files N makes a synthetic tree of N files of 1–16 KiB (1,000 to a folder) in .cache/many-N.
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Engine, ProxyClient } from '@weft/core';
import { startS3Proxy, type RunningS3Proxy } from '@weft/providers/testing';
import { startProxyServer } from '@weft/proxy-server';
import { syntheticTree } from './agent-procs.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
};
const tier = flag('--tier') ?? 's3';
const synthetic = Number(flag('--files') ?? 0);

const corpus =
  synthetic > 0 ? await syntheticTree(synthetic) : resolve(args[0] ?? join(ROOT, '.cache', 'small'));
const work = await fsp.mkdtemp(join(os.tmpdir(), 'weft-drop-profile-'));
let s3: RunningS3Proxy | undefined;
try {
  if (tier === 's3') s3 = await startS3Proxy();
  const adminToken = randomBytes(24).toString('hex');
  const server = await startProxyServer({
    dataDir: join(work, 'proxy'),
    adminToken,
    logLevel: 'warn',
    objectTier: s3
      ? {
          type: 's3',
          bucket: s3.bucket,
          prefix: 'weft',
          endpoint: s3.endpoint,
          region: s3.region,
          forcePathStyle: true,
          accessKeyId: s3.accessKeyId,
          secretAccessKey: s3.secretAccessKey,
        }
      : { type: 'fs' },
  });
  const { token } = await ProxyClient.enrol(server.url, { user: 'bench', deviceName: 'bench', adminToken });
  const client = new ProxyClient({ baseUrl: server.url, token });
  const folder = join(work, 'Weft');
  await fsp.mkdir(folder);
  await fsp.cp(corpus, join(folder, 'corpus'), { recursive: true });

  // Phases, from engine start.
  let t0 = 0;
  const at = (): number => (performance.now() - t0) / 1000;
  let scanEnd = 0;
  let firstBundle = 0;
  let lastBundle = 0;
  let bundles = 0;
  let bundleWait = 0;
  const upload = client.uploadBundle.bind(client);
  client.uploadBundle = async (body) => {
    if (bundles === 0) firstBundle = at();
    bundles += 1;
    const s = performance.now();
    try {
      return await upload(body);
    } finally {
      bundleWait += performance.now() - s;
      lastBundle = at();
    }
  };
  const engine = await Engine.open({
    folder,
    stateDir: join(work, 'state'),
    client,
    deviceName: 'bench',
    watch: false,
    settleMs: 0,
  });
  let scanning = false;
  engine.status.onChange((s) => {
    if (s.state === 'scanning') scanning = true;
    else if (scanning && scanEnd === 0) scanEnd = at();
  });
  const stalls = monitorEventLoopDelay({ resolution: 10 });
  // When the loop stalled for more than 200 ms (seconds from start, and how long).
  const longStalls: string[] = [];
  let tick = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    if (now - tick > 250 && t0 > 0)
      longStalls.push(`${at().toFixed(1)} s: ${(now - tick - 50).toFixed(0)} ms`);
    tick = now;
  }, 50);
  let peakRss = 0;
  const rss = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage.rss())), 200);
  stalls.enable();
  const cpu0 = process.cpuUsage();
  t0 = performance.now();
  // For windows of a CPU profile (its timestamps are this clock's microseconds).
  if (process.env.WEFT_PROFILE_MARK) console.log(`t0 ${process.hrtime.bigint() / 1000n} µs`);
  await engine.start();
  await engine.syncNow();
  const idle = at();
  await server.packer?.flush();
  const durable = at();
  const cpu = process.cpuUsage(cpu0);
  // A no-change rescan: the whole folder scanned again, nothing to send.
  const r0 = performance.now();
  await engine.syncNow();
  const rescan = (performance.now() - r0) / 1000;
  stalls.disable();
  clearInterval(rss);
  clearInterval(ticker);
  const listing = await client.list('', true);
  const uploaded = listing.entries.filter((e) => e.kind === 'file').length;
  if (engine.error) console.error(`engine stopped on: ${String(engine.error)}`);
  if (process.env.WEFT_PROFILE_WAL) {
    for (const e of await fsp.readdir(join(work, 'proxy'), { recursive: true }))
      if (String(e).endsWith('-wal') || String(e).endsWith('.db'))
        console.log(`${String(e)}: ${(await fsp.stat(join(work, 'proxy', String(e)))).size} B`);
  }
  await engine.stop();
  await server.close();
  const load = os.loadavg().map((x) => x.toFixed(2));
  console.log(`corpus ${corpus} (${uploaded} files uploaded), object tier ${tier}, load ${load.join(' ')}`);
  console.log(
    [
      `scan end ${scanEnd.toFixed(1)} s`,
      `first bundle ${firstBundle.toFixed(1)} s`,
      `last bundle answered ${lastBundle.toFixed(1)} s`,
      `idle ${idle.toFixed(1)} s`,
      `durable in ${tier} ${durable.toFixed(1)} s`,
      `no-change rescan ${rescan.toFixed(1)} s`,
      `CPU ${(cpu.user / 1e6).toFixed(1)} s user + ${(cpu.system / 1e6).toFixed(1)} s system`,
    ].join(' | '),
  );
  console.log(
    `${bundles} bundles, ${(bundleWait / 1000).toFixed(1)} s waiting on them; client requests ${client.requests}, ` +
      `sent ${client.bytesSent} B; longest event-loop stall ${(stalls.max / 1e6).toFixed(0)} ms; ` +
      `peak RSS (agent + proxy) ${(peakRss / 2 ** 20).toFixed(0)} MiB`,
  );
  if (longStalls.length > 0)
    console.log(`stalls over 200 ms (at: length): ${longStalls.slice(0, 40).join(', ')}`);
} finally {
  await s3?.stop();
  await fsp.rm(work, { recursive: true, force: true });
}
