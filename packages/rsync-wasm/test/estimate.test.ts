import { describe, expect, it } from 'vitest';
import { collect, delta, estimateEliminationRatios, signature } from '../src/index.ts';
import { chunked, pseudoRandom } from './helpers.ts';

describe('estimateEliminationRatios', () => {
  it('matches the real delta sizes, in one pass over each file', async () => {
    const oldBytes = pseudoRandom(300_000, 3);
    const newBytes = oldBytes.slice();
    for (let i = 0; i < 20; i++) newBytes[i * 14_999] = (newBytes[i * 14_999] ?? 0) ^ 1;
    const blockSizes = [512, 2048, 8192, 32768];
    let oldPasses = 0;
    function* once(bytes: Uint8Array): Generator<Uint8Array> {
      oldPasses++;
      yield* chunked(bytes, [10_000]);
    }
    const estimates = await estimateEliminationRatios(once(oldBytes), newBytes, { blockSizes });
    expect(oldPasses).toBe(1);
    expect(estimates.map((e) => e.blockSize)).toEqual(blockSizes);
    for (const e of estimates) {
      const sig = await collect(signature(oldBytes, { blockSize: e.blockSize }));
      const d = await collect(delta(sig, newBytes, { checksum: false }));
      expect(e.signatureBytes).toBe(sig.length);
      expect(e.deltaBytes).toBe(d.length);
      expect(e.eliminationRatio).toBeCloseTo(1 - d.length / newBytes.length, 10);
    }
    // Smaller blocks eliminate more of a sparsely edited file.
    expect(estimates[0]?.eliminationRatio).toBeGreaterThan(estimates[3]?.eliminationRatio ?? 1);
  });

  it('gives 0 for unrelated files and for an empty new file', async () => {
    const [unrelated] = await estimateEliminationRatios(pseudoRandom(50_000, 1), pseudoRandom(50_000, 2), {
      blockSizes: [1024],
    });
    expect(unrelated?.eliminationRatio).toBe(0);
    const [empty] = await estimateEliminationRatios(pseudoRandom(5000, 1), new Uint8Array(0), {
      blockSizes: [1024],
    });
    expect(empty?.eliminationRatio).toBe(0);
  });
});
