// In-place writes of the proxy's bundle ingest (packages/providers/src/adapters/fs/in-place-worker.ts):
// one worker (the count before the pool adapted) beside the adaptive pool, on this machine's
// disk and on a simulated slow mount (each file first waits WEFT_BENCH_LATENCY_MS, blocked:
// the pool's test hook standing in for EFS or NFS round trips, which this machine cannot
// mount — the rows say so). Prints files per second and the width the pool ended at; never
// asserted.
//
//   npx tsx bench/in-place-width.bench.ts            (from the repository root)
//
// WEFT_BENCH_FILES (default 4000) files of 1–16 KiB per row, in batches of 500 in folders of
// 100; WEFT_BENCH_LATENCY_MS (default 3).
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import { join } from 'node:path';
import {
  InPlacePool,
  type InPlacePoolOptions,
} from '../packages/providers/src/adapters/fs/in-place-worker.ts';

const FILES = Number(process.env.WEFT_BENCH_FILES ?? 4000);
const LATENCY_MS = Number(process.env.WEFT_BENCH_LATENCY_MS ?? 3);
const BATCH = 500;
const PER_FOLDER = 100;

async function row(label: string, options: InPlacePoolOptions): Promise<string[]> {
  const root = await fsp.mkdtemp(join(os.tmpdir(), 'weft-bench-width-'));
  const pool = new InPlacePool({ idleMs: 1000, ...options });
  try {
    for (let d = 0; d < FILES / PER_FOLDER; d++) await fsp.mkdir(join(root, `d${d}`));
    const started = performance.now();
    for (let at = 0; at < FILES; at += BATCH) {
      const items = Array.from({ length: Math.min(BATCH, FILES - at) }, (_, k) => {
        const i = at + k;
        return {
          abs: join(root, `d${Math.floor(i / PER_FOLDER)}`, `f${i}`),
          bytes: Buffer.alloc(1024 + ((i * 7919) % (15 * 1024)), i % 251),
          mode: 0o644,
        };
      });
      const r = await pool.writeMany(items);
      const failed = r.filter((x) => x instanceof Error || x === 'exists').length;
      if (failed > 0) throw new Error(`${label}: ${failed} files not written`);
    }
    const s = (performance.now() - started) / 1000;
    return [label, (FILES / s).toFixed(0), s.toFixed(2), String(pool.width), `${pool.started}`];
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
}

const rows = [
  await row('local disk, 1 worker (fixed: before)', { size: 1 }),
  await row('local disk, adaptive (default)', {}),
  await row(`simulated ${LATENCY_MS} ms/file mount, 1 worker (fixed: before)`, {
    size: 1,
    latencyMsPerItem: LATENCY_MS,
  }),
  await row(`simulated ${LATENCY_MS} ms/file mount, adaptive (default)`, { latencyMsPerItem: LATENCY_MS }),
];
const head = ['in-place writes (what ran)', 'files/s', 'wall s', 'width at end', 'threads started'];
const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
for (const r of [head, ...rows]) console.log(r.map((c, i) => c.padEnd(widths[i]!)).join('  '));
console.log(
  `${FILES} files of 1–16 KiB per row, batches of ${BATCH}, ${os.availableParallelism()} cores, load ${os.loadavg()[0]!.toFixed(2)}`,
);
