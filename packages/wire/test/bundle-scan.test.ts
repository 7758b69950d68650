import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeBundle, sha256Hex, type BundleEntry } from '../src/bundle.ts';
import { SCAN_CHUNK_BYTES, scanBundleEntries, type BundleEntryHeader } from '../src/bundle-scan.ts';
import { bundleEntries, mutate, RUNS } from './arbitraries.ts';

const MiB = 1024 * 1024;

function zeros(n: number, count: number): BundleEntry[] {
  const content = new Uint8Array(n);
  const sha256 = sha256Hex(content);
  return Array.from({ length: count }, (_, i) => ({ path: `z/${i}.bin`, mtimeMs: 1, sha256, content }));
}

describe('bundle scan', () => {
  it('seesEveryEntryHeaderOfAValidBundle', async () => {
    await fc.assert(
      fc.asyncProperty(bundleEntries, fc.boolean(), async (entries, compress) => {
        const seen: BundleEntryHeader[] = [];
        await scanBundleEntries(encodeBundle(entries, { compress }), (h) => seen.push(h));
        expect(seen).toEqual(
          entries.map((e, index) => ({ index, path: e.path, size: e.content.byteLength })),
        );
      }),
      { numRuns: Math.min(RUNS, 300) },
    );
  });

  it('stopsInflatingAtTheFirstEntryPastTheBudget', async () => {
    // 61 entries of 1 MiB of zeros: a bundle of about 61 KB whose entries area is 61 MiB.
    const bundle = encodeBundle(zeros(MiB, 61), { compress: true });
    expect(bundle.byteLength).toBeLessThan(100 * 1024);
    const budget = 5 * MiB + 100;
    let admitted = 0;
    let inflatedAtRefusal = -1;
    const refusal = new Error('over budget');
    await expect(
      scanBundleEntries(bundle, (h, inflated) => {
        if (admitted + h.size > budget) {
          inflatedAtRefusal = inflated;
          throw refusal;
        }
        admitted += h.size;
      }),
    ).rejects.toBe(refusal);
    expect(admitted).toBe(5 * MiB);
    // What was inflated: the admitted entries, their headers, and at most one more buffer.
    expect(inflatedAtRefusal).toBeGreaterThanOrEqual(5 * MiB);
    expect(inflatedAtRefusal).toBeLessThanOrEqual(5 * MiB + 6 * 100 + SCAN_CHUNK_BYTES);
  });

  it('endsQuietlyOnCorruptInput', async () => {
    // Never throws on its own: decodeBundle gives the precise error afterwards.
    await fc.assert(
      fc.asyncProperty(
        bundleEntries,
        fc.boolean(),
        fc.nat(),
        fc.nat(),
        async (entries, compress, at, xor) => {
          await scanBundleEntries(mutate(encodeBundle(entries, { compress }), at, xor), () => undefined);
        },
      ),
      { numRuns: Math.min(RUNS, 300) },
    );
  });
});
