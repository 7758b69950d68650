/**
 * The upload compression compares the compressor with the LINK (CoCloud Eq. 3–4), so a
 * bundle's link time is its request's time less the server's own, which the proxy states in
 * a Server-Timing header (issue #16). On loopback a bundle request is almost all the server's
 * ingest: timed whole, the link looked as slow as the ingest and the choice flipped towards
 * deflate, which only adds work on both sides. Here the memory server takes 150 ms over each
 * bundle: when it says so, the link is fast and bundles go raw; when it does not, the same
 * bundles look like a link of a few MB/s and go deflated (the control: the test could not pass with
 * the server's time ignored).
 */
import { describe, expect, it } from 'vitest';
import { onCloud } from './support/cloud-run.ts';

const ROUNDS = 8;
const FILES_PER_ROUND = 96;

/**
 * ~4 KiB of hex digits from a seeded generator: deflate halves it (4 bits a character), so a
 * round's bundle is ~390 KB raw and ~200 KB deflated — both above the 128 KiB a rate sample
 * needs — and the compressor's output rate (r_b/β) stays far above the silent server's
 * apparent link (~2.6 MB/s) even on a loaded machine.
 */
function text(round: number, i: number): string {
  let x = (round * 7919 + i * 104729 + 1) >>> 0;
  let s = '';
  while (s.length < 4096) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    s += (x >>> 28).toString(16);
  }
  return s;
}

/** Bundles sent deflated and raw in the last half of the rounds (the first half is decided on
 * the default rate and the first samples). */
async function lastHalf(reportsServerTime: boolean): Promise<{ deflated: number; raw: number }> {
  let out = { deflated: 0, raw: 0 };
  await onCloud(async (cloud) => {
    const a = await cloud.addDevice('laptop');
    a.remote.reportsServerTime = reportsServerTime;
    a.remote.beforeCall = async (method) => {
      if (method === 'uploadBundle') await new Promise((r) => setTimeout(r, 150));
    };
    let half = { deflated: 0, raw: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      if (round === ROUNDS / 2) half = { ...(a.engine.status.get().uploadCompression ?? half) };
      for (let i = 0; i < FILES_PER_ROUND; i++) await a.write(`r${round}/f${i}.txt`, text(round, i));
      await a.sync();
    }
    const end = a.engine.status.get().uploadCompression ?? { deflated: 0, raw: 0 };
    out = { deflated: end.deflated - half.deflated, raw: end.raw - half.raw };
  });
  return out;
}

describe('the link rate takes the server’s own time off a bundle’s request', () => {
  it('a server that states its 150 ms: the link is fast, bundles go raw', async () => {
    const sent = await lastHalf(true);
    expect(sent.raw).toBeGreaterThanOrEqual(ROUNDS / 2);
    expect(sent.deflated).toBe(0);
  });

  it('the same server silent: the 150 ms count as the link, bundles go deflated', async () => {
    const sent = await lastHalf(false);
    expect(sent.deflated).toBeGreaterThanOrEqual(ROUNDS / 2);
    expect(sent.raw).toBe(0);
  });
});
