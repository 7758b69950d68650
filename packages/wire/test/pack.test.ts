import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import {
  coalescePackRanges,
  decodePack,
  looksLikeNoise,
  PACK_PROBE_BYTES,
  PACK_TRAILER_SIZE,
  PackBuilder,
  packStoredForm,
  unpackEntry,
} from '../src/pack.ts';
import { WireFormatError } from '../src/errors.ts';
import { FUZZ_RUNS, RUNS } from './arbitraries.ts';

function concat(chunks: Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(chunks));
}

function build(contents: Uint8Array[]): Uint8Array {
  const b = new PackBuilder();
  for (const c of contents) b.add(c);
  return concat(b.finish().chunks);
}

const contents = fc.array(
  fc.oneof(fc.uint8Array({ maxLength: 300 }), fc.constant(new Uint8Array(500).fill(7))),
  {
    maxLength: 20,
  },
);

describe('pack format', () => {
  it('round-trips: every distinct content is found by its footer entry', () => {
    fc.assert(
      fc.property(contents, (list) => {
        const pack = build(list);
        const entries = decodePack(pack);
        const distinct = new Set(list.map((c) => Buffer.from(c).toString('hex')));
        expect(entries).toHaveLength(distinct.size);
        for (const e of entries) {
          const raw = unpackEntry(pack.subarray(e.offset, e.offset + e.length), e);
          expect(distinct.has(Buffer.from(raw).toString('hex'))).toBe(true);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('checksTheGivenHashUnlessTheCallerHasChecked', () => {
    const raw = new Uint8Array(Buffer.from('some content'));
    const sha = createHash('sha256').update(raw).digest('hex');
    const other = createHash('sha256').update('other').digest('hex');
    expect(() => new PackBuilder().add(raw, other)).toThrow(WireFormatError);
    expect(new PackBuilder().add(raw, sha)?.sha256).toBe(sha);
    // hashChecked (the proxy's bundle-decoded bytes): the given hash is the entry's, unhashed.
    expect(new PackBuilder().add(raw, other, true, true)?.sha256).toBe(other);
  });

  it('compresses what deflates well and stores the rest', () => {
    const b = new PackBuilder();
    const zeros = b.add(new Uint8Array(4096))!;
    const random = b.add(
      new Uint8Array(Buffer.from(Array.from({ length: 64 }, (_, i) => (i * 97 + 13) % 251))),
    )!;
    expect(zeros.compression).toBe(1);
    expect(zeros.length).toBeLessThan(100);
    expect(random.compression).toBe(0);
  });

  it('stores a long content whose start does not deflate without deflating the rest (probe)', () => {
    // Random bytes of 16 KiB (the small-files bench's synthetic files): stored as they are.
    const random = new Uint8Array(randomBytes(16 * 1024));
    expect(packStoredForm(random)).toEqual({ bytes: random, compression: 0 });
    // Text of the same length deflates, probe or not.
    const text = new Uint8Array(Buffer.from('export const x = 1;\n'.repeat(820)));
    const t = packStoredForm(text);
    expect(t.compression).toBe(1);
    expect(
      unpackEntry(t.bytes, {
        sha256: createHash('sha256').update(text).digest('hex'),
        offset: 0,
        length: t.bytes.byteLength,
        rawLength: text.byteLength,
        compression: 1,
      }),
    ).toEqual(text);
    // Noise over the probe's bytes, zeros after: decided by the probe (stored; a small loss).
    const mixed = new Uint8Array(4 * PACK_PROBE_BYTES);
    mixed.set(randomBytes(PACK_PROBE_BYTES));
    expect(packStoredForm(mixed).compression).toBe(0);
    // Up to twice the probe, the whole is tried: the same start with zeros after deflates.
    expect(packStoredForm(mixed.subarray(0, 2 * PACK_PROBE_BYTES)).compression).toBe(1);
  });

  it('tells noise by the byte entropy of the probe before any deflate (issue #16)', () => {
    for (let k = 0; k < 20; k++) expect(looksLikeNoise(randomBytes(PACK_PROBE_BYTES))).toBe(true);
    expect(looksLikeNoise(randomBytes(1024))).toBe(true);
    expect(looksLikeNoise(new Uint8Array(PACK_PROBE_BYTES))).toBe(false);
    expect(looksLikeNoise(Buffer.from('export const x = 1; // a line of source\n'.repeat(60)))).toBe(false);
    // Base64 (6 bits a byte) is not noise: Huffman coding shrinks it, and it is deflated.
    const b64 = Buffer.from(randomBytes(3 * PACK_PROBE_BYTES).toString('base64'));
    expect(looksLikeNoise(b64.subarray(0, PACK_PROBE_BYTES))).toBe(false);
    expect(packStoredForm(b64).compression).toBe(1);
    // The price: noise repeated within the probe is stored, though deflate would shrink it.
    const block = randomBytes(1024);
    const repeated = Buffer.concat([block, block, block, block, block]);
    expect(looksLikeNoise(repeated.subarray(0, PACK_PROBE_BYTES))).toBe(true);
    expect(packStoredForm(repeated).compression).toBe(0);
    // A short block repeated has the entropy of its few bytes: probed by deflate, deflated.
    const short = Buffer.concat(Array.from({ length: 40 }, () => block.subarray(0, 128)));
    expect(looksLikeNoise(short.subarray(0, PACK_PROBE_BYTES))).toBe(false);
    expect(packStoredForm(short).compression).toBe(1);
  });

  it('rejects any corrupted trailer or footer with a WireFormatError, never anything else', () => {
    fc.assert(
      fc.property(contents, fc.nat(), fc.integer({ min: 1, max: 255 }), (list, at, xor) => {
        const pack = build(list);
        const footerStart = pack.byteLength - PACK_TRAILER_SIZE - decodePack(pack).length * 49;
        const i = footerStart + (at % (pack.byteLength - footerStart));
        const bad = pack.slice();
        bad[i]! ^= xor;
        expect(() => decodePack(bad)).toThrow(WireFormatError);
      }),
      { numRuns: FUZZ_RUNS },
    );
  });

  it('detects corrupted entry bytes by hash', () => {
    const pack = build([new Uint8Array([1, 2, 3])]);
    const [e] = decodePack(pack);
    const stored = pack.slice(e!.offset, e!.offset + e!.length);
    stored[0]! ^= 1;
    expect(() => unpackEntry(stored, e!)).toThrow(/not/);
  });

  it('coalesces close ranges into one read and keeps far ones apart', () => {
    const groups = coalescePackRanges(
      [
        { offset: 100, length: 10 },
        { offset: 0, length: 50 },
        { offset: 1_000_000, length: 5 },
      ],
      64,
    );
    expect(groups.map((g) => [g.offset, g.length, g.entries.length])).toEqual([
      [0, 110, 2],
      [1_000_000, 5, 1],
    ]);
    fc.assert(
      fc.property(
        fc.array(fc.record({ offset: fc.nat(10_000), length: fc.nat(500) })),
        fc.nat(1000),
        (ranges, gap) => {
          const gs = coalescePackRanges(ranges, gap);
          expect(gs.reduce((n, g) => n + g.entries.length, 0)).toBe(ranges.length);
          for (const g of gs)
            for (const r of g.entries) {
              expect(r.offset).toBeGreaterThanOrEqual(g.offset);
              expect(r.offset + r.length).toBeLessThanOrEqual(g.offset + g.length);
            }
        },
      ),
      { numRuns: RUNS },
    );
  });
});
