// Redundant tier benchmark (issue #17): figures printed, never asserted.
//
//   npx tsx bench/redundant.bench.ts        (from the repository root; BENCH_MB=64 by default)
//
// Five directory backends, each behind an in-process link model (a per-request latency and a
// byte rate, `Shaped` below); the same reads over real tc-shaped links in network namespaces
// are bench/redundant-links.bench.ts. Prints: write (encode + spool + upload) and read throughput of one large file with
// all backends up, one down and m = 2 down, beside the fastest single backend and plain
// replication; stored bytes and modelled monthly cost of a mixed workload under HyRD placement,
// full replication (DuraCloud-like, r = 2) and striping everything (RACS-like); and the mean
// small-file read latency with one backend down under HyRD and RACS-like placement; then the
// candidates for the two measured defaults (threshold, RS(k, m)); BENCH_PART=candidates runs
// only those (BENCH_CAND_MB, default 16, for the RS(k, m) rows).
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { collect, FsProvider, type Provider, type ReadOptions } from '@weft/providers';
import { openRedundantProvider, type RedundantProvider } from '@weft/providers/redundant';
import { OutageProvider } from '@weft/providers/testing';
import { ForwardingProvider, type CallInfo } from '@weft/providers';

const MB = 1e6;
const SIZE = Number(process.env.BENCH_MB ?? 64) * 1024 * 1024;
/** Per backend: request latency (ms), link rate (bytes/s), price ($/GB-month). */
const LINKS = [
  { ms: 10, bps: 60 * MB, price: 0.026 },
  { ms: 15, bps: 45 * MB, price: 0.023 },
  { ms: 30, bps: 30 * MB, price: 0.0125 },
  { ms: 40, bps: 25 * MB, price: 0.01 },
  { ms: 60, bps: 20 * MB, price: 0.004 },
];

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A link model: each call waits `ms`, each read stream is paced to `bps`. */
class Shaped extends ForwardingProvider {
  constructor(
    inner: Provider,
    private readonly ms: number,
    private readonly bps: number,
  ) {
    super(inner);
  }
  protected async call<T>(_info: CallInfo, fn: () => Promise<T>): Promise<T> {
    await sleep(this.ms);
    return fn();
  }
  protected override async openRead(path: string, o: ReadOptions): Promise<AsyncIterable<Uint8Array>> {
    await sleep(this.ms);
    return this.pace(await this.inner.read(path, o));
  }
  private async *pace(s: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
    const t0 = Date.now();
    let sent = 0;
    for await (const c of s) {
      sent += c.byteLength;
      const due = (sent / this.bps) * 1000 - (Date.now() - t0);
      if (due > 0) await sleep(due);
      yield c;
    }
  }
}

async function rig(
  threshold: number,
  base: string,
  tag: string,
  rs: { k: number; m: number } = { k: 3, m: 2 },
) {
  const outage: OutageProvider[] = [];
  const roots: string[] = [];
  const backends = await Promise.all(
    LINKS.map(async (l, i) => {
      const root = nodePath.join(base, `${tag}-b${i}`);
      await fsp.mkdir(root, { recursive: true });
      roots.push(root);
      const o = new OutageProvider(new Shaped(await FsProvider.open({ root }), l.ms, l.bps));
      outage.push(o);
      return { id: `b${i}`, provider: o, pricePerGbMonth: l.price };
    }),
  );
  const tier = openRedundantProvider({
    backends,
    dir: nodePath.join(base, `${tag}-tier`),
    thresholdBytes: threshold,
    k: rs.k,
    m: rs.m,
    maxShardBytes: 1 << 20,
    hedgeAfterMs: 1000,
    probeIntervalMs: 0,
  });
  return { tier, outage, roots };
}

async function timed(fn: () => Promise<unknown>): Promise<{ s: number; cpu: number }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const c = process.cpuUsage(c0);
  return { s: (performance.now() - t0) / 1000, cpu: (c.user + c.system) / 1e6 };
}

async function du(dir: string): Promise<number> {
  let n = 0;
  for (const e of await fsp.readdir(dir, { withFileTypes: true, recursive: true }))
    if (e.isFile() && !e.parentPath.includes('.weft-fs'))
      n += (await fsp.stat(nodePath.join(e.parentPath, e.name))).size;
  return n;
}

/**
 * The measured choices (docs/redundancy.md "Defaults, and how they were chosen"): the
 * small/large threshold as the object size from which a striped read (k requests to the k
 * fastest backends, each 1/k of the bytes) is as fast as a replica read (one request to the
 * fastest), all up and with the fastest backend down — HyRD's crossover; and RS(k, m) over
 * five backends: overhead, modelled price, write and read throughput all up and with m down.
 */
