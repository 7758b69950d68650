// The 10,000-file drop: Weft (agent → proxy, object tier on s3proxy) beside `rclone copy`
// of the same folder to the same kind of target (s3proxy), in the same run.
// Prints, for each, on loopback and across a shaped wide-area link: wall time until every file
// is stored and durable in S3, requests sent by the client, requests that reached S3 (PUT
// class / GET class), bytes written to S3, and the modelled ingest price (S3 Standard request
// prices, docs/cost.md; for Weft also the fs-tier write-back at EFS Standard's write price).
// Every row says what ran: tool, tier and transport. Figures are printed, never asserted.
//
//   npx tsx bench/small-files.bench.ts          (from the repository root)
//
// Needs rclone (Debian package rclone): installed by scripts/ensure-rclone.sh when missing
// (apt-get, as root). Bytes sent are request bodies for both (rclone's from Content-Length
// in its --dump headers log, which also gives the request count).
// Corpus: ../shared/corpus/small-files.sh (lodash, rxjs, date-fns, ramda, lodash-es: 10,029
// real source files), cached in .cache/small.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine, ProxyClient } from '@weft/core';
import { startS3Proxy } from '@weft/providers/testing';
import { startProxyServer } from '@weft/proxy-server';
// The same user-space WAN link the inter-proxy bench uses (token bucket + one-way delay).
import { ThrottledLink } from '../packages/mirror/src/interproxy/throttle.ts';
import { GIB, PRICE_TABLES } from '../packages/proxy-server/src/cost/prices.ts';

const S3 = PRICE_TABLES['s3-standard'];
const EFS = PRICE_TABLES['efs-standard'];
/** USD of the requests (and, for a write-back tier, bytes written) an ingest made. */
function ingestUsd(puts: number, gets: number, deletes = 0): number {
  return (puts * S3.putPer1000 + gets * S3.getPer1000 + deletes * S3.deletePer1000) / 1000;
}
const usd = (x: number): string => `$${x.toPrecision(3)}`;

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SCRIPT = process.env.WEFT_CORPUS_SMALL ?? resolve(ROOT, '../shared/corpus/small-files.sh');
const PACKAGES = ['lodash@4.17.21', 'rxjs@7.8.1', 'date-fns@4.1.0', 'ramda@0.30.1', 'lodash-es@4.17.21'];

