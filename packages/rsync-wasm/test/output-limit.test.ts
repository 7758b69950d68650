/**
 * patch() with `maxOutputBytes`: a delta is tiny next to what it can produce (a COPY
 * instruction of a few bytes repeats any range of the old file), so a reader that knows the
 * size the output must have stops at the first byte past it instead of writing on.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { collect, patch, RsyncFormatError } from '../src/index.ts';
import { pseudoRandom } from './helpers.ts';

const FULL = process.env.WEFT_FULL === '1';

function varint(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out.push(b);
  } while (n > 0);
  return out;
}

function header(oldLength: number, blockSize = 1024): number[] {
  const h = new Uint8Array(24);
  h.set([0x57, 0x46, 0x54, 0x44, 1, 0, 0, 0]);
  new DataView(h.buffer).setUint32(8, blockSize, true);
  new DataView(h.buffer).setBigUint64(16, BigInt(oldLength), true);
  return [...h];
}

/**
 * A delta of exactly `deltaBytes` bytes (no checksum) that copies the whole old file again
 * and again: each COPY jumps back to offset 0 (zigzag(−L) = 2L − 1) for L bytes.
 */
export function amplifyingDelta(
  oldLength: number,
  deltaBytes: number,
): { delta: Uint8Array; output: number } {
  const out = header(oldLength);
  const first = [0x02, ...varint(0), ...varint(oldLength)];
  const again = [0x02, ...varint(2 * oldLength - 1), ...varint(oldLength)];
  let produced = 0;
  out.push(...first);
  produced += oldLength;
  const end = (n: number): number[] => [0x00, ...varint(n)];
  while (out.length + again.length + end(produced + oldLength).length + 3 <= deltaBytes) {
    out.push(...again);
    produced += oldLength;
  }
  // Pad to the exact size with one literal (opcode, length, bytes).
  const pad = deltaBytes - out.length - end(produced + 10).length - 2;
  if (pad > 0) {
    out.push(0x01, ...varint(pad), ...new Array<number>(pad).fill(0x41));
    produced += pad;
  }
  out.push(...end(produced));
  return { delta: Uint8Array.from(out), output: produced };
}

async function drain(
  old: Uint8Array,
  d: Uint8Array,
  maxOutputBytes: number,
): Promise<{ bytes: number; error?: unknown }> {
  let bytes = 0;
  try {
    for await (const chunk of patch(old, d, { maxOutputBytes })) bytes += chunk.byteLength;
    return { bytes };
  } catch (error) {
    return { bytes, error };
  }
}

describe('patch output limit', () => {
  it('stops a 490-byte delta that repeats the old file at the declared size', async () => {
    const old = pseudoRandom(2_000_000, 7);
    const { delta, output } = amplifyingDelta(old.length, 490);
    expect(delta.byteLength).toBe(490);
    expect(output).toBeGreaterThan(100_000_000);
    const got = await drain(old, delta, 1000);
    expect(got.error).toBeInstanceOf(RsyncFormatError);
    expect((got.error as RsyncFormatError).code).toBe('OUTPUT_TOO_LARGE');
    expect(got.bytes).toBeLessThanOrEqual(1000);
  });

  it('accepts a delta whose output is exactly the limit', async () => {
    const old = pseudoRandom(5000, 8);
    const { delta, output } = amplifyingDelta(old.length, 60);
    const out = await collect(patch(old, delta, { maxOutputBytes: output }));
    expect(out.byteLength).toBe(output);
    expect((await drain(old, delta, output - 1)).error).toBeInstanceOf(RsyncFormatError);
  });

  it('never yields more than the limit, whatever the instructions (property)', async () => {
    const old = pseudoRandom(4096, 9);
    const instruction = fc.oneof(
      fc.record({
        op: fc.constant('copy' as const),
        offset: fc.nat(4095),
        length: fc.integer({ min: 1, max: 4096 }),
      }),
      fc.record({ op: fc.constant('literal' as const), length: fc.integer({ min: 1, max: 3000 }) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(instruction, { maxLength: 40 }), fc.nat(60_000), async (ops, limit) => {
        const bytes = header(old.length);
        let cursor = 0;
        let produced = 0;
        for (const o of ops) {
          if (o.op === 'copy') {
            const length = Math.min(o.length, old.length - o.offset);
            const diff = o.offset - cursor;
            bytes.push(0x02, ...varint(diff >= 0 ? 2 * diff : -2 * diff - 1), ...varint(length));
            cursor = o.offset + length;
            produced += length;
          } else {
            bytes.push(0x01, ...varint(o.length), ...new Array<number>(o.length).fill(7));
            produced += o.length;
          }
        }
        bytes.push(0x00, ...varint(produced));
        const got = await drain(old, Uint8Array.from(bytes), limit);
        expect(got.bytes).toBeLessThanOrEqual(limit);
        if (produced <= limit) expect(got).toEqual({ bytes: produced });
        else expect((got.error as RsyncFormatError).code).toBe('OUTPUT_TOO_LARGE');
      }),
      { numRuns: FULL ? 5000 : 200 },
    );
  });
});
