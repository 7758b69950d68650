/**
 * Queueing what a scan found (scanner.ts): its operations with their index rows, in batches
 * that each take one transaction and a turn of the event loop between them (issue #16).
 */
import type { Journal } from './journal/journal.ts';
import type { ScanResult } from './scanner.ts';

/**
 * Operations (with the index rows that go with them) per enqueue transaction: large enough
 * that the per-transaction cost vanishes, small enough that one batch holds the event loop
 * for milliseconds, not seconds (issue #16).
 */
export const ENQUEUE_BATCH = 250;

/**
 * Queue a scan's operations with their index rows in batches (ENQUEUE_BATCH), each batch
 * one transaction, yielding to the event loop between batches so the agent keeps answering
 * its UI and signals while 100,000 operations go in. Stops between batches once
 * `options.shouldStop` says so: what was queued is consistent (each row with its operation), the
 * rest is found again by the next scan. Returns the queue's length, whether every
 * operation went in, and how many of them merged away into those queued (coalesce.ts).
 */
export async function enqueueScan(
  journal: Journal,
  result: ScanResult,
  options: {
    /** Checked between batches: true stops (the engine's stop()). */
    readonly shouldStop?: () => boolean;
    /** After each batch, with the queue's length (the status shows it rising). */
    readonly onBatch?: (queued: number) => void;
    readonly batch?: number;
  } = {},
): Promise<{ queued: number; complete: boolean; eliminated: number }> {
  const batch = options.batch ?? ENQUEUE_BATCH;
  let queued = journal.pendingCount();
  let eliminated = 0;
  for (let i = 0; i < result.ops.length || i === 0; i += batch) {
    if (i > 0) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (options.shouldStop?.()) return { queued, complete: false, eliminated };
    }
    const end = Math.min(result.ops.length, i + batch);
    // The last batch also writes the rows found after the last operation (deletions' rows).
    const through = end === result.ops.length ? Number.POSITIVE_INFINITY : end;
    // Measured around the enqueue: a push beside the scan may take some out in between.
    const before = journal.pendingCount();
    queued = journal.enqueueMany(result.ops.slice(i, end), () => result.commitThrough(through));
    eliminated += end - i - (queued - before);
    options.onBatch?.(queued);
  }
  return { queued, complete: true, eliminated };
}
