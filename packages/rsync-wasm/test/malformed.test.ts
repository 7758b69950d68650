import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  collect,
  delta,
  FORMAT_VERSION,
  OldReaderError,
  parseSignature,
  patch,
  RsyncFormatError,
  signature,
  type RsyncFormatErrorCode,
} from '../src/index.ts';
import { equalBytes, pseudoRandom } from './helpers.ts';

const HEADER = 24;

const oldBytes = pseudoRandom(20_000, 21);
const newBytes = (() => {
  const b = pseudoRandom(22_000, 21);
  b.set(pseudoRandom(3000, 5), 8000);
  return b;
})();

async function fixtures(checksum = true): Promise<{ sig: Uint8Array; d: Uint8Array }> {
  const sig = await collect(signature(oldBytes, { blockSize: 256 }));
  const d = await collect(delta(sig, newBytes, { checksum }));
  return { sig, d };
}

async function patchError(old: Uint8Array, d: Uint8Array): Promise<unknown> {
  try {
    const out = await collect(patch(old, d));
    return out;
  } catch (error) {
    return error;
  }
}

async function expectCode(promise: Promise<unknown>, code: RsyncFormatErrorCode): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(RsyncFormatError);
  expect((error as RsyncFormatError).code).toBe(code);
}

function withVarintOp(prefix: Uint8Array, ...bytes: number[]): Uint8Array {
  return Uint8Array.from([...prefix.subarray(0, HEADER), ...bytes]);
}

describe('malformed deltas', () => {
  it('rejects unknown versions, bad magic and bad flags with typed errors', async () => {
    const { d } = await fixtures();
    const v2 = d.slice();
    v2[4] = FORMAT_VERSION + 1;
    await expectCode(collect(patch(oldBytes, v2)), 'UNSUPPORTED_VERSION');
    const magic = d.slice();
    magic[0] = 0;
    await expectCode(collect(patch(oldBytes, magic)), 'BAD_MAGIC');
    const flags = d.slice();
    flags[5] = 0x81;
    await expectCode(collect(patch(oldBytes, flags)), 'BAD_HEADER');
    const algorithm = d.slice();
    algorithm[6] = 7;
    await expectCode(collect(patch(oldBytes, algorithm)), 'UNSUPPORTED_ALGORITHM');
    const blockSize = d.slice();
    blockSize[8] = 1;
    blockSize[9] = 0;
    await expectCode(collect(patch(oldBytes, blockSize)), 'BAD_HEADER');
    await expectCode(collect(patch(oldBytes.subarray(1), d)), 'OLD_LENGTH_MISMATCH');
  });

  it('rejects every truncation', async () => {
    const { d } = await fixtures();
    for (let length = 0; length < d.length; length += length < 64 ? 1 : 97) {
      const result = await patchError(oldBytes, d.subarray(0, length));
      expect(result, `prefix of ${length} bytes`).toBeInstanceOf(RsyncFormatError);
    }
    const cut = await patchError(oldBytes, d.subarray(0, d.length - 1));
    expect((cut as RsyncFormatError).code).toBe('TRUNCATED');
  });

  it('rejects trailing bytes, out-of-range copies, bad varints and unknown opcodes', async () => {
    const { d } = await fixtures(false);
    await expectCode(collect(patch(oldBytes, Uint8Array.from([...d, 0]))), 'TRAILING_DATA');
    const head = d.subarray(0, HEADER);
    // COPY with offset delta +20000 (zigzag 40000) and length 1: past the end.
    await expectCode(
      collect(patch(oldBytes, withVarintOp(head, 0x02, 0xc0, 0xb8, 0x02, 0x01, 0x00, 0x01))),
      'COPY_OUT_OF_RANGE',
    );
    // COPY starting before 0 (offset delta -1).
    await expectCode(
      collect(patch(oldBytes, withVarintOp(head, 0x02, 0x01, 0x01, 0x00, 0x01))),
      'COPY_OUT_OF_RANGE',
    );
    // A 2^63-sized varint.
    const huge = [0x02, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
    await expectCode(collect(patch(oldBytes, withVarintOp(head, ...huge))), 'BAD_VARINT');
    // A literal of 2^49 bytes is over the 2^32 − 1 limit.
    await expectCode(
      collect(
        patch(oldBytes, withVarintOp(head, 0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 1, 2, 3)),
      ),
      'BAD_LENGTH',
    );
    // A literal claiming 2^31 bytes with only 3 present.
    await expectCode(
      collect(patch(oldBytes, withVarintOp(head, 0x01, 0x80, 0x80, 0x80, 0x80, 0x08, 1, 2, 3))),
      'TRUNCATED',
    );
    await expectCode(collect(patch(oldBytes, withVarintOp(head, 0x07))), 'BAD_OPCODE');
    await expectCode(collect(patch(oldBytes, withVarintOp(head, 0x01, 0x00))), 'BAD_LENGTH');
    await expectCode(collect(patch(oldBytes, withVarintOp(head, 0x00, 0x05))), 'NEW_LENGTH_MISMATCH');
  });

  it('detects a corrupted literal through the whole-file checksum', async () => {
    const { d } = await fixtures();
    // The last literal byte is 33 + 1 bytes before the end (checksum, length varint, END).
    for (let at = d.length - 40; at < d.length; at++) {
      const bad = d.slice();
      bad[at] = (bad[at] ?? 0) ^ 0x55;
      const result = await patchError(oldBytes, bad);
      expect(result).toBeInstanceOf(RsyncFormatError);
    }
  });

  it('detects copied blocks that differ from what the encoder hashed (a false match)', async () => {
    const { d } = await fixtures();
    for (const at of [0, 255, 256, 15_000, 19_000]) {
      const other = oldBytes.slice();
      other[at] = (other[at] ?? 0) ^ 1;
      await expectCode(collect(patch(other, d)), 'CHECKSUM_MISMATCH');
    }
  });

  it('reports a short read of the old file as OldReaderError', async () => {
    const { d } = await fixtures();
    const reader = { size: oldBytes.length, read: (o: number, n: number) => oldBytes.subarray(o, o + n - 1) };
    await expect(collect(patch(reader, d))).rejects.toBeInstanceOf(OldReaderError);
  });

  it('fuzz: mutated deltas either fail with a typed error or still rebuild the exact file', async () => {
    const { d } = await fixtures();
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }), {
          minLength: 1,
          maxLength: 4,
        }),
        fc.nat(),
        fc.uint8Array({ maxLength: 20 }),
        async (flips, cut, extra) => {
          const bad = d.slice();
          for (const f of flips) bad[f.at % bad.length] = f.value;
          const variant =
            cut % 3 === 0
              ? bad.subarray(0, cut % bad.length)
              : cut % 3 === 1
                ? bad
                : Uint8Array.from([...bad, ...extra]);
          const result = await patchError(oldBytes, variant);
          if (result instanceof Uint8Array) expect(equalBytes(result, newBytes)).toBe(true);
          else expect(result).toBeInstanceOf(RsyncFormatError);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('fuzz: random bytes after a valid header are rejected, never crash or hang', async () => {
    const { d } = await fixtures(false);
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 200 }), async (tail) => {
        const result = await patchError(oldBytes, Uint8Array.from([...d.subarray(0, HEADER), ...tail]));
        if (!(result instanceof Uint8Array)) expect(result).toBeInstanceOf(RsyncFormatError);
      }),
      { numRuns: 500 },
    );
  });
});

