// The many-small-files drop (issue #16), in one run: the 10,029-file npm corpus and a
// synthetic tree of 1–16 KiB files (WEFT_BENCH_FILES, default 10,000; the issue's figure is
// 100,000, WEFT_BENCH_FILES=0 leaves it out), each dropped by a `weft agent` process into a
// `weft-proxy` process whose object tier is s3proxy (small files packed), beside
// `rclone copy` of the same folder to the same kind of s3proxy — on loopback and across a
// shaped 50 Mbit/s, 40 ms RTT link (WEFT_BENCH_WAN=0 skips it) — and beside Syncthing's own
// scan of the same folder.
//
// Prints per row: what ran (tool, transport, tier), wall time to "stored and durable in S3"
// (Weft: the agent idle and every small file in a pack, weft_pack_pending_files = 0), the
// agent's time to the end of its first full scan and to idle, a no-change restart to idle,
// the peak resident set (VmHWM) of the agent, the proxy and rclone, requests sent by the
// client, requests that reached S3 (PUT class / GET class), bytes to S3, the modelled
// ingest price (S3 Standard request prices, docs/cost.md; for Weft also the fs-tier
// write-back at EFS Standard's write price), the upload compression the agent chose (its
// status: bundles deflated / raw), and the machine's 1-minute load average when the row
// ended (2 cores shared: figures move with it). Every row starts with the corpus in the page
// cache (read once before it). Figures are printed, never asserted.
//
//   npx tsx bench/small-files.bench.ts          (from the repository root)
//   WEFT_BENCH_FILES=100000 npx tsx bench/small-files.bench.ts
//
// Needs rclone and syncthing (Debian packages): installed by scripts/ensure-rclone.sh and
// scripts/ensure-syncthing.sh when missing (apt-get, as root). rclone's requests and bytes
// come from its `--dump headers` log (request lines and Content-Length), Weft's from the
// proxy's /metrics (weft_backend_requests_total, weft_backend_request_bytes_total).
// WEFT_BENCH_TIMELINE=1: each loopback Weft row also prints a timeline of its first run
// (bench/timeline.ts): every request agent → proxy and proxy → S3 through recording
// forwarders, the agent's states, and both processes' CPU per 100 ms. WEFT_BENCH_RCLONE=0
// leaves rclone's rows out (a timeline run needs only Weft's), WEFT_BENCH_SYNCTHING=0 Syncthing's,
// WEFT_BENCH_NPM=0 the npm corpus (the 100k row alone). WEFT_BENCH_FS_COPY=drop|cost sets the
// proxy's packs.fsCopy (the row says so; default the proxy's own, keep).
// Corpus: ../shared/corpus/small-files.sh (lodash, rxjs, date-fns, ramda, lodash-es), cached
// in .cache/small; the synthetic tree in .cache/many-N (shared with many-files.bench.ts).
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { ProxyClient } from '@weft/core';
import { type RunningS3Proxy, startS3Proxy } from '@weft/providers/testing';
// The same user-space WAN link the inter-proxy bench uses (token bucket + one-way delay).
import { ThrottledLink } from '../packages/mirror/src/interproxy/throttle.ts';
import { GIB, PRICE_TABLES } from '../packages/proxy-server/src/cost/prices.ts';
import { Timeline } from './timeline.ts';
import {
  has,
  load,
  metric,
  peakRssMiB,
  ROOT,
  runAgent,
  startProxy,
  syncthingScan,
  syntheticTree,
  warm,
} from './agent-procs.ts';

const S3 = PRICE_TABLES['s3-standard'];
const EFS = PRICE_TABLES['efs-standard'];
/** USD of the requests an ingest made. */
function ingestUsd(puts: number, gets: number, deletes = 0): number {
  return (puts * S3.putPer1000 + gets * S3.getPer1000 + deletes * S3.deletePer1000) / 1000;
}
const usd = (x: number): string => `$${x.toPrecision(3)}`;
const secs = (ms: number): string => (ms > 0 ? (ms / 1000).toFixed(1) : 'not reached');
const LIMIT_MS = Number(process.env.WEFT_BENCH_LIMIT_MS ?? 30 * 60_000);