function has(tool: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0;
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

const corpus = join(ROOT, '.cache', 'small');
execFileSync('bash', [SCRIPT, corpus, ...PACKAGES], { stdio: 'ignore' });
const { files, bytes } = await countFiles(corpus);
if (!has('rclone')) {
  // Debian's rclone, installed by the project script (apt-get; needs root).
  const r = spawnSync('sh', [join(ROOT, 'scripts', 'ensure-rclone.sh')], { encoding: 'utf8' });
  if (r.status !== 0) console.error(`ensure-rclone failed:\n${r.stderr.slice(-2000)}`);
}

/** Requests and request-body bytes from rclone's `--dump headers` log (requests only, not responses). */
function countDumpedRequests(log: string): {
  requests: number;
  bodyBytes: number;
  puts: number;
  gets: number;
  deletes: number;
} {
  let requests = 0;
  let bodyBytes = 0;
  // S3 billing classes: PUT, POST, COPY and LIST (a GET of the bucket with a list query)
  // are 'put'; GET and HEAD of an object 'get'; DELETE free.
  let puts = 0;
  let gets = 0;
  let deletes = 0;
  // Each request: "HTTP REQUEST (req 0x…)", then the request line and headers, up to the
  // ">>>>>>" separator line.
  for (const block of log.split(/DEBUG : HTTP REQUEST \(req [^)]*\)\n/).slice(1)) {
    requests += 1;
    const head = block.slice(0, Math.max(0, block.indexOf('DEBUG : >>>>')));
    // The request line follows the log prefix: "… DEBUG : PUT /bucket/key HTTP/1.1".
    const line = /DEBUG : (GET|HEAD|PUT|POST|DELETE) (\S+) HTTP\//.exec(head);
    const method = line?.[1] ?? 'GET';
    if (method === 'DELETE') deletes += 1;
    else if (method === 'PUT' || method === 'POST' || /[?&]list-type=|[?&]delimiter=/.test(line?.[2] ?? ''))
      puts += 1;
    else gets += 1;
    const m = /^Content-Length: (\d+)/im.exec(head);
    if (m?.[1]) bodyBytes += Number(m[1]);
  }
  return { requests, bodyBytes, puts, gets, deletes };
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

async function runBoth(label: string, link: ThrottledLink | undefined): Promise<string[][]> {
  const rows: string[][] = [];
  const s3 = await startS3Proxy();
  const s3Via = await via(link, s3.endpoint);
  try {
    // --- Weft: proxy with its object tier on s3proxy, one agent dropping the folder.
    const work = await fsp.mkdtemp(join(os.tmpdir(), 'weft-bench-small-'));
    const adminToken = randomBytes(24).toString('hex');
    const server = await startProxyServer({
      dataDir: join(work, 'proxy'),
      adminToken,
      logLevel: 'warn',
      objectTier: {
        type: 's3',
        bucket: s3.bucket,
        prefix: 'weft',
        endpoint: s3.endpoint,
        region: s3.region,
        forcePathStyle: true,
        accessKeyId: s3.accessKeyId,
        secretAccessKey: s3.secretAccessKey,
      },
    });
    const serverVia = await via(link, server.url);
    const { token } = await ProxyClient.enrol(serverVia.url, {
      user: 'bench',
      deviceName: 'bench',
      adminToken,
    });
    const client = new ProxyClient({ baseUrl: serverVia.url, token });
    const folder = join(work, 'Weft');
    await fsp.mkdir(folder);
    await fsp.cp(corpus, join(folder, 'corpus'), { recursive: true });
    const engine = await Engine.open({
      folder,
      stateDir: join(work, 'state'),
      client,
      deviceName: 'bench',
      watch: false,
      settleMs: 0,
    });
    const started = performance.now();
    await engine.start();
    await engine.syncNow();
    // "Stored and durable in S3": every small file in a pack on s3proxy (the packer flushes at
    // its target size or after 5 s; the rest is flushed here rather than waiting for the timer).
    await server.packer?.flush();
    const weftSeconds = (performance.now() - started) / 1000;
    const packStats = server.packer?.stats() ?? [];
    const inS3 = packStats.reduce((n, p) => n + p.entries, 0);
    if (engine.error) console.error(`weft engine stopped on: ${String(engine.error)}`);
    const listing = await client.list('', true);
    const uploaded = listing.entries.filter((e) => e.kind === 'file').length;
    // What reached S3 and the fs tier, as the proxy's cost ledger counted it (docs/cost.md).
    const usage = server.cost.ledger.usage('', Date.now());
    const o = usage.tiers.objects.requests;
    const fsWritten = usage.tiers.fs.requests.put.bytes;
    const s3Usd = ingestUsd(o.put.requests, o.get.requests, o.delete.requests);
    const efsUsd = (fsWritten * EFS.writePerGb) / GIB;
    rows.push([
      label,
      `weft agent → proxy (HTTP bundles; fs write-back tier → ${packStats.length} packs on s3proxy)`,
      weftSeconds.toFixed(1),
      String(client.requests),
      `${o.put.requests}/${o.get.requests}`,
      String(o.put.bytes),
      `${usd(s3Usd)} S3 + ${usd(efsUsd)} EFS writes`,
      `${uploaded}/${files}; ${inS3} distinct contents in packs; client sent ${client.bytesSent} B`,
    ]);
    await engine.stop();
    await serverVia.close();
    await server.close();

    // --- rclone copy of the same folder to s3proxy.
    if (has('rclone')) {
      const version = /rclone v(\S+)/.exec(
        spawnSync('rclone', ['version'], { encoding: 'utf8' }).stdout,
      )?.[1];
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
      const t0 = performance.now();
      // rclone runs in its own process, so the link (in this one) must not wait on it.
      const out = await new Promise<{ status: number | null; stdout: string; stderr: string }>((done) => {
        const child = spawn(
          'rclone',
          ['copy', corpus, `bench:${s3.bucket}/rclone`, '--dump', 'headers', '--stats', '0', '-v'],
          { env },
        );
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        child.on('close', (status) => done({ status, stdout, stderr }));
      });
      const rcloneSeconds = (performance.now() - t0) / 1000;
      const log = `${out.stdout}\n${out.stderr}`;
      const counted = countDumpedRequests(log);
      if (out.status !== 0) console.error(`rclone exited ${out.status}:\n${out.stderr.slice(-4000)}`);
      const copied = out.status === 0 ? (log.match(/INFO {2}: .*: Copied \(new\)/g) ?? []).length : 0;
      rows.push([
        label,
        `rclone copy ${version ?? '?'} → s3proxy (HTTP S3 API, one object per file)`,
        rcloneSeconds.toFixed(1),
        String(counted.requests),
        `${counted.puts}/${counted.gets}`,
        String(counted.bodyBytes),
        `${usd(ingestUsd(counted.puts, counted.gets, counted.deletes))} S3`,
        out.status === 0 ? `${copied}/${files}` : `exit ${out.status}`,
      ]);
    } else {
      rows.push([label, 'rclone copy', 'skip', 'skip', 'skip', 'skip', 'skip', 'rclone not installed']);
    }
  } finally {
    await s3Via.close();
    await s3.stop();
  }
  return rows;
}

// Loopback (requests cost nothing), then a shaped wide-area link — 50 Mbit/s each way,
// 20 ms one way — that both tools cross to reach their servers (WEFT_BENCH_WAN=0 skips it).
const rows = await runBoth('loopback', undefined);
if (process.env.WEFT_BENCH_WAN !== '0') {
  const link = new ThrottledLink({ bitsPerSecond: 50_000_000, latencyMs: 20, burstBytes: 64 * 1024 });
  rows.push(...(await runBoth('50 Mbit/s, 40 ms RTT', link)));
}

console.log(`\n10,000-file drop: ${files} files, ${bytes} bytes of real npm package sources\n`);
const header = [
  'link',
  'what ran (tool, transport, tier)',
  'wall s to durable in S3',
  'client requests',
  'S3 PUT/GET',
  'bytes to S3',
  'modelled ingest price',
  'files',
];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
const line = (r: string[]): string => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ');
console.log(line(header));
for (const r of rows) console.log(line(r));
