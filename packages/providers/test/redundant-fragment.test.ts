import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeFragmentHeader,
  encodeFragmentHeader,
  FragmentFormatError,
} from '../src/redundant/fragment.ts';

const headerArb = fc
  .record({ k: fc.integer({ min: 1, max: 200 }), m: fc.integer({ min: 0, max: 55 }) })
  .chain(({ k, m }) =>
    fc.record({
      version: fc.constantFrom(1 as const, 2 as const),
      k: fc.constant(k),
      m: fc.constant(m),
      index: fc.integer({ min: 0, max: k + m - 1 }),
      shardBytes: fc.integer({ min: 1, max: 0xffffffff }),
      objectSize: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
      payloadSha256: fc.uint8Array({ minLength: 32, maxLength: 32 }),
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
    // Version 2 by default; 1 still read; others refused.
    expect(decodeFragmentHeader(encodeFragmentHeader(ok)).version).toBe(2);
    expect(decodeFragmentHeader(encodeFragmentHeader({ ...ok, version: 1 })).version).toBe(1);
    expect(() => encodeFragmentHeader({ ...ok, version: 3 as 2 })).toThrow(/unknown version 3/);
    const v3 = encodeFragmentHeader(ok);
    v3[4] = 3;
    expect(() => decodeFragmentHeader(v3)).toThrow(/unknown version 3/);
  });
});