const SCRIPT = process.env.WEFT_CORPUS_SMALL ?? resolve(ROOT, '../shared/corpus/small-files.sh');
const PACKAGES = ['lodash@4.17.21', 'rxjs@7.8.1', 'date-fns@4.1.0', 'ramda@0.30.1', 'lodash-es@4.17.21'];

interface Corpus {
  readonly name: string;
  readonly dir: string;
  readonly files: number;
  readonly bytes: number;
}

async function countFiles(dir: string): Promise<{ files: number; bytes: number }> {
  let files = 0;
  let bytes = 0;
  for (const e of await fsp.readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) {
      files += 1;
      bytes += (await fsp.stat(join(e.parentPath, e.name))).size;
    }
  }
  return { files, bytes };
}

const corpora: Corpus[] = [];
{
  // WEFT_BENCH_NPM=0 skips the npm corpus (a 100k row alone, e.g. to time the packer's tail).
  if (process.env.WEFT_BENCH_NPM !== '0') {
    const dir = join(ROOT, '.cache', 'small');
    execFileSync('bash', [SCRIPT, dir, ...PACKAGES], { stdio: 'ignore' });
    corpora.push({ name: 'npm sources', dir, ...(await countFiles(dir)) });
  }
  const n = Number(process.env.WEFT_BENCH_FILES ?? 10_000);
  if (n > 0) {
    const synth = await syntheticTree(n);
    corpora.push({ name: 'synthetic 1–16 KiB', dir: synth, ...(await countFiles(synth)) });
  }
}
if (!has('rclone')) {
  // Debian's rclone, installed by the project script (apt-get; needs root).
  const r = spawnSync('sh', [join(ROOT, 'scripts', 'ensure-rclone.sh')], { encoding: 'utf8' });
  if (r.status !== 0) console.error(`ensure-rclone failed:\n${r.stderr.slice(-2000)}`);
}

interface Counted {
  requests: number;
  bodyBytes: number;
  puts: number;
  gets: number;
  deletes: number;
  copied: number;
}

/**
 * Requests and request-body bytes from rclone's `--dump headers` log, read line by line
 * (requests only, not responses), and the files it reports copied.
 */
async function countDumpedRequests(logFile: string): Promise<Counted> {
  const c: Counted = { requests: 0, bodyBytes: 0, puts: 0, gets: 0, deletes: 0, copied: 0 };
  // Each request: "DEBUG : HTTP REQUEST (req 0x…)", the request line and headers, up to the
  // ">>>>>>" separator line. S3 billing classes: PUT, POST, COPY and LIST (a GET of the
  // bucket with a list query) are 'put'; GET and HEAD of an object 'get'; DELETE free.
  let inRequest = false;
  for await (const line of createInterface({ input: createReadStream(logFile) })) {
    if (line.includes('DEBUG : HTTP REQUEST (req ')) {
      inRequest = true;
      c.requests += 1;
      continue;
    }
    if (line.includes('INFO  : ') && line.endsWith(': Copied (new)')) c.copied += 1;
    if (!inRequest) continue;
    if (line.includes('DEBUG : >>>>')) {
      inRequest = false;
      continue;
    }
    const req = /DEBUG : (GET|HEAD|PUT|POST|DELETE) (\S+) HTTP\//.exec(line);
    if (req) {
      const method = req[1];
      if (method === 'DELETE') c.deletes += 1;
      else if (method === 'PUT' || method === 'POST' || /[?&]list-type=|[?&]delimiter=/.test(req[2] ?? ''))
        c.puts += 1;
      else c.gets += 1;
    }
    const len = /^Content-Length: (\d+)/i.exec(line);
    if (len?.[1]) c.bodyBytes += Number(len[1]);
  }
  return c;
}

/** A target reached through `link` when given (Weft's proxy and s3proxy alike), else directly. */
async function via(
  link: ThrottledLink | undefined,
  url: string,
): Promise<{ url: string; close(): Promise<void> }> {
  if (!link) return { url, close: async () => undefined };
  const u = new URL(url);
  const f = await link.forward({ host: u.hostname, port: Number(u.port) });
  return { url: f.url, close: () => f.close() };
}

