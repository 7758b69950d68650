// Redundant tier CPU per byte (issue #17): figures printed, never asserted.
//
//   npx tsx bench/redundant-cpu.bench.ts          (repository root; BENCH_MB=256 by default)
//   BENCH_BACKENDS=dir npx tsx bench/redundant-cpu.bench.ts   (skip s3proxy; default dir,s3)
//   BENCH_ROWS=write ...   (only the write rows and the kernel, e.g. under node --cpu-prof;
//                           'read' only the reads; default both)
//
// The "the proxy must not be the bottleneck below 1 Gbit/s on one core" as a cost:
// MB of object moved per CPU-second of this process (process.cpuUsage), the figure that
// survives a loaded machine where wall time does not (≥ 125 MB per CPU-second is 1 Gbit/s on
// one core). Rows, each with the load average beside it:
// - the RS kernel alone (@weft/reed-solomon-wasm: encode RS(3, 2), rebuild two data shards);
// - the tier's write (encode + hash + streamed upload) and read (ranged fetch + verify +
//   decode) of one file striped RS(3, 2) with 1 MiB shards (the proxy's defaults), all up
//   and with m = 2 down (every stripe rebuilt), beside plain replication (r = 2) of the
//   same file;
// - on five directory backends (FsProvider, in this process: their own work counts) and on
//   five S3 backends (S3Provider, the AWS SDK, over loopback to one in-memory s3proxy; its
//   work is another process and does not count).
// Each kind first writes and reads an 8 MiB file, not counted (module loading and JIT
// warm-up are not a per-byte cost).
// Links are not shaped: this is the cost of the bytes, bench/redundant-links.bench.ts is the
// throughput over shaped links.
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { FsProvider, type Provider, S3Provider } from '@weft/providers';
import { openRedundantProvider } from '@weft/providers/redundant';
import { OutageProvider, startS3Proxy } from '@weft/providers/testing';
import { ReedSolomon } from '@weft/reed-solomon-wasm';

const MB = 1e6;
const SIZE = Number(process.env.BENCH_MB ?? 256) * 1024 * 1024;
const KINDS = (process.env.BENCH_BACKENDS ?? 'dir,s3').split(',');
const ROWS = (process.env.BENCH_ROWS ?? 'write,read').split(',');

interface Cost {
  cpu: number;
  /** Of which in the kernel (system time: file and socket copies). */
  sys: number;
  wall: number;
  load: number;
}

async function cost(fn: () => Promise<unknown>): Promise<Cost> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const c = process.cpuUsage(c0);
  return {
    cpu: (c.user + c.system) / 1e6,
    sys: c.system / 1e6,
    wall: (performance.now() - t0) / 1000,
    load: os.loadavg()[0]!,
  };
}

function row(name: string, bytes: number, c: Cost): void {
  const mb = bytes / MB;
  const mbPerCpu = mb / c.cpu;
  console.log(
    `  ${name.padEnd(52)} ${mbPerCpu.toFixed(0).padStart(6)} MB/CPU-s (${((mbPerCpu * 8) / 1000).toFixed(2)} Gbit/s on one core, ${((100 * c.sys) / c.cpu).toFixed(0).padStart(2)} % sys)  ${(mb / c.wall).toFixed(0).padStart(5)} MB/s wall  load ${c.load.toFixed(1)}`,
  );
}

async function drain(s: AsyncIterable<Uint8Array>): Promise<number> {
  let n = 0;
  for await (const c of s) n += c.byteLength;
  return n;
}

async function kernel(data: Buffer): Promise<void> {
  const rs = await ReedSolomon.create(5, 3);
  const shard = 1 << 20;
  const stripes: Uint8Array[][] = [];
  const enc = await cost(async () => {
    for (let off = 0; off + 3 * shard <= data.length; off += 3 * shard) {
      const d = [0, 1, 2].map((i) => data.subarray(off + i * shard, off + (i + 1) * shard));
      const p = rs.encode(d);
      if (stripes.length < 4) stripes.push([...d, ...p]);
    }
  });
  row('RS(3,2) kernel: encode', data.length, enc);
  const n = Math.floor(data.length / (3 * shard));
  const dec = await cost(async () => {
    for (let i = 0; i < n; i++) {
      const s = stripes[i % stripes.length]!;
      rs.reconstruct([null, null, s[2], s[3], s[4]]);
    }
  });
  row('RS(3,2) kernel: rebuild 2 data shards', n * 3 * shard, dec);
}

