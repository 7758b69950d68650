// Redundant tier over real shaped links (issue #17): figures printed, never asserted.
//
//   sudo npx tsx bench/redundant-links.bench.ts        (root: builds network namespaces)
//   BENCH_MB=1024 npx tsx bench/redundant-links.bench.ts   (the 1 GB; default 256 MiB)
//
// Five backends, each an s3proxy (objects on disk) in its own network namespace behind a
// veth link whose backend → reader direction is capped by `tc tbf` (bench/netns.ts) at a
// different rate (LINKS; uploads unshaped; no added delay: this kernel has no netem). The
// tier (RedundantProvider over S3Provider, the proxy's object-tier code with its defaults:
// RS(3, 2), 1 MiB shards, hedge after 2 s) runs in this process. Prints, for one large file:
// the write (encode, hash, spool, upload) and each read's throughput and this process's
// MB per CPU-second (the tier's part of the proxy path: fetch, verify, decode; s3proxy's
// work is in other processes) — striped with all backends up, one down, m = 2 down; beside
// the fastest backend alone (one S3 GET of the whole file) and plain replication (r = 2) —
// each row with the bytes each backend sent. Storage overhead, modelled monthly cost and
// outage latency against DuraCloud-like and RACS-like layouts: bench/redundant.bench.ts.
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import {
  type CallInfo,
  ForwardingProvider,
  type Provider,
  type ReadOptions,
  S3Provider,
} from '@weft/providers';
import { openRedundantProvider, type RedundantProvider } from '@weft/providers/redundant';
import { OutageProvider, type RunningS3Proxy, startS3Proxy } from '@weft/providers/testing';
import { canShape, type ShapedNamespace, shapedNamespace } from './netns.ts';

const MB = 1e6;
const SIZE = Number(process.env.BENCH_MB ?? 256) * 1024 * 1024;
/** Per backend: link rate towards the reader (Mbit/s) and storage price ($/GB-month). */
const LINKS = [
  { mbit: 80, price: 0.026 },
  { mbit: 60, price: 0.023 },
  { mbit: 50, price: 0.0125 },
  { mbit: 40, price: 0.01 },
  { mbit: 30, price: 0.004 },
];

/** Counts the bytes each backend sent to readers. */
class Counting extends ForwardingProvider {
  bytesRead = 0;
  protected call<T>(_info: CallInfo, fn: () => Promise<T>): Promise<T> {
    return fn();
  }
  protected override async openRead(path: string, o: ReadOptions): Promise<AsyncIterable<Uint8Array>> {
    const s = await this.inner.read(path, o);
    const count = (n: number): void => void (this.bytesRead += n);
    return (async function* () {
      for await (const c of s) {
        count(c.byteLength);
        yield c;
      }
    })();
  }
}

interface Backend {
  readonly ns: ShapedNamespace;
  readonly s3: RunningS3Proxy;
  provider(prefix: string): Provider;
}

async function drain(s: AsyncIterable<Uint8Array>): Promise<number> {
  let n = 0;
  for await (const c of s) n += c.byteLength;
  return n;
}

interface Row {
  name: string;
  s: number;
  cpu: number;
  bytes: number;
  sent: number[];
  load: number;
}

async function timed(name: string, counters: Counting[], fn: () => Promise<number>): Promise<Row> {
  for (const c of counters) c.bytesRead = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const bytes = await fn();
  const c = process.cpuUsage(c0);
  return {
    name,
    s: (performance.now() - t0) / 1000,
    cpu: (c.user + c.system) / 1e6,
    bytes,
    sent: counters.map((x) => x.bytesRead),
    load: os.loadavg()[0]!,
  };
}

function print(r: Row): void {
  const mb = r.bytes / MB;
  const sent = r.sent.map((b, i) => (b > 0 ? `b${i} ${(b / MB).toFixed(0)}` : '')).filter((x) => x);
  console.log(
    `  ${r.name.padEnd(58)} ${(mb / r.s).toFixed(1).padStart(6)} MB/s ${(mb / r.cpu).toFixed(0).padStart(6)} MB/CPU-s  load ${r.load.toFixed(0).padStart(2)}  sent MB: ${sent.join(', ')}`,
  );
}

