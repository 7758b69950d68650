/**
 * Idle-time work after large downloads (HyCloud Eq. 1): measure how much of the new file
 * each candidate block size would have found in the old one, and fold the ratios into the
 * file's block-size history, which picks the block size of its next delta.
 */
import { createReadStream } from 'node:fs';
import { estimateEliminationRatios } from '@weft/rsync-wasm';
import { CANDIDATE_BLOCK_SIZES, updateHistory } from '../adaptive.ts';
import type { SyncContext } from './context.ts';

/** Run the waiting measurements until `interrupted()` says a pass wants the time back. */
export async function runIdleEstimates(ctx: SyncContext, interrupted: () => boolean): Promise<void> {
  while (ctx.idleEstimates.length > 0 && !interrupted()) {
    const job = ctx.idleEstimates.shift();
    if (!job) return;
    try {
      const estimates = await estimateEliminationRatios(
        createReadStream(job.oldCopy) as AsyncIterable<Uint8Array>,
        createReadStream(job.newFile) as AsyncIterable<Uint8Array>,
        { blockSizes: CANDIDATE_BLOCK_SIZES },
      );
      const next = updateHistory(
        ctx.history(job.path),
        CANDIDATE_BLOCK_SIZES.map((b) => estimates.find((e) => e.blockSize === b)?.eliminationRatio ?? 0),
      );
      ctx.journal.setDeltaHistory(job.path, next.probs, next.n);
    } catch {
      // The file changed or vanished meanwhile: skip this measurement.
    }
  }
}
