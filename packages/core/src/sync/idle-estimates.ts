/**
 * Idle-time work after large downloads (HyCloud Eq. 1): measure how much of the new file
 * each candidate block size would have found in the old one (signature bytes counted with
 * the delta's), and fold the ratios into the file's block-size history, which picks the
 * block size of its next delta.
 */
import { createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { estimateEliminationRatios } from '@weft/rsync-wasm';
import { CANDIDATE_BLOCK_SIZES, updateHistory } from '../adaptive.ts';
import { JournalChanges } from '../journal/changes.ts';
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
      // γ of a delta sync whose signature travels (a delta download sends it up): the bytes
      // of signature and delta together, so the smallest block (the least delta, but the
      // largest signature) does not win by ignoring half of what goes on the wire.
      const size = (await fsp.stat(job.newFile)).size;
      const gamma = (b: number): number => {
        const e = estimates.find((x) => x.blockSize === b);
        return e && size > 0 ? Math.max(0, 1 - (e.deltaBytes + e.signatureBytes) / size) : 0;
      };
      const next = updateHistory(ctx.history(job.path), CANDIDATE_BLOCK_SIZES.map(gamma));
      ctx.commit(new JournalChanges().setDeltaHistory(job.path, next.probs, next.n));
    } catch {
      // The file changed or vanished meanwhile: skip this measurement.
    }
  }
}