async function main(): Promise<void> {
  if (!canShape()) {
    console.log('redundant-links bench: needs root with ip and tc (network namespaces); not run');
    return;
  }
  const base = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-bench-links-'));
  const backends: Backend[] = [];
  const cleanup = async (): Promise<void> => {
    for (const b of backends) {
      await b.s3.stop().catch(() => undefined);
      b.ns.close();
    }
    await fsp.rm(base, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
  try {
    for (const [i, l] of LINKS.entries()) {
      const ns = shapedNamespace(i, { downMbit: l.mbit });
      const dataDir = nodePath.join(base, `s3-${i}`);
      await fsp.mkdir(dataDir);
      const s3 = await startS3Proxy({ host: ns.nsAddress, launcher: ns.launcher, dataDir });
      backends.push({
        ns,
        s3,
        provider: (prefix) =>
          new S3Provider({
            bucket: s3.bucket,
            prefix,
            endpoint: s3.endpoint,
            region: s3.region,
            forcePathStyle: true,
            credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
          }),
      });
    }
    await run(base, backends);
  } finally {
    await cleanup();
  }
}

function tierOver(backends: Backend[], base: string, tag: string, threshold: number) {
  const counters = backends.map((b) => new Counting(b.provider(tag)));
  const outage = counters.map((c) => new OutageProvider(c));
  const tier = openRedundantProvider({
    backends: outage.map((provider, i) => ({ id: `b${i}`, provider, pricePerGbMonth: LINKS[i]!.price })),
    dir: nodePath.join(base, `${tag}-tier`),
    thresholdBytes: threshold,
    probeIntervalMs: 0,
  });
  return { tier, counters, outage };
}

async function run(base: string, backends: Backend[]): Promise<void> {
  const data = randomBytes(SIZE);
  const mb = SIZE / MB;
  const rates = LINKS.map((l, i) => `b${i} ${l.mbit}`).join(', ');
  console.log(
    `redundant tier over shaped links: ${mb.toFixed(0)} MB file, 5 s3proxy backends in network namespaces, tc tbf towards the reader (Mbit/s: ${rates}); uploads unshaped; load ${os.loadavg()[0]!.toFixed(1)}`,
  );
  const { tier, counters, outage } = tierOver(backends, base, 'striped', 512 * 1024);
  const w = await timed('write: encode + hash + spool + upload (unshaped)', counters, async () => {
    await tier.write('big.bin', data, { size: SIZE });
    return SIZE;
  });
  const holders = (await tier.store.locations((await tier.store.objectOf('big.bin'))!))
    .sort((a, b) => a.slot - b.slot)
    .map((l) => `f${l.slot}→${l.backend}`);
  console.log(`  placement: RS(3,2), ${holders.join(' ')}`);
  const rows: Row[] = [w];
  const read = (t: RedundantProvider) => async () => drain(await t.read('big.bin'));
  rows.push(await timed('striped RS(3,2), all 5 up, first read', counters, read(tier)));
  rows.push(await timed('striped RS(3,2), all 5 up, read again', counters, read(tier)));
  outage[0]!.goDown();
  await tier.probe();
  rows.push(await timed('striped RS(3,2), one down (b0, the fastest)', counters, read(tier)));
  outage[1]!.goDown();
  await tier.probe();
  rows.push(await timed('striped RS(3,2), m = 2 down (b0, b1)', counters, read(tier)));
  outage[0]!.restore();
  outage[1]!.restore();
  await tier.probe();
  const metrics = { ...tier.metrics };
  await tier.close();

  const single = new Counting(backends[0]!.provider('single'));
  await single.write('big.bin', data, { size: SIZE });
  rows.push(
    await timed('fastest backend alone (b0, one S3 GET)', [single], async () =>
      drain(await single.read('big.bin')),
    ),
  );

  const rep = tierOver(backends, base, 'replicated', SIZE + 1);
  await rep.tier.write('big.bin', data, { size: SIZE });
  const repHolders = (await rep.tier.store.locations((await rep.tier.store.objectOf('big.bin'))!)).map(
    (l) => l.backend,
  );
  rows.push(
    await timed(`plain replication r = 2 (on ${repHolders.join(', ')})`, rep.counters, read(rep.tier)),
  );
  await rep.tier.close();

  print(rows[0]!);
  console.log('read throughput (wall), this process per CPU-second, bytes each backend sent');
  for (const r of rows.slice(1)) print(r);
  const fastest = rows.find((r) => r.name.startsWith('fastest'))!;
  for (const r of rows.slice(1, 5))
    console.log(`  ${r.name.padEnd(58)} ${(fastest.s / r.s).toFixed(2)}× the fastest backend alone`);
  console.log(
    `  tier events: hedged reads ${metrics.hedgedReads}, degraded reads ${metrics.degradedReads}, failed fragment reads ${metrics.failedFragmentReads}`,
  );
}

await main();