/** s3proxy in memory for a small corpus; on disk (jclouds filesystem) beyond 500 MB. */
async function s3For(c: Corpus, work: string): Promise<{ s3: RunningS3Proxy; kind: string }> {
  if (c.bytes < 500_000_000) return { s3: await startS3Proxy(), kind: 's3proxy in memory' };
  const dataDir = join(work, 's3');
  await fsp.mkdir(dataDir);
  return { s3: await startS3Proxy({ dataDir }), kind: 's3proxy on disk' };
}

const HEADER = [
  'corpus',
  'link',
  'what ran (tool, transport, tier)',
  'wall s to durable in S3',
  'first scan s',
  'idle s',
  'no-change restart → idle s',
  'peak RSS MiB (client / proxy)',
  'client requests',
  'S3 PUT/GET',
  'bytes to S3',
  'modelled ingest price',
  'upload compression',
  'files',
  'load',
];

async function weftRow(c: Corpus, label: string, link: ThrottledLink | undefined): Promise<string[]> {
  const work = await fsp.mkdtemp(join(os.tmpdir(), 'weft-bench-small-'));
  const { s3, kind } = await s3For(c, work);
  const admin = randomBytes(24).toString('hex');
  const timeline = process.env.WEFT_BENCH_TIMELINE === '1' && !link ? new Timeline() : undefined;
  const s3Fwd = timeline ? await timeline.forwarder('proxy→s3', s3.endpoint) : undefined;
  // Through the shaped link the proxy names the link's end as its URL (publicUrl): it lists
  // itself there in /v1/cluster/instances, and with its listen URL the agent moved off the
  // link to the proxy's own port after its first probe — the shaped rows ran mostly on loopback.
  const target = { host: '127.0.0.1', port: 0 };
  const linkEnd = link ? await link.forward(target) : undefined;
  try {
    const proxy = await startProxy(
      work,
      admin,
      {
        type: 's3',
        bucket: s3.bucket,
        prefix: 'weft',
        endpoint: s3Fwd?.url ?? s3.endpoint,
        region: s3.region,
        forcePathStyle: true,
        accessKeyId: s3.accessKeyId,
        secretAccessKey: s3.secretAccessKey,
      },
      linkEnd ? { publicUrl: linkEnd.url } : {},
    );
    target.port = Number(new URL(proxy.url).port);
    const upBefore = link?.stats.bytesUp ?? 0;
    const proxyVia = timeline
      ? await timeline.forwarder('agent→proxy', proxy.url)
      : { url: linkEnd?.url ?? proxy.url, close: async () => undefined };
    try {
      const { token } = await ProxyClient.enrol(proxy.url, {
        user: 'bench',
        deviceName: 'bench',
        adminToken: admin,
      });
      const tokenFile = join(work, 'token');
      await fsp.writeFile(tokenFile, token, { mode: 0o600 });
      const clientRequests = (m: string): number =>
        metric(m, 'weft_http_requests_total') - metric(m, 'weft_http_requests_total', { route: '/metrics' });
      const before = clientRequests(await proxy.metrics());
      const agent = {
        folder: c.dir,
        state: join(work, 'state'),
        server: proxyVia.url,
        tokenFile,
        files: c.files,
        limitMs: LIMIT_MS,
      };
      // "Stored and durable in S3": the agent idle and every small file in a pack (the packer
      // flushes at its target size, once no bundle has been in flight for its idle time, or
      // after its 5 s timeout, whichever first — as it would in production).
      console.error(
        `${c.name}, ${label}: corpus read into the page cache in ${(await warm(c.dir)).toFixed(1)} s`,
      );
      timeline?.sample('proxy', proxy.child.pid);
      timeline?.sample('bench', process.pid); // the forwarders' own CPU share
      const first = await runAgent({
        ...agent,
        durable: async () => metric(await proxy.metrics(), 'weft_pack_pending_files') === 0,
        ...(timeline
          ? { onSpawn: (pid) => timeline.sample('agent', pid), onState: (s) => timeline.mark(`agent ${s}`) }
          : {}),
      });
      console.error(
        `${c.name}, ${label}: CPU-s to durable — proxy ${proxy.cpuSeconds().toFixed(1)}, agent ${first.cpuSeconds.toFixed(1)} (load ${load()})` +
          (link ? `; ${((link.stats.bytesUp - upBefore) / 1e6).toFixed(1)} MB went up through the link` : ''),
      );
      if (timeline) {
        timeline.stop();
        console.error(`timeline of ${c.name}, ${label} (load ${load()}):\n${timeline.render()}`);
      }
      const m = await proxy.metrics();
      const requests = clientRequests(m) - before;
      // The no-change restart only after a first run that reached idle (else it is the same run again).
      const again = first.idleMs > 0 ? await runAgent(agent) : first;
      const o = (kind: string): number =>
        metric(m, 'weft_backend_requests_total', { backend: 'objects', kind });
      const s3Bytes = metric(m, 'weft_backend_request_bytes_total', { backend: 'objects', kind: 'put' });
      const fsWritten = metric(m, 'weft_backend_request_bytes_total', { backend: 'fs', kind: 'put' });
      const clientIn = metric(m, 'weft_bytes_total', { tier: 'client', direction: 'in' });
      const comp = first.last?.uploadCompression;
      const row = [
        c.name,
        label,
        `weft agent → weft-proxy (HTTP bundles${link ? ' via the shaped link' : ''}; fs write-back tier → packs on ${kind}${process.env.WEFT_BENCH_FS_COPY ? `; fsCopy ${process.env.WEFT_BENCH_FS_COPY}` : ''})`,
        secs(first.durableMs),
        secs(first.scannedMs),
        secs(first.idleMs),
        secs(again.idleMs),
        `${Math.max(first.rssMiB, again.rssMiB).toFixed(0)} / ${proxy.peakRssMiB().toFixed(0)}`,
        String(requests),
        `${o('put')}/${o('get')}`,
        String(s3Bytes),
        `${usd(ingestUsd(o('put'), o('get'), o('delete')))} S3 + ${usd((fsWritten * EFS.writePerGb) / GIB)} EFS writes`,
        comp ? `deflate ×${comp.deflated}, raw ×${comp.raw} (last ${comp.last})` : 'no bundle sent',
        `${first.exited !== undefined ? `agent exited ${first.exited}! ` : ''}${first.last?.files ?? 0}/${c.files}; client sent ${clientIn} B`,
        load(),
      ];
      await proxy.stop();
      return row;
    } finally {
      await proxyVia.close();
    }
  } finally {
    await linkEnd?.close();
    timeline?.stop();
    await s3Fwd?.close();
    await s3.stop();
    await fsp.rm(work, { recursive: true, force: true });
  }
}

