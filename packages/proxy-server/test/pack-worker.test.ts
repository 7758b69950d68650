// The packer's deflate in a worker thread (store/pack-worker.ts, issue #16) follows
// packStoredForm's rule (@weft/wire pack.ts) byte for byte: the worker runs its own copy of
// the rule (plain JavaScript), so the two are compared on every kind of content the rule
// tells apart — too small, text, noise, noise at the start and text after, a view of a larger buffer —
// asked for in one turn of the loop, so they go to the worker in one message.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PACK_PROBE_BYTES, packStoredForm } from '@weft/wire';
import { packWorkerStats, storedFormOffThread } from '../src/store/pack-worker.ts';

const text = (n: number): Buffer => Buffer.from('export const x = 1; // a line of source\n'.repeat(n));

describe('pack worker', () => {
  it('gives the stored form packStoredForm gives', async () => {
    const big = Buffer.concat([randomBytes(100), text(200), randomBytes(100)]);
    const noise = randomBytes(1024);
    const cases: Uint8Array[] = [
      new Uint8Array(0),
      Buffer.from('short'),
      text(2),
      text(100),
      randomBytes(3000),
      randomBytes(3 * PACK_PROBE_BYTES),
      Buffer.concat([randomBytes(PACK_PROBE_BYTES), text(300)]),
      Buffer.concat([text(60), randomBytes(PACK_PROBE_BYTES * 2)]),
      big.subarray(100, big.byteLength - 100), // a view: only its own bytes count
      // Noise repeated: 1 KiB blocks are noise to the entropy gate (stored); 128-byte blocks
      // are not, and deflate (probe, then the whole) shrinks them.
      Buffer.concat(Array.from({ length: 5 }, () => noise.subarray(0, 1024))),
      Buffer.concat(Array.from({ length: 40 }, () => noise.subarray(0, 128))),
    ];
    const before = packWorkerStats.messages;
    const got = await Promise.all(cases.map((c) => storedFormOffThread(c)));
    // Asked for in one turn: one message to the worker for all of them.
    expect(packWorkerStats.messages - before).toBe(1);
    for (const [i, c] of cases.entries()) {
      const want = packStoredForm(c);
      expect(got[i]!.compression, `case ${i}`).toBe(want.compression);
      expect(Buffer.from(got[i]!.bytes).equals(Buffer.from(want.bytes)), `case ${i}`).toBe(true);
    }
    // Both outcomes were seen (the cases are not all stored or all deflated).
    expect(new Set(got.map((g) => g.compression))).toEqual(new Set([0, 1]));
  });
});