async function candidates(base: string): Promise<void> {
  const KiB = 1024;
  const sizes = [64, 256, 512, 1024, 2048, 4096, 8192].map((k) => k * KiB);
  const rep = await rig(Number.MAX_SAFE_INTEGER, base, 'cand-rep');
  const str = await rig(1, base, 'cand-str');
  const reads = Number(process.env.BENCH_READS ?? 9);
  // The median of several reads: the shared machine's noise (other jobs) hits single reads.
  const mean = async (t: RedundantProvider, p: string): Promise<number> => {
    const times: number[] = [];
    for (let i = 0; i < reads; i++) times.push((await timed(async () => collect(await t.read(p)))).s);
    return times.sort((a, b) => a - b)[Math.floor(reads / 2)]! * 1000;
  };
  console.log(`threshold candidates: median of ${reads} read latencies (ms), replica vs RS(3,2) stripe`);
  console.log('  size       replica up  stripe up   replica 1 down  stripe 1 down');
  const rows: { size: number; r: number; s: number; r1: number; s1: number }[] = [];
  for (const size of sizes) {
    const d = randomBytes(size);
    await rep.tier.write(`s${size}`, d);
    await str.tier.write(`s${size}`, d);
  }
  for (const size of sizes)
    rows.push({
      size,
      r: await mean(rep.tier, `s${size}`),
      s: await mean(str.tier, `s${size}`),
      r1: 0,
      s1: 0,
    });
  for (const r of [rep, str]) {
    r.outage[0]!.goDown();
    await r.tier.probe();
  }
  for (const row of rows) {
    row.r1 = await mean(rep.tier, `s${row.size}`);
    row.s1 = await mean(str.tier, `s${row.size}`);
  }
  const f = (x: number): string => x.toFixed(1).padStart(10);
  for (const row of rows)
    console.log(
      `  ${(row.size / KiB).toFixed(0).padStart(5)} KiB ${f(row.r)} ${f(row.s)} ${f(row.r1)}     ${f(row.s1)}`,
    );
  // The crossover: the smallest size from which on the stripe is at least as fast at every size measured.
  const from = (faster: (r: (typeof rows)[number]) => boolean): string => {
    let i = rows.length;
    while (i > 0 && faster(rows[i - 1]!)) i -= 1;
    return i === rows.length ? 'never (in this range)' : `${rows[i]!.size / KiB} KiB`;
  };
  console.log(
    `  stripe as fast as a replica from: ${from((r) => r.s <= r.r)} all up, ${from((r) => r.s1 <= r.r1)} one down`,
  );
  await rep.tier.close();
  await str.tier.close();

  const size = Number(process.env.BENCH_CAND_MB ?? 16) * 1024 * 1024;
  const data = randomBytes(size);
  const mb = size / MB;
  console.log(`RS(k, m) candidates over 5 backends, ${mb.toFixed(0)} MB file (throughput MB/s)`);
  console.log('  code     survives  stored   $/GB-mo  write   read up  read m down');
  for (const rs of [
    { k: 4, m: 1 },
    { k: 3, m: 1 },
    { k: 3, m: 2 },
    { k: 2, m: 2 },
    { k: 2, m: 3 },
  ]) {
    const r = await rig(1, base, `cand-${rs.k}-${rs.m}`, rs);
    const w = await timed(() => r.tier.write('big', data, { size }));
    const upRead = await timed(async () => collect(await r.tier.read('big')));
    // The m fastest holders down: the ones a read would have chosen.
    const holders = (await r.tier.store.locations((await r.tier.store.objectOf('big'))!))
      .map((l) => Number(l.backend.slice(1)))
      .sort((a, b) => a - b);
    for (const i of holders.slice(0, rs.m)) r.outage[i]!.goDown();
    await r.tier.probe();
    const downRead = await timed(async () => collect(await r.tier.read('big')));
    const bytes = await Promise.all(r.roots.map(du));
    const stored = bytes.reduce((a, b) => a + b, 0);
    const cost = bytes.reduce((a, b, i) => a + (b / 1e9) * LINKS[i]!.price, 0);
    console.log(
      `  RS(${rs.k},${rs.m})  ${String(rs.m).padStart(8)}  ${(stored / size).toFixed(2).padStart(5)}×  ${((cost * 1e9) / size).toFixed(4).padStart(8)}  ${(mb / w.s).toFixed(1).padStart(5)}  ${(mb / upRead.s).toFixed(1).padStart(7)}  ${(mb / downRead.s).toFixed(1).padStart(11)}`,
    );
    await r.tier.close();
  }
}