async function rcloneRow(c: Corpus, label: string, link: ThrottledLink | undefined): Promise<string[]> {
  if (!has('rclone'))
    return [c.name, label, 'rclone copy: not installed', ...HEADER.slice(3).map(() => 'skip')];
  const work = await fsp.mkdtemp(join(os.tmpdir(), 'weft-bench-rclone-'));
  const { s3, kind } = await s3For(c, work);
  const s3Via = await via(link, s3.endpoint);
  try {
    const version = /rclone v(\S+)/.exec(spawnSync('rclone', ['version'], { encoding: 'utf8' }).stdout)?.[1];
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      RCLONE_CONFIG_BENCH_TYPE: 's3',
      RCLONE_CONFIG_BENCH_PROVIDER: 'Other',
      RCLONE_CONFIG_BENCH_ENV_AUTH: 'false',
      RCLONE_CONFIG_BENCH_ENDPOINT: s3Via.url,
      RCLONE_CONFIG_BENCH_ACCESS_KEY_ID: s3.accessKeyId,
      RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY: s3.secretAccessKey,
      RCLONE_CONFIG_BENCH_REGION: s3.region,
      RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE: 'true',
      // The bucket exists (s3proxy made it): no create/check request.
      RCLONE_CONFIG_BENCH_NO_CHECK_BUCKET: 'true',
    };
    // The AWS SDK inside rclone 1.60 loads AWS_CA_BUNDLE when it is set and then refuses
    // rclone's own HTTP transport ("LoadCustomCABundleError … unsupported transport"): exit 1
    // at once. s3proxy is plain HTTP on loopback, so no CA bundle is needed.
    for (const k of ['AWS_CA_BUNDLE', 'AWS_PROFILE', 'AWS_CONFIG_FILE', 'AWS_SHARED_CREDENTIALS_FILE'])
      delete env[k];
    const logFile = join(work, 'rclone.log');
    console.error(
      `${c.name}, ${label}: corpus read into the page cache in ${(await warm(c.dir)).toFixed(1)} s`,
    );
    const t0 = performance.now();
    let rss = 0;
    // rclone runs in its own process, so the link (in this one) must not wait on it.
    const status = await new Promise<number | null>((done) => {
      const child = spawn(
        'rclone',
        [
          'copy',
          c.dir,
          `bench:${s3.bucket}/rclone`,
          '--dump',
          'headers',
          '--stats',
          '0',
          '-v',
          '--log-file',
          logFile,
        ],
        { env, stdio: 'ignore' },
      );
      const sampler = setInterval(() => (rss = Math.max(rss, peakRssMiB(child.pid))), 200);
      // Bounded like Weft's runs: stopped (and shown as not done) after WEFT_BENCH_LIMIT_MS.
      const limit = setTimeout(() => child.kill('SIGTERM'), LIMIT_MS);
      child.on('close', (code) => {
        clearInterval(sampler);
        clearTimeout(limit);
        done(code);
      });
    });
    const ms = performance.now() - t0;
    const counted = await countDumpedRequests(logFile);
    if (status !== 0) console.error(`rclone exited ${status}: see the end of its log`);
    return [
      c.name,
      label,
      `rclone copy ${version ?? '?'} → ${kind} (HTTP S3 API, one object per file${link ? ', via the shaped link' : ''})`,
      status === 0 ? secs(ms) : `not done (${secs(ms)})`,
      '—',
      '—',
      '—',
      `${rss.toFixed(0)} / —`,
      String(counted.requests),
      `${counted.puts}/${counted.gets}`,
      String(counted.bodyBytes),
      `${usd(ingestUsd(counted.puts, counted.gets, counted.deletes))} S3`,
      'none',
      status === 0 ? `${counted.copied}/${c.files}` : `exit ${status}`,
      load(),
    ];
  } finally {
    await s3Via.close();
    await s3.stop();
    await fsp.rm(work, { recursive: true, force: true });
  }
}

