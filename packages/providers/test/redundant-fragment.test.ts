import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeFragmentHeader,
  encodeFragmentHeader,
  FragmentFormatError,
} from '../src/redundant/fragment.ts';

const headerArb = fc
  .record({
    k: fc.integer({ min: 1, max: 200 }),
    m: fc.integer({ min: 0, max: 55 }),
    version: fc.constantFrom(1 as const, 2 as const, 3 as const),
  })
  .chain(({ k, m, version }) =>
    fc.record({
      version: fc.constant(version),
      k: fc.constant(k),
      m: fc.constant(m),
      index: fc.integer({ min: 0, max: k + m - 1 }),
      shardBytes: fc.integer({ min: 1, max: 0xffffffff }),
      objectSize: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
      // Version 3 carries no payload checksum in its header.
      ...(version === 3 ? {} : { payloadSha256: fc.uint8Array({ minLength: 32, maxLength: 32 }) }),
    }),
  );

describe('fragment header', () => {
  it('round-trips', () => {
    fc.assert(
      fc.property(headerArb, (h) => {
        const bytes = encodeFragmentHeader(h);
        expect(bytes.length).toBe(64);
        expect(decodeFragmentHeader(bytes)).toEqual(h);
      }),
    );
  });

  it('any single flipped bit is detected', () => {
    fc.assert(
      fc.property(headerArb, fc.integer({ min: 0, max: 64 * 8 - 1 }), (h, bit) => {
        const bytes = encodeFragmentHeader(h);
        bytes[bit >> 3]! ^= 1 << (bit & 7);
        expect(() => decodeFragmentHeader(bytes)).toThrow(FragmentFormatError);
      }),
    );
  });

  it('refuses bad input with a clear error', () => {
    const ok = { k: 3, m: 2, index: 0, shardBytes: 1, objectSize: 0, payloadSha256: new Uint8Array(32) };
    expect(() => encodeFragmentHeader({ ...ok, index: 5 })).toThrow(/index 5 outside 0..4/);
    expect(() => encodeFragmentHeader({ ...ok, k: 200, m: 56 })).toThrow(/bad RS/);
    expect(() => decodeFragmentHeader(new Uint8Array(10))).toThrow(/10 bytes, need 64/);
    // Version 3 by default (no checksum in the header); 1 and 2 still read; others refused.
    const { payloadSha256, ...v3ok } = ok;
    expect(decodeFragmentHeader(encodeFragmentHeader(v3ok)).version).toBe(3);
    expect(() => encodeFragmentHeader(ok)).toThrow(/version 3 carries no payload checksum/);
    expect(decodeFragmentHeader(encodeFragmentHeader({ ...ok, version: 1 })).version).toBe(1);
    expect(decodeFragmentHeader(encodeFragmentHeader({ ...ok, version: 2 })).version).toBe(2);
    expect(() => encodeFragmentHeader({ ...v3ok, version: 2 })).toThrow(/sha256 must be 32 bytes/);
    expect(() => encodeFragmentHeader({ ...ok, version: 4 as 2 })).toThrow(/unknown version 4/);
    const v4 = encodeFragmentHeader(v3ok);
    v4[4] = 4;
    expect(() => decodeFragmentHeader(v4)).toThrow(/unknown version 4/);
    // A version 3 header's checksum field must be zero (with a valid header check).
    const v2 = encodeFragmentHeader({ ...ok, version: 2, payloadSha256: new Uint8Array(32).fill(7) });
    v2[4] = 3;
    v2.set(createHash('sha256').update(v2.subarray(0, 60)).digest().subarray(0, 4), 60);
    expect(() => decodeFragmentHeader(v2)).toThrow(/reserved bytes not zero/);
    expect(payloadSha256.length).toBe(32);
  });
});
