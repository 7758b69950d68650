import fc from 'fast-check';
import { createHash } from 'node:crypto';
import type { BundleEntry } from '../src/bundle.ts';

/** Runs per property: scaled down in CI, 100,000 with WEFT_FULL=1. */
export const RUNS = process.env.WEFT_FULL === '1' ? 100_000 : 1_500;
export const FUZZ_RUNS = process.env.WEFT_FULL === '1' ? 100_000 : 3_000;

const segment = fc
  .string({ unit: fc.constantFrom(...'abcXYZ019 _-.éß中😀'.split(/(?:)/u)), minLength: 1, maxLength: 12 })
  .filter((s) => s !== '.' && s !== '..');
export const entryPath = fc
  .array(segment, { minLength: 1, maxLength: 4 })
  .map((s) => s.join('/').normalize('NFC'));

export const revision = fc.option(fc.stringMatching(/^[\x21-\x7e]{1,40}$/), { nil: undefined });

export const bundleEntry: fc.Arbitrary<BundleEntry> = fc
  .record({
    path: entryPath,
    rev: fc.oneof(revision, fc.constant(null)),
    mtimeMs: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
    content: fc.uint8Array({ maxLength: 300 }),
  })
  .map(({ path, rev, mtimeMs, content }) => {
    const sha256 = createHash('sha256').update(content).digest('hex');
    return rev === undefined ? { path, mtimeMs, sha256, content } : { path, rev, mtimeMs, sha256, content };
  });

export const bundleEntries = fc.uniqueArray(bundleEntry, { selector: (e) => e.path, maxLength: 12 });

/** Flip one byte of `bytes` (never to the same value). */
export function mutate(bytes: Uint8Array, at: number, xor: number): Uint8Array {
  const out = bytes.slice();
  const i = at % out.byteLength;
  out[i] = (out[i] ?? 0) ^ (xor % 255 || 1);
  return out;
}