describe('malformed signatures', () => {
  it('rejects unknown versions, algorithms, inconsistent lengths and truncation', async () => {
    const { sig } = await fixtures();
    const mutate = (at: number, value: number): Uint8Array => {
      const s = sig.slice();
      s[at] = value;
      return s;
    };
    expect(() => parseSignature(mutate(4, 2))).toThrow(
      expect.objectContaining({ code: 'UNSUPPORTED_VERSION' }),
    );
    expect(() => parseSignature(mutate(0, 0))).toThrow(expect.objectContaining({ code: 'BAD_MAGIC' }));
    expect(() => parseSignature(mutate(5, 9))).toThrow(
      expect.objectContaining({ code: 'UNSUPPORTED_ALGORITHM' }),
    );
    expect(() => parseSignature(mutate(6, 9))).toThrow(
      expect.objectContaining({ code: 'UNSUPPORTED_ALGORITHM' }),
    );
    expect(() => parseSignature(mutate(7, 40))).toThrow(expect.objectContaining({ code: 'BAD_HEADER' }));
    expect(() => parseSignature(mutate(sig.length - 1, 1))).toThrow(RsyncFormatError);
    expect(() => parseSignature(mutate(sig.length - 8, 0))).toThrow(
      expect.objectContaining({ code: 'BAD_LENGTH' }),
    );
    for (let length = 0; length < sig.length; length += length < 40 ? 1 : 61) {
      expect(() => parseSignature(sig.subarray(0, length))).toThrow(RsyncFormatError);
    }
    await expect(collect(delta(mutate(4, 2), newBytes))).rejects.toBeInstanceOf(RsyncFormatError);
  });

  it('fuzz: mutated signatures are rejected or yield a delta whose patch is exact or rejected', async () => {
    const { sig } = await fixtures();
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }), {
          minLength: 1,
          maxLength: 3,
        }),
        async (flips) => {
          const bad = sig.slice();
          for (const f of flips) bad[f.at % bad.length] = f.value;
          let d: Uint8Array;
          try {
            d = await collect(delta(bad, newBytes));
          } catch (error) {
            expect(error).toBeInstanceOf(RsyncFormatError);
            return;
          }
          const result = await patchError(oldBytes, d);
          if (result instanceof Uint8Array) expect(equalBytes(result, newBytes)).toBe(true);
          else expect(result).toBeInstanceOf(RsyncFormatError);
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe('adversarial signatures', () => {
  it('a signature whose weak checksum matches every window but whose strong hash never does finishes', async () => {
    // Without a budget this is one 64 KiB BLAKE2b per input byte: ~64 GB of hashing.
    const blockSize = 65536;
    const zeros = new Uint8Array(blockSize);
    const sig = await collect(signature(zeros, { blockSize, strongLength: 8 }));
    sig[16 + 4] = (sig[16 + 4] ?? 0) ^ 0xff; // corrupt the strong hash, keep the weak one
    const newBytes = new Uint8Array(1 << 20);
    const d = await collect(delta(sig, newBytes));
    const out = await collect(patch(zeros, d));
    expect(equalBytes(out, newBytes)).toBe(true);
  });
});