async function tierRows(kind: string, providers: Provider[], base: string, data: Buffer): Promise<void> {
  const tier = (tag: string, threshold: number) => {
    const outage = providers.map((p) => new OutageProvider(p));
    const t = openRedundantProvider({
      backends: outage.map((provider, i) => ({ id: `b${i}`, provider })),
      dir: nodePath.join(base, `${kind}-${tag}-tier`),
      thresholdBytes: threshold,
      probeIntervalMs: 0,
    });
    return { t, outage };
  };
  const s = tier('striped', 512 * 1024);
  // Warm-up, not counted: the first request through a backend loads and compiles its SDK
  // modules (tsx, lazy imports) and warms the JIT — a fixed cost, not per byte, that would
  // otherwise land in the first row (module loading was ≈ 8 % of a profile of the S3 rows).
  const warm = randomBytes(8 * 1024 * 1024);
  await s.t.write('warm.bin', warm, { size: warm.byteLength });
  await drain(await s.t.read('warm.bin'));
  row(
    `${kind}: striped write (encode+hash+upload)`,
    SIZE,
    await cost(() => s.t.write('big.bin', data, { size: SIZE })),
  );
  // Every fragment stored (a backend that failed would make the row cheaper, not faster).
  const states = (await s.t.store.locations((await s.t.store.objectOf('big.bin'))!)).map((l) => l.state);
  if (states.some((x) => x !== 'ok')) throw new Error(`striped write left fragments ${states.join(' ')}`);
  const read = async (): Promise<void> => {
    const n = await drain(await s.t.read('big.bin'));
    if (n !== SIZE) throw new Error(`read ${n} bytes, wrote ${SIZE}`);
  };
  if (ROWS.includes('read')) {
    row(`${kind}: striped read, all up`, SIZE, await cost(read));
    const holders = (await s.t.store.locations((await s.t.store.objectOf('big.bin'))!))
      .filter((l) => l.slot < 2)
      .map((l) => Number(l.backend.slice(1)));
    for (const i of holders) s.outage[i]!.goDown();
    await s.t.probe();
    row(`${kind}: striped read, m = 2 down (data rebuilt)`, SIZE, await cost(read));
  }
  await s.t.close();
  const r = tier('replicated', SIZE + 1);
  row(
    `${kind}: replicated write (r = 2)`,
    SIZE,
    await cost(() => r.t.write('big.bin', data, { size: SIZE })),
  );
  if (ROWS.includes('read'))
    row(`${kind}: replicated read`, SIZE, await cost(async () => drain(await r.t.read('big.bin'))));
  await r.t.close();
}

async function main(): Promise<void> {
  const base = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-bench-cpu-'));
  const data = randomBytes(SIZE);
  console.log(
    `redundant tier CPU per byte: ${(SIZE / MB).toFixed(0)} MB file, RS(3,2), 1 MiB shards; goal ≥ 125 MB/CPU-s (1 Gbit/s on one core); ${os.cpus().length} cores, load ${os.loadavg()[0]!.toFixed(1)}`,
  );
  await kernel(data);
  try {
    if (KINDS.includes('dir')) {
      const providers = await Promise.all(
        [0, 1, 2, 3, 4].map(async (i) => {
          const root = nodePath.join(base, `dir-b${i}`);
          await fsp.mkdir(root, { recursive: true });
          return FsProvider.open({ root });
        }),
      );
      await tierRows('dir', providers, base, data);
    }
    if (KINDS.includes('s3')) {
      const s3 = await startS3Proxy();
      try {
        const providers = [0, 1, 2, 3, 4].map(
          (i) =>
            new S3Provider({
              bucket: s3.bucket,
              prefix: `b${i}`,
              endpoint: s3.endpoint,
              region: s3.region,
              forcePathStyle: true,
              credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
            }),
        );
        await tierRows('s3', providers, base, data);
      } finally {
        await s3.stop();
      }
    }
  } finally {
    await fsp.rm(base, { recursive: true, force: true });
  }
}

await main();
