// Reed–Solomon benchmark: @weft/reed-solomon-wasm (wasm SIMD) beside a native addon
// (@ronomon/reed-solomon, an optional dependency of this workspace) and a plain-TypeScript
// table-lookup baseline, in the same run.
//
//   npx tsx bench/reed-solomon.bench.ts     (from the repository root)
//
// Throughput is MB of data (k × shard size) per CPU-second, one thread at a time, best of 5
// interleaved samples.
// "reconstruct" rebuilds min(n − k, k) lost data shards from the survivors. "wasm" copies
// shards in and out of wasm memory (encode/reconstruct); "wasm stripe" is the zero-copy API
// (ReedSolomon.stripe) whose shards live in wasm memory.
import { createRequire } from 'node:module';
import { ReedSolomon } from '@weft/reed-solomon-wasm';

const CODES: Array<[number, number]> = [
  [3, 2],
  [6, 4],
  [10, 4],
  [14, 10],
];
const SHARD_SIZES = [64 * 1024, 1024 * 1024];
const MIN_SECONDS = Number(process.env.BENCH_SECONDS ?? 0.2);
const REPS = Number(process.env.BENCH_REPS ?? 5);

interface NativeRs {
  create(k: number, m: number): unknown;
  encode(
    context: unknown,
    sources: number,
    targets: number,
    buffer: Buffer,
    bufferOffset: number,
    bufferSize: number,
    parity: Buffer,
    parityOffset: number,
    paritySize: number,
    callback: (error?: Error) => void,
  ): void;
}

function loadNative(): NativeRs | undefined {
  try {
    return createRequire(import.meta.url)('@ronomon/reed-solomon') as NativeRs;
  } catch (error) {
    console.error(
      `native @ronomon/reed-solomon unavailable (${(error as Error).message.split('\n')[0]}): skipped`,
    );
    return undefined;
  }
}

function random(size: number, seed: number): Uint8Array {
  const out = new Uint8Array(size);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s >>> 24;
  }
  return out;
}

/**
 * CPU seconds of this process (all threads: the native addon works in libuv's pool). On a
 * machine shared with other work, CPU time is far steadier than wall-clock time.
 */
function cpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

/**
 * CPU seconds per call of each function, best of REPS samples of at least MIN_SECONDS. Samples
 * of the contenders are interleaved, so a burst of load from other processes on a shared
 * machine hits all of them alike.
 */
async function measure(runs: Array<(() => Promise<void> | void) | undefined>): Promise<number[]> {
  const best = runs.map(() => Infinity);
  for (const run of runs) await run?.();
  for (let rep = 0; rep < REPS; rep++) {
    for (const [i, run] of runs.entries()) {
      if (!run) continue;
      let calls = 0;
      const t0 = cpuSeconds();
      let elapsed = 0;
      do {
        await run();
        calls++;
        elapsed = cpuSeconds() - t0;
      } while (elapsed < MIN_SECONDS);
      best[i] = Math.min(best[i] ?? Infinity, elapsed / calls);
    }
  }
  return best.map((t) => (Number.isFinite(t) ? t : NaN));
}

// ---- plain TypeScript baseline: GF(2^8) multiply by 64 KiB table lookups

const MUL = new Uint8Array(65536);
{
  const exp = new Uint8Array(512);
  const log = new Uint8Array(256);
  let x = 1;
  for (let i = 0; i < 255; i++) {
    exp[i] = exp[i + 255] = x;
    log[x] = i;
    x <<= 1;
    if (x & 0x100) x ^= 0x11d;
  }
  for (let a = 1; a < 256; a++) {
    for (let b = 1; b < 256; b++) MUL[(a << 8) | b] = exp[(log[a] ?? 0) + (log[b] ?? 0)] ?? 0;
  }
}

function plainMultiply(rows: Uint8Array[], inputs: Uint8Array[], outputs: Uint8Array[]): void {
  outputs.forEach((out, r) => {
    out.fill(0);
    inputs.forEach((input, j) => {
      const base = (rows[r]?.[j] ?? 0) << 8;
      for (let b = 0; b < input.length; b++)
        out[b] = (out[b] as number) ^ (MUL[base | (input[b] as number)] as number);
    });
  });
}

interface Row {
  [column: string]: string;
}

function printTable(title: string, rows: Row[]): void {
  const columns = Object.keys(rows[0] ?? {});
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => (r[c] ?? '').length)));
  const line = (cells: string[]): string =>
    `| ${cells.map((c, i) => c.padStart(widths[i] ?? 0)).join(' | ')} |`;
  console.log(`\n${title}\n`);
  console.log(line(columns));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of rows) console.log(line(columns.map((c) => r[c] ?? '')));
}

