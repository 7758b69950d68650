import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WireFormatError } from '../src/errors.ts';
import {
  BLOCK_MAGIC,
  decodeTransferBlock,
  encodeTransferBlock,
  MAX_BLOCK_PAYLOAD,
  peekTransferBlockHeader,
} from '../src/transfer-block.ts';
import { FUZZ_RUNS, mutate, RUNS } from './arbitraries.ts';

const block = fc.record({
  transferId: fc.stringMatching(/^[0-9a-f]{32}$/),
  seq: fc.integer({ min: 0, max: 0xffffffff }),
  offset: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER - MAX_BLOCK_PAYLOAD }),
  last: fc.boolean(),
  payload: fc.uint8Array({ maxLength: 2000 }),
});

function rejects(bytes: Uint8Array): WireFormatError {
  try {
    decodeTransferBlock(bytes);
  } catch (e) {
    expect(e).toBeInstanceOf(WireFormatError);
    return e as WireFormatError;
  }
  throw new Error('decodeTransferBlock accepted invalid input');
}

describe('transfer block', () => {
  it('roundTrips', () => {
    fc.assert(
      fc.property(block, fc.boolean(), (b, compress) => {
        const bytes = encodeTransferBlock(b, { compress });
        const d = decodeTransferBlock(bytes);
        expect({ ...d, payload: Buffer.from(d.payload) }).toMatchObject({
          ...b,
          payload: Buffer.from(b.payload),
          compressed: compress,
        });
        expect(peekTransferBlockHeader(bytes)).toEqual({ transferId: b.transferId, seq: b.seq });
      }),
      { numRuns: RUNS },
    );
  });

  it('rejectsEveryOneByteMutation', () => {
    fc.assert(
      fc.property(block, fc.boolean(), fc.nat(), fc.nat(), (b, compress, at, xor) => {
        rejects(mutate(encodeTransferBlock(b, { compress }), at, xor));
      }),
      { numRuns: FUZZ_RUNS },
    );
  });

  it('rejectsTruncationAndExtension', () => {
    fc.assert(
      fc.property(block, fc.nat(), fc.uint8Array({ minLength: 1, maxLength: 8 }), (b, cut, extra) => {
        const bytes = encodeTransferBlock(b);
        rejects(bytes.subarray(0, cut % bytes.byteLength));
        rejects(Buffer.concat([bytes, extra]));
      }),
      { numRuns: RUNS },
    );
  });

  it('rejectsRandomBytesCleanly', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.boolean(), (junk, withMagic) => {
        rejects(withMagic ? Buffer.concat([BLOCK_MAGIC, Uint8Array.of(1, 0, 84, 0), junk]) : junk);
      }),
      { numRuns: FUZZ_RUNS },
    );
  });

  it('rejectsUnknownVersionAndOversizePayload', () => {
    const bytes = encodeTransferBlock({
      transferId: 'a'.repeat(32),
      seq: 0,
      offset: 0,
      last: true,
      payload: new Uint8Array(3),
    });
    const v2 = bytes.slice();
    v2[4] = 2;
    expect(rejects(v2).code).toBe('UNSUPPORTED_VERSION');
    expect(() =>
      encodeTransferBlock({
        transferId: 'a'.repeat(32),
        seq: 0,
        offset: 0,
        last: true,
        payload: new Uint8Array(MAX_BLOCK_PAYLOAD + 1),
      }),
    ).toThrow(WireFormatError);
  });
});
