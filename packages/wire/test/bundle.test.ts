import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BUNDLE_MAGIC, decodeBundle, encodeBundle, MAX_BUNDLE_BYTES, sha256Hex } from '../src/bundle.ts';
import { crc32 } from '../src/bytes.ts';
import { WireFormatError } from '../src/errors.ts';
import { bundleEntries, FUZZ_RUNS, mutate, RUNS } from './arbitraries.ts';

function rejects(bytes: Uint8Array): WireFormatError {
  try {
    decodeBundle(bytes);
  } catch (e) {
    expect(e).toBeInstanceOf(WireFormatError);
    return e as WireFormatError;
  }
  throw new Error('decodeBundle accepted invalid input');
}

describe('bundle', () => {
  it('roundTrips', () => {
    fc.assert(
      fc.property(bundleEntries, fc.boolean(), (entries, compress) => {
        const decoded = decodeBundle(encodeBundle(entries, { compress }));
        expect(decoded.compressed).toBe(compress);
        expect(decoded.entries.map((e) => ({ ...e, content: Buffer.from(e.content) }))).toEqual(
          entries.map((e) => ({ ...e, content: Buffer.from(e.content) })),
        );
      }),
      { numRuns: RUNS },
    );
  });

  it('rejectsEveryOneByteMutation', () => {
    fc.assert(
      fc.property(bundleEntries, fc.boolean(), fc.nat(), fc.nat(), (entries, compress, at, xor) => {
        const bytes = encodeBundle(entries, { compress });
        rejects(mutate(bytes, at, xor));
      }),
      { numRuns: FUZZ_RUNS },
    );
  });

  it('rejectsEveryTruncationAndExtension', () => {
    fc.assert(
      fc.property(
        bundleEntries,
        fc.nat(),
        fc.uint8Array({ minLength: 1, maxLength: 8 }),
        (entries, cut, extra) => {
          const bytes = encodeBundle(entries);
          rejects(bytes.subarray(0, cut % bytes.byteLength));
          rejects(Buffer.concat([bytes, extra]));
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('rejectsRandomBytesCleanly', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.boolean(), (junk, withMagic) => {
        const bytes = withMagic ? Buffer.concat([BUNDLE_MAGIC, Uint8Array.of(1), junk]) : junk;
        rejects(bytes);
      }),
      { numRuns: FUZZ_RUNS },
    );
  });

  it('rejectsUnknownVersion', () => {
    const bytes = encodeBundle([]);
    bytes[4] = 2;
    expect(rejects(bytes).code).toBe('UNSUPPORTED_VERSION');
  });

  it('rejectsBadPathsAndDuplicates', () => {
    const content = new Uint8Array([1]);
    const e = (path: string) => ({ path, mtimeMs: 0, sha256: sha256Hex(content), content });
    for (const bad of ['../x', '/abs', 'a//b', 'a/./b', 'nul\0', '', 'e\u0301']) {
      expect(() => encodeBundle([e(bad)])).toThrow(WireFormatError);
    }
    expect(() => encodeBundle([e('a'), e('a')])).toThrow(/twice/);
  });

  it('detectsContentHashMismatch', () => {
    const content = new Uint8Array([1, 2, 3]);
    const bytes = encodeBundle([{ path: 'a', mtimeMs: 0, sha256: sha256Hex(new Uint8Array([9])), content }]);
    expect(rejects(bytes).code).toBe('CHECKSUM_MISMATCH');
    expect(decodeBundle(bytes, { verifyHashes: false }).entries).toHaveLength(1);
  });

  it('enforcesTheSizeLimit', () => {
    const content = new Uint8Array(MAX_BUNDLE_BYTES);
    expect(() => encodeBundle([{ path: 'big', mtimeMs: 0, sha256: sha256Hex(content), content }])).toThrow(
      /exceeds the limit/,
    );
    expect(rejects(new Uint8Array(MAX_BUNDLE_BYTES + 1)).code).toBe('TOO_LARGE');
  });

  it('capsAZipBomb', () => {
    // A compressed bundle whose header promises a small raw size but inflates to more.
    const content = new Uint8Array(100_000);
    const honest = encodeBundle([{ path: 'z', mtimeMs: 0, sha256: sha256Hex(content), content }], {
      compress: true,
    });
    const lying = honest.slice();
    const view = new DataView(lying.buffer);
    view.setUint32(12, 1000, true);
    view.setUint32(lying.byteLength - 4, 0, true);
    view.setUint32(lying.byteLength - 4, crc32(lying.subarray(0, lying.byteLength - 4)), true);
    expect(rejects(lying).code).toBe('BAD_COMPRESSION');
  });
});