async function main(): Promise<void> {
  const base = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-bench-redundant-'));
  if (process.env.BENCH_PART === 'candidates') {
    await candidates(base);
    await fsp.rm(base, { recursive: true, force: true });
    return;
  }
  const data = randomBytes(SIZE);
  const mb = SIZE / MB;
  console.log(`redundant tier, ${mb.toFixed(0)} MB file, RS(3,2) over 5 modelled links`);
  const { tier, outage } = await rig(512 * 1024, base, 'large');
  const w = await timed(() => tier.write('big.bin', data, { size: SIZE }));
  console.log(
    `write (encode+spool+upload): ${(mb / w.s).toFixed(1)} MB/s wall, ${(mb / w.cpu).toFixed(1)} MB per CPU-second`,
  );
  const read = async (t: RedundantProvider, p: string) => timed(async () => collect(await t.read(p)));
  const up = await read(tier, 'big.bin');
  outage[0]!.goDown();
  await tier.probe();
  const one = await read(tier, 'big.bin');
  outage[1]!.goDown();
  await tier.probe();
  const two = await read(tier, 'big.bin');
  outage[0]!.restore();
  outage[1]!.restore();
  await tier.probe();
  const fastest = new Shaped(
    await FsProvider.open({ root: nodePath.join(base, 'single') }),
    LINKS[0]!.ms,
    LINKS[0]!.bps,
  );
  await fastest.write('big.bin', data);
  const single = await timed(async () => collect(await fastest.read('big.bin')));
  const rep = await rig(SIZE + 1, base, 'replicated');
  await rep.tier.write('big.bin', data);
  const repRead = await read(rep.tier, 'big.bin');
  const row = (name: string, t: { s: number; cpu: number }) =>
    console.log(
      `  ${name.padEnd(34)} ${(mb / t.s).toFixed(1).padStart(7)} MB/s   ${(mb / t.cpu).toFixed(0).padStart(6)} MB/CPU-s`,
    );
  console.log('read throughput');
  row('striped, all up', up);
  row('striped, one down', one);
  row('striped, m = 2 down', two);
  row('fastest single backend', single);
  row('plain replication (r = 2)', repRead);
  console.log(`  multi-source / fastest single: ${(single.s / up.s).toFixed(2)}×`);
  console.log(`  hedged reads ${tier.metrics.hedgedReads}, degraded reads ${tier.metrics.degradedReads}`);
  await tier.close();
  await rep.tier.close();

  // Mixed workload: 300 small files (1–64 KiB) and 6 large ones (2–8 MiB).
  const mix: Buffer[] = [];
  for (let i = 0; i < 300; i++) mix.push(randomBytes(1024 + ((i * 7919) % (63 * 1024))));
  for (let i = 0; i < 6; i++) mix.push(randomBytes((2 + i) * 1024 * 1024));
  const logical = mix.reduce((n, b) => n + b.length, 0);
  console.log(`mixed workload: ${mix.length} files, ${(logical / MB).toFixed(1)} MB logical`);
  const layouts: [string, number][] = [
    ['HyRD (replicate < 512 KiB, stripe ≥)', 512 * 1024],
    ['full replication r = 2 (DuraCloud)', Number.MAX_SAFE_INTEGER],
    ['stripe everything (RACS)', 1],
  ];
  for (const [name, threshold] of layouts) {
    const r = await rig(threshold, base, `mix-${threshold}`);
    for (let i = 0; i < mix.length; i++) await r.tier.write(`f${i}`, mix[i]!);
    const bytes = await Promise.all(r.roots.map(du));
    const stored = bytes.reduce((a, b) => a + b, 0);
    const cost = bytes.reduce((a, b, i) => a + (b / 1e9) * LINKS[i]!.price, 0);
    r.outage[0]!.goDown();
    await r.tier.probe();
    const t = await timed(async () => {
      for (let i = 0; i < 300; i += 10) await collect(await r.tier.read(`f${i}`));
    });
    console.log(
      `  ${name.padEnd(36)} stored ${(stored / logical).toFixed(2)}× logical, $${((cost * 1e9) / logical).toFixed(4)}/GB-month, small read during outage ${((t.s / 30) * 1000).toFixed(1)} ms`,
    );
    await r.tier.close();
  }
  await candidates(base);
  await fsp.rm(base, { recursive: true, force: true });
}

await main();