async function syncthingRow(c: Corpus): Promise<string[]> {
  const r = await syncthingScan(c.dir, c.files, LIMIT_MS);
  const dash = (n: number): string[] => Array.from({ length: n }, () => '—');
  if (typeof r === 'string')
    return [c.name, 'local', `syncthing: ${r}`, ...HEADER.slice(3).map(() => 'skip')];
  return [
    c.name,
    'local (no peer)',
    `syncthing ${r.version} serve: its own first scan (send-only folder, REST /rest/db/status)`,
    '—',
    r.seconds.toFixed(1),
    ...dash(2),
    `${r.rssMiB.toFixed(0)} (monitor + syncthing) / —`,
    ...dash(5),
    `${r.localFiles}/${c.files} indexed`,
    load(),
  ];
}

const links: { label: string; link: () => ThrottledLink | undefined }[] = [
  { label: 'loopback', link: () => undefined },
];
if (process.env.WEFT_BENCH_WAN !== '0') {
  // 50 Mbit/s each way, 20 ms one way, crossed by each tool to reach its server (Weft's
  // proxy sits beside S3, as it would in the cloud); one fresh link per row.
  links.push({
    label: '50 Mbit/s, 40 ms RTT (user-space token bucket)',
    link: () => new ThrottledLink({ bitsPerSecond: 50_000_000, latencyMs: 20, burstBytes: 64 * 1024 }),
  });
}

const rows: string[][] = [];
const show = (r: string[]): void => {
  rows.push(r);
  console.error(`row: ${r.join(' | ')}`);
};
for (const c of corpora) {
  // Syncthing first (a minute at most): a long corpus run cut short still has it.
  if (process.env.WEFT_BENCH_SYNCTHING !== '0') show(await syncthingRow(c));
  for (const { label, link } of links) {
    show(await weftRow(c, label, link()));
    if (process.env.WEFT_BENCH_RCLONE !== '0') show(await rcloneRow(c, label, link()));
  }
}

console.log('\nMany small files: Weft beside rclone and Syncthing');
for (const c of corpora) console.log(`  ${c.name}: ${c.files} files, ${c.bytes} bytes (${c.dir})`);
console.log(`  ${os.cpus().length} cores, load = 1-minute load average when the row ended\n`);
const widths = HEADER.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
const line = (r: string[]): string => r.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join('  ');
console.log(line(HEADER));
for (const r of rows) console.log(line(r));