async function main(): Promise<void> {
  const native = loadNative();
  const rows: Row[] = [];
  for (const [n, k] of CODES) {
    const m = n - k;
    const lost = Math.min(m, k);
    const rs = await ReedSolomon.create(n, k);
    const nativeContext = native?.create(k, m);
    for (const shardSize of SHARD_SIZES) {
      const dataBytes = k * shardSize;
      const mbps = (seconds: number): string => (dataBytes / 1e6 / seconds).toFixed(0);
      const data = Array.from({ length: k }, (_, i) => random(shardSize, i + 1));
      const parity = Array.from({ length: m }, () => new Uint8Array(shardSize));
      const all = [...data, ...parity];
      const damaged = all.map((s, i) => (i < lost ? null : s));
      rs.encodeInto(data, parity);
      if (!rs.reconstruct(damaged).every((s, i) => Buffer.from(s).equals(Buffer.from(all[i] ?? [])))) {
        throw new Error(`RS(${n},${k}): reconstruction differs`);
      }
      // native: one contiguous buffer of data shards and one of parity shards
      let nativeEncodeRun: (() => Promise<void>) | undefined;
      let nativeReconstructRun: (() => Promise<void>) | undefined;
      if (native && nativeContext) {
        const buffer = Buffer.concat(data);
        const parityBuffer = Buffer.alloc(m * shardSize);
        let dataMask = 0;
        for (let i = 0; i < k; i++) dataMask |= 1 << i;
        let parityMask = 0;
        for (let i = k; i < n; i++) parityMask |= 1 << i;
        const call = (sources: number, targets: number): Promise<void> =>
          new Promise((resolve, reject) =>
            native.encode(
              nativeContext,
              sources,
              targets,
              buffer,
              0,
              dataBytes,
              parityBuffer,
              0,
              m * shardSize,
              (e) => (e ? reject(e) : resolve()),
            ),
          );
        let lostMask = 0;
        for (let i = 0; i < lost; i++) lostMask |= 1 << i;
        const survivors = ((1 << n) - 1) & ~lostMask;
        nativeEncodeRun = () => call(dataMask, parityMask);
        nativeReconstructRun = () => call(survivors, lostMask);
      }
      // plain TypeScript (reconstruct = the same multiply with `lost` decode rows)
      const rowsEncode = Array.from({ length: m }, (_, i) => random(k, 100 + i).map((c) => c || 1));
      const rowsDecode = rowsEncode.slice(0, lost);
      const scratch = Array.from({ length: m }, () => new Uint8Array(shardSize));
      // ours, zero-copy: the shards live in wasm memory
      const stripe = rs.stripe(shardSize);
      data.forEach((d, i) => stripe.shards[i]?.set(d));
      const lostShards = Array.from({ length: lost }, (_, i) => i);
      const [oursEncode = NaN, stripeEncode = NaN, nativeEncode = NaN, plainEncode = NaN] = await measure([
        () => rs.encodeInto(data, parity),
        () => stripe.encode(),
        nativeEncodeRun,
        () => plainMultiply(rowsEncode, data, scratch),
      ]);
      const [
        oursReconstruct = NaN,
        stripeReconstruct = NaN,
        nativeReconstruct = NaN,
        plainReconstruct = NaN,
      ] = await measure([
        () => void rs.reconstruct(damaged),
        () => stripe.reconstruct(lostShards),
        nativeReconstructRun,
        () => plainMultiply(rowsDecode, data, scratch.slice(0, lost)),
      ]);
      if (!stripe.shards.every((s, i) => Buffer.from(s).equals(Buffer.from(all[i] ?? [])))) {
        throw new Error(`RS(${n},${k}): in-memory stripe differs`);
      }
      const ratio = (ours: number, theirs: number): string =>
        Number.isFinite(theirs) ? (theirs / ours).toFixed(2) : 'skip';
      const fmt = (s: number): string => (Number.isFinite(s) ? mbps(s) : 'skip');
      rows.push({
        code: `RS(${n},${k})`,
        shard: shardSize >= 1 << 20 ? `${shardSize >> 20} MiB` : `${shardSize >> 10} KiB`,
        'encode MB/s wasm': mbps(oursEncode),
        'wasm stripe': mbps(stripeEncode),
        native: fmt(nativeEncode),
        'plain TS': mbps(plainEncode),
        'wasm/native': ratio(oursEncode, nativeEncode),
        'stripe/native': ratio(stripeEncode, nativeEncode),
        'reconstruct MB/s wasm': mbps(oursReconstruct),
        'wasm stripe ': mbps(stripeReconstruct),
        'native ': fmt(nativeReconstruct),
        'plain TS ': mbps(plainReconstruct),
        'wasm/native ': ratio(oursReconstruct, nativeReconstruct),
        'stripe/native ': ratio(stripeReconstruct, nativeReconstruct),
      });
    }
  }
  printTable(
    'reed-solomon-wasm (wasm SIMD) vs native @ronomon/reed-solomon vs plain TypeScript — MB/s of data, ' +
      `per CPU-second, one thread, best of ${REPS} interleaved samples; RS(n,k) = k data + (n−k) parity shards; reconstruct rebuilds min(n−k, k) data shards`,
    rows,
  );
}

await main();
