import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  BUNDLE_MAGIC,
  BUNDLE_OVERHEAD,
  bundleEntrySize,
  decodeBundle,
  encodeBundle,
  encodeBundleAsync,
  MAX_BUNDLE_BYTES,
  sha256Hex,
} from '../src/bundle.ts';
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
    bytes[4] = 4;
    expect(rejects(bytes).code).toBe('UNSUPPORTED_VERSION');
  });

  const sha = (n: number): string => sha256Hex(new Uint8Array([n]));
  const entry = (path: string, own?: string[]) => {
    const content = new TextEncoder().encode(path);
    return { path, mtimeMs: 1, sha256: sha256Hex(content), content, ...(own ? { own } : {}) };
  };
  const recrc = (b: Uint8Array): Uint8Array => {
    new DataView(b.buffer, b.byteOffset).setUint32(
      b.byteLength - 4,
      crc32(b.subarray(0, b.byteLength - 4)),
      true,
    );
    return b;
  };

  it('carriesOwnContentsAsVersion3AndOnlyThen', () => {
    for (const compress of [false, true]) {
      const entries = [entry('a.txt'), entry('b.txt', [sha(1), sha(2)]), entry('c.txt', [sha(3)])];
      const bytes = encodeBundle(entries, { compress });
      expect(bytes[4]).toBe(3);
      expect(new DataView(bytes.buffer, bytes.byteOffset).getUint32(20, true)).toBe(3);
      const decoded = decodeBundle(bytes);
      expect(decoded.version).toBe(3);
      expect(decoded.entries.map((e) => [e.path, e.own])).toEqual([
        ['a.txt', undefined],
        ['b.txt', [sha(1), sha(2)]],
        ['c.txt', [sha(3)]],
      ]);
      // Sized as the packer counts it: 36 bytes an own record.
      if (!compress) {
        const sizes = entries.reduce(
          (n, e) => n + bundleEntrySize(e.path, undefined, e.content.byteLength, e.own?.length),
          0,
        );
        expect(bytes.byteLength).toBe(BUNDLE_OVERHEAD + sizes);
      }
    }
    // No own contents (or empty lists): version 1, byte for byte.
    expect(encodeBundle([entry('a.txt', [])])).toEqual(encodeBundle([entry('a.txt')]));
    expect(encodeBundle([entry('a.txt')])[4]).toBe(1);
    // Never in a download answer.
    expect(() => encodeBundle([entry('a.txt', [sha(1)])], { deferred: [] })).toThrow(WireFormatError);
    expect(() =>
      encodeBundle([
        entry(
          'a.txt',
          Array.from({ length: 17 }, (_, i) => sha(i)),
        ),
      ]),
    ).toThrow(/own records/);
    expect(() => encodeBundle([entry('a.txt', ['not a hash'])])).toThrow(/not a SHA-256/);
  });

  it('rejectsBadOwnRecords', () => {
    // Layout: header 24, entries, then records of 4 + 32 bytes; the last record's index is at -40.
    const two = () => encodeBundle([entry('a.txt', [sha(1)]), entry('b.txt', [sha(2)])]);
    const noEntry = two();
    noEntry[noEntry.byteLength - 40] = 2;
    expect(rejects(recrc(noEntry)).code).toBe('BAD_FIELD');
    const order = two();
    order[order.byteLength - 40 - 36] = 1; // the first record now names entry 1, the second entry 1... then 0
    order[order.byteLength - 40] = 0;
    expect(rejects(recrc(order)).code).toBe('BAD_FIELD');
    const none = two();
    none[20] = 0;
    expect(rejects(recrc(none)).code).toBe('BAD_HEADER');
    const tooMany = two();
    tooMany[20] = 33; // above 16 × 2 entries
    expect(rejects(recrc(tooMany)).code).toBe('BAD_HEADER');
    const short = two();
    short[20] = 3;
    expect(rejects(recrc(short)).code).toBe('TRUNCATED');
    // Seventeen for one entry: too many.
    const many = Array.from({ length: 16 }, (_, i) => sha(i));
    const full = encodeBundle([entry('a.txt', many), entry('b.txt', [sha(99)])]);
    full[full.byteLength - 40] = 0;
    expect(rejects(recrc(full)).code).toBe('TOO_LARGE');
  });

  const deferredRecords = fc
    .uniqueArray(fc.nat({ max: 20_000 }), { maxLength: 40 })
    .chain((indices) =>
      fc.tuple(
        ...indices
          .sort((x, y) => x - y)
          .map((index) =>
            fc.constantFrom('absent', 'large', 'later', 'changed').map((reason) => ({ index, reason })),
          ),
      ),
    );

  it('roundTripsDeferredRecordsAsVersion2', () => {
    fc.assert(
      fc.property(bundleEntries, deferredRecords, fc.boolean(), (entries, deferred, compress) => {
        const bytes = encodeBundle(entries, { compress, deferred });
        expect(bytes[4]).toBe(2);
        const decoded = decodeBundle(bytes);
        expect(decoded.version).toBe(2);
        expect(decoded.deferred).toEqual(deferred);
        expect(decoded.entries.map((e) => e.path)).toEqual(entries.map((e) => e.path));
        rejects(mutate(bytes, deferred.length * 7 + entries.length, 1 + deferred.length));
      }),
      { numRuns: RUNS },
    );
    // Without deferred records: version 1, byte for byte what a version-1 writer wrote.
    expect(encodeBundle([])[4]).toBe(1);
    expect(decodeBundle(encodeBundle([])).deferred).toEqual([]);
  });

  it('keepsTenThousandDeferredPathsSmall', () => {
    // The list that outgrew a 16 KiB response header: 5 bytes a path, whatever the path.
    const deferred = Array.from({ length: 10_000 }, (_, index) => ({ index, reason: 'later' as const }));
    const bytes = encodeBundle([], { deferred });
    expect(bytes.byteLength).toBe(24 + 50_000 + 4);
    expect(decodeBundle(bytes).deferred).toHaveLength(10_000);
  });

  it('rejectsBadDeferredRecords', () => {
    const reason = 'later' as const;
    expect(() =>
      encodeBundle([], {
        deferred: [
          { index: 3, reason },
          { index: 3, reason },
        ],
      }),
    ).toThrow(WireFormatError);
    expect(() => encodeBundle([], { deferred: [{ index: 1, reason: 'why' as 'later' }] })).toThrow(
      /unknown deferred reason/,
    );
    // A version-1 bundle with a deferred count; a version-2 one with an unknown reason or
    // with decreasing indices.
    const v1 = encodeBundle([]);
    v1[20] = 1;
    expect(rejects(recrc(v1)).code).toBe('BAD_HEADER');
    const unknown = encodeBundle([], { deferred: [{ index: 0, reason }] });
    unknown[28] = 9;
    expect(rejects(recrc(unknown)).code).toBe('BAD_FIELD');
    const order = encodeBundle([], {
      deferred: [
        { index: 0, reason },
        { index: 5, reason },
      ],
    });
    order[29] = 0;
    expect(rejects(recrc(order)).code).toBe('BAD_FIELD');
    // A count that promises more records than the area holds.
    const short = encodeBundle([], { deferred: [{ index: 0, reason }] });
    short[20] = 2;
    expect(rejects(recrc(short)).code).toBe('TRUNCATED');
  });

  it('rejectsBadPathsAndDuplicates', () => {
    const content = new Uint8Array([1]);
    const e = (path: string) => ({ path, mtimeMs: 0, sha256: sha256Hex(content), content });
    for (const bad of ['../x', '/abs', 'a//b', 'a/./b', 'nul\0', '', 'e\u0301']) {
      expect(() => encodeBundle([e(bad)])).toThrow(WireFormatError);
    }
    expect(() => encodeBundle([e('a'), e('a')])).toThrow(/twice/);
  });

  it('writesTheSameBytesForEntriesTheCallerChecked', () => {
    // entriesChecked (issue #16: the agent's paths and hashes were checked where they came
    // in) skips the per-entry checks, never the layout: the same bytes, duplicates still refused.
    fc.assert(
      fc.property(bundleEntries, fc.boolean(), (entries, compress) => {
        expect(encodeBundle(entries, { compress, entriesChecked: true })).toEqual(
          encodeBundle(entries, { compress }),
        );
      }),
      { numRuns: RUNS },
    );
    const content = new Uint8Array([1]);
    const e = (path: string) => ({ path, mtimeMs: 0, sha256: sha256Hex(content), content });
    expect(() => encodeBundle([e('a'), e('a')], { entriesChecked: true })).toThrow(/twice/);
    // Multi-byte names, a revision and an mtime past 2^32 and up to 2^53 - 1, written in place.
    const far = [
      { path: 'é/日本/x', rev: 'r-1', mtimeMs: Number.MAX_SAFE_INTEGER, sha256: sha256Hex(content), content },
      { path: 'b', rev: null, mtimeMs: 2 ** 32 + 7, sha256: sha256Hex(content), content },
    ];
    const decoded = decodeBundle(encodeBundle(far, { entriesChecked: true })).entries;
    expect(decoded.map((x) => [x.path, x.rev, x.mtimeMs, x.sha256])).toEqual(
      far.map((x) => [x.path, x.rev, x.mtimeMs, x.sha256]),
    );
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

  it('framesAnUncompressedBundleAsTheFormatSays', () => {
    // docs/formats/bundle.md: magic, version 1, flags 0, reserved, count, raw = stored length,
    // no deferred records, the entries area, CRC-32 of everything before it.
    const content = new Uint8Array(1024 * 1024).map((_, i) => i % 253);
    const entries = [{ path: 'a/b.txt', mtimeMs: 7, sha256: sha256Hex(content), content }];
    const bytes = encodeBundle(entries);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const area = bytes.byteLength - 24 - 4;
    expect(Buffer.from(bytes.subarray(0, 4))).toEqual(Buffer.from(BUNDLE_MAGIC));
    expect([bytes[4], bytes[5], view.getUint16(6, true), view.getUint32(8, true)]).toEqual([1, 0, 0, 1]);
    expect([view.getUint32(12, true), view.getUint32(16, true), view.getUint32(20, true)]).toEqual([
      area,
      area,
      0,
    ]);
    expect(view.getUint32(bytes.byteLength - 4, true)).toBe(crc32(bytes.subarray(0, bytes.byteLength - 4)));
    // Framed where the entries were written (issue #16): that buffer is sized exactly for
    // ASCII paths, so nothing lies beyond the bundle in it.
    expect(bytes.buffer.byteLength).toBe(bytes.byteLength);
  });

  it('encodesTheSameBytesAsyncWithTheDeflateOffTheEventLoop', async () => {
    await fc.assert(
      fc.asyncProperty(bundleEntries, fc.boolean(), async (entries, compress) => {
        expect(await encodeBundleAsync(entries, { compress })).toEqual(encodeBundle(entries, { compress }));
      }),
      { numRuns: Math.min(RUNS, 50) },
    );
    // A turn of the event loop comes while a 3 MiB bundle is deflated (issue #16: inline, it
    // held the agent's UI): a callback queued before the call runs before the bundle is back.
    const content = new Uint8Array(3 * 1024 * 1024).map((_, i) => (i * 31) % 251);
    const entries = [{ path: 'big.txt', mtimeMs: 0, sha256: sha256Hex(content), content }];
    let turned = false;
    setImmediate(() => (turned = true));
    const bytes = await encodeBundleAsync(entries, { compress: true });
    expect(turned).toBe(true);
    expect(decodeBundle(bytes).compressed).toBe(true);
  });

  it('encodesIntoTheBufferGivenWhenItFits', async () => {
    // Issue #16: the agent encodes every bundle into one of a few reused buffers. A buffer
    // already full of other bytes, used again and again: the same bytes as a fresh encoding,
    // written in it (a view of it) when they fit, in a buffer of their own when not.
    const into = new Uint8Array(64 * 1024).fill(0xa5);
    await fc.assert(
      fc.asyncProperty(bundleEntries, fc.boolean(), async (entries, compress) => {
        const fresh = encodeBundle(entries, { compress });
        for (const bytes of [
          encodeBundle(entries, { compress, into }),
          await encodeBundleAsync(entries, { compress, into }),
        ]) {
          expect(Buffer.from(bytes).equals(Buffer.from(fresh))).toBe(true);
          if (bytes.byteLength + 512 <= into.byteLength) expect(bytes.buffer).toBe(into.buffer);
        }
      }),
      { numRuns: Math.min(RUNS, 50) },
    );
    const content = new Uint8Array(100_000).map((_, i) => (i * 31) % 251);
    const big = [{ path: 'big.txt', mtimeMs: 0, sha256: sha256Hex(content), content }];
    const raw = encodeBundle(big, { into });
    expect(raw.buffer).not.toBe(into.buffer);
    expect(decodeBundle(raw).entries[0]?.content).toEqual(content);
    const deflated = encodeBundle(big, { compress: true, into });
    expect(deflated.byteLength).toBeLessThan(into.byteLength);
    expect(deflated.buffer).toBe(into.buffer);
    expect(decodeBundle(deflated).entries[0]?.content).toEqual(content);
  });
});
