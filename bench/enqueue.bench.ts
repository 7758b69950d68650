// Enqueueing a first scan's operations (issue #16): the coalescing queue alone and the
// journal's enqueue (SQLite, in the scan's batches), for 5k / 10k / 20k / 100k operations
// shaped like a first scan (each folder's mkdir, then its files). Printed beside the figures
// measured before the queue became incremental; never asserted.
//
//   npx tsx bench/enqueue.bench.ts          (from the repository root)
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import { join } from 'node:path';
import { CoalescingQueue } from '../packages/core/src/coalesce.ts';
import { Journal } from '../packages/core/src/journal/journal.ts';
import type { Op } from '../packages/core/src/ops.ts';
import { ENQUEUE_BATCH } from '../packages/core/src/scanner.ts';

/** Before: the queue re-coalesced and re-indexed itself on every push into a queued folder. */
const BEFORE_S: Record<number, string> = {
  5_000: '2.4',
  10_000: '10.1',
  20_000: '47.7',
  100_000: 'not measured (> 10 min)',
};

function scanShaped(n: number): Op[] {
  const ops: Op[] = [];
  for (let d = 0; ops.length < n; d++) {
    ops.push({ kind: 'mkdir', path: `drop/d${d}`, created: true });
    for (let f = 0; f < 200 && ops.length < n; f++)
      ops.push({ kind: 'put', path: `drop/d${d}/f${f}.js`, hash: 'e'.repeat(64), size: 4096, created: true });
  }
  return ops;
}

const rows: string[][] = [['operations', 'before (s)', 'queue alone (s)', 'journal enqueue (s)', 'queued']];
for (const n of [5_000, 10_000, 20_000, 100_000]) {
  const ops = scanShaped(n);
  let t = performance.now();
  const q = new CoalescingQueue();
  for (const op of ops) q.push(op);
  const alone = (performance.now() - t) / 1000;

  const dir = await fsp.mkdtemp(join(os.tmpdir(), 'weft-enqueue-'));
  const journal = new Journal(join(dir, 'journal.db'));
  t = performance.now();
  let queued = 0;
  for (let i = 0; i < ops.length; i += ENQUEUE_BATCH)
    queued = journal.enqueueMany(ops.slice(i, i + ENQUEUE_BATCH));
  const viaJournal = (performance.now() - t) / 1000;
  journal.close();
  await fsp.rm(dir, { recursive: true, force: true });
  rows.push([
    n.toLocaleString('en'),
    BEFORE_S[n] ?? '-',
    alone.toFixed(3),
    viaJournal.toFixed(3),
    String(queued),
  ]);
}
const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
for (const r of rows) console.log(r.map((c, i) => c.padStart(widths[i] ?? 0)).join('  '));
