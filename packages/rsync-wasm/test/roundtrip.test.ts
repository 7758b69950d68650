import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  collect,
  delta,
  MAX_BLOCK_SIZE,
  MIN_BLOCK_SIZE,
  MIN_STRONG_LENGTH,
  patch,
  RsyncOptionError,
  signature,
  suggestStrongLength,
} from '../src/index.ts';
import { DeltaEncoder, SignatureEncoder } from '../src/engine.ts';
import { parseSignature } from '../src/format.ts';
import { equalBytes, pseudoRandom, rollsum, roundTrip } from './helpers.ts';

const POWERS_OF_TWO: number[] = [];
for (let size = MIN_BLOCK_SIZE; size <= 65536; size *= 2) POWERS_OF_TWO.push(size);

const blockSizeArb = fc.oneof(
  fc.constantFrom(...POWERS_OF_TWO),
  fc.integer({ min: MIN_BLOCK_SIZE, max: 5000 }),
);
const bytesArb = (max: number): fc.Arbitrary<Uint8Array> =>
  fc
    .record({ seed: fc.integer({ min: 1, max: 0x7fffffff }), length: fc.integer({ min: 0, max: max }) })
    .map(({ seed, length }) => pseudoRandom(length, seed));

interface Edit {
  at: number;
  remove: number;
  insert: Uint8Array;
}

function applyEdits(base: Uint8Array, edits: readonly Edit[]): Uint8Array {
  let out = base;
  for (const e of edits) {
    const at = out.length === 0 ? 0 : e.at % (out.length + 1);
    const next = new Uint8Array(out.length - Math.min(e.remove, out.length - at) + e.insert.length);
    next.set(out.subarray(0, at), 0);
    next.set(e.insert, at);
    next.set(out.subarray(Math.min(out.length, at + e.remove)), at + e.insert.length);
    out = next;
  }
  return out;
}

const editArb: fc.Arbitrary<Edit> = fc.record({
  at: fc.nat(),
  remove: fc.integer({ min: 0, max: 300 }),
  insert: fc.uint8Array({ maxLength: 300 }),
});

/** Pairs (old, new) of the shapes the issue lists. */
const pairArb: fc.Arbitrary<[Uint8Array, Uint8Array, string]> = fc.oneof(
  fc
    .tuple(bytesArb(150_000), bytesArb(150_000))
    .map(([a, b]) => [a, b, 'random'] as [Uint8Array, Uint8Array, string]),
  bytesArb(50_000).map((a) => [new Uint8Array(0), a, 'empty old'] as [Uint8Array, Uint8Array, string]),
  bytesArb(50_000).map((a) => [a, new Uint8Array(0), 'empty new'] as [Uint8Array, Uint8Array, string]),
  fc.constant([new Uint8Array(0), new Uint8Array(0), 'both empty'] as [Uint8Array, Uint8Array, string]),
  fc
    .tuple(fc.uint8Array({ maxLength: 3 }), fc.uint8Array({ maxLength: 3 }))
    .map(([a, b]) => [a, b, 'tiny'] as [Uint8Array, Uint8Array, string]),
  fc
    .tuple(
      fc.integer({ min: 0, max: 255 }),
      fc.nat(150_000),
      fc.nat(150_000),
      fc.integer({ min: 0, max: 255 }),
    )
    .map(
      ([x, n, m, y]) =>
        [new Uint8Array(n).fill(x), new Uint8Array(m).fill(x === y ? x : y), 'all equal'] as [
          Uint8Array,
          Uint8Array,
          string,
        ],
    ),
  fc
    .tuple(bytesArb(150_000), fc.uint8Array({ minLength: 1, maxLength: 5000 }))
    .map(([a, p]) => [a, concat(p, a), 'shifted'] as [Uint8Array, Uint8Array, string]),
  fc.tuple(bytesArb(150_000), fc.nat(), fc.nat()).map(([a, s, e]) => {
    const start = s % (a.length + 1);
    const end = start + (e % (a.length - start + 1));
    return [a, a.subarray(start, end), 'truncated'] as [Uint8Array, Uint8Array, string];
  }),
  fc
    .tuple(bytesArb(150_000), bytesArb(20_000))
    .map(([a, s]) => [a, concat(a, s), 'appended'] as [Uint8Array, Uint8Array, string]),
  fc
    .tuple(bytesArb(150_000), fc.array(editArb, { minLength: 1, maxLength: 20 }))
    .map(([a, edits]) => [a, applyEdits(a, edits), 'edited'] as [Uint8Array, Uint8Array, string]),
);

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

describe('patch(old, delta(signature(old), new)) == new', () => {
  it('holds for random, empty, tiny, all-equal, shifted, truncated, appended and edited pairs', async () => {
    await fc.assert(
      fc.asyncProperty(
        pairArb,
        blockSizeArb,
        fc.integer({ min: MIN_STRONG_LENGTH, max: 32 }),
        fc.boolean(),
        fc.array(fc.integer({ min: 1, max: 70_000 }), { minLength: 1, maxLength: 3 }),
        async ([oldBytes, newBytes], blockSize, strongLength, checksum, chunks) => {
          const { out } = await roundTrip(oldBytes, newBytes, { blockSize, strongLength, checksum }, chunks);
          expect(equalBytes(out, newBytes)).toBe(true);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('holds for every power-of-two block size from 16 B to 64 KiB, and the largest', async () => {
    const base = pseudoRandom(400_000, 7);
    const edited = applyEdits(base, [
      { at: 1000, remove: 10, insert: Uint8Array.of(1, 2, 3) },
      { at: 150_000, remove: 0, insert: pseudoRandom(777, 3) },
      { at: 399_000, remove: 5000, insert: new Uint8Array(0) },
    ]);
    for (const blockSize of [...POWERS_OF_TWO, 100_000, MAX_BLOCK_SIZE]) {
      for (const [a, b] of [
        [base, edited],
        [edited, base],
        [base, base],
      ] as const) {
        const { out, delta: d } = await roundTrip(a, b, { blockSize }, [65_536, 1, 4_097]);
        expect(equalBytes(out, b), `block size ${blockSize}`).toBe(true);
        if (a === b && blockSize <= 65536) expect(d.length).toBeLessThan(24 + 64 + 32);
      }
    }
  });

  it('handles weak-checksum collisions: equal rollsum, different bytes, no false copy', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ minLength: 64, maxLength: 64 }),
        fc.integer({ min: 1, max: 60 }),
        fc.integer({ min: 0, max: 61 }),
        async (block, i0, j0) => {
          // +1/-1 at (i, i+1) and -1/+1 at (j, j+1) keeps both rolling sums (mod 2^16).
          const i = i0;
          const j = j0 === i || j0 === i + 1 || j0 + 1 === i ? (i + 3) % 61 : j0;
          const twin = block.slice();
          twin[i] = ((twin[i] ?? 0) + 1) & 0xff;
          twin[i + 1] = ((twin[i + 1] ?? 0) - 1) & 0xff;
          twin[j] = ((twin[j] ?? 0) - 1) & 0xff;
          twin[j + 1] = ((twin[j + 1] ?? 0) + 1) & 0xff;
          fc.pre(!equalBytes(block, twin) && rollsum(block) === rollsum(twin));
          const { out, delta: d } = await roundTrip(block, twin, { blockSize: 64, strongLength: 4 });
          expect(equalBytes(out, twin)).toBe(true);
          // The twin must travel as a literal: a copy would need its strong hash to match.
          expect(d.length).toBeGreaterThan(64);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('streams: many tiny chunks give the same delta as one buffer', async () => {
    const oldBytes = pseudoRandom(30_000, 11);
    const newBytes = applyEdits(oldBytes, [{ at: 5000, remove: 3, insert: Uint8Array.of(9) }]);
    const one = await roundTrip(oldBytes, newBytes, { blockSize: 512 });
    const many = await roundTrip(oldBytes, newBytes, { blockSize: 512 }, [1, 7, 300]);
    expect(equalBytes(one.sig, many.sig)).toBe(true);
    expect(equalBytes(one.delta, many.delta)).toBe(true);
  });

  it('suggests rsync-sized strong hashes: 2 bytes for ordinary files, more for huge ones', () => {
    expect(suggestStrongLength(22_000_000, 2048)).toBe(2);
    expect(suggestStrongLength(0, 2048)).toBe(MIN_STRONG_LENGTH);
    expect(suggestStrongLength(2 ** 52, 512)).toBeGreaterThan(4);
    expect(suggestStrongLength(2 ** 53, 16)).toBeLessThanOrEqual(16);
  });

  it('rejects block sizes and strong lengths out of range with RsyncOptionError', async () => {
    for (const blockSize of [0, 15, MAX_BLOCK_SIZE + 1, 1.5, Number.NaN]) {
      await expect(collect(signature(new Uint8Array(10), { blockSize }))).rejects.toBeInstanceOf(
        RsyncOptionError,
      );
    }
    for (const strongLength of [0, 1, 33]) {
      await expect(
        collect(signature(new Uint8Array(10), { blockSize: 64, strongLength })),
      ).rejects.toBeInstanceOf(RsyncOptionError);
    }
  });

  it('keeps memory bounded while streaming 48 MiB through signature, delta and patch', async () => {
    const blockSize = 4096;
    const total = 48 << 20;
    const piece = pseudoRandom(1 << 20, 5);
    function* source(variant: number): Generator<Uint8Array> {
      for (let i = 0; i < total >> 20; i++) {
        const chunk = piece.slice();
        chunk[(i * 7919) % chunk.length] = (i + variant) & 0xff; // one edit per MiB
        yield chunk;
      }
    }
    const sig = await collect(signature(source(0), { blockSize }));
    // The engines' wasm memory does not grow with the input.
    const signer = await SignatureEncoder.create(blockSize);
    const encoder = await DeltaEncoder.create(parseSignature(sig), true);
    const [signerStart, encoderStart] = [signer.memoryBytes, encoder.memoryBytes];
    for (const chunk of source(1)) {
      signer.update(chunk, () => {});
      encoder.update(chunk, () => {});
    }
    expect(signer.memoryBytes).toBe(signerStart);
    expect(encoder.memoryBytes).toBe(encoderStart);
    expect(encoderStart).toBeLessThan(sig.length * 3 + (2 << 20));
    let deltaBytes = 0;
    const deltaParts: Uint8Array[] = [];
    for await (const part of delta(sig, source(1))) {
      deltaBytes += part.length;
      deltaParts.push(part);
    }
    expect(deltaBytes).toBeLessThan(total / 100);
    let produced = 0;
    let largest = 0;
    const oldReader = {
      size: total,
      read(offset: number, length: number): Uint8Array {
        expect(length).toBeLessThanOrEqual(1 << 20);
        const out = new Uint8Array(length);
        for (let k = 0; k < length;) {
          const at = offset + k;
          const i = Math.floor(at / (1 << 20));
          const within = at % (1 << 20);
          const n = Math.min(length - k, (1 << 20) - within);
          const chunk = piece.slice(within, within + n);
          const edit = (i * 7919) % piece.length;
          if (edit >= within && edit < within + n) chunk[edit - within] = i & 0xff;
          out.set(chunk, k);
          k += n;
        }
        return out;
      },
    };
    for await (const part of patch(oldReader, deltaParts)) {
      produced += part.length;
      largest = Math.max(largest, part.length);
    }
    expect(produced).toBe(total);
    expect(largest).toBeLessThanOrEqual(1 << 20);
  });
});

describe('weak checksum', () => {
  it('signature records carry the documented rollsum32 of each block', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.integer({ min: MIN_BLOCK_SIZE, max: 300 }),
          fc.constantFrom(4096, 65_537, MAX_BLOCK_SIZE),
        ),
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 1, max: 1000 }),
        async (blockSize, blocks, seed) => {
          const bytes = pseudoRandom(blockSize * blocks + (seed % blockSize), seed);
          const sig = parseSignature(await collect(signature(bytes, { blockSize, strongLength: 4 })));
          const view = new DataView(sig.records.buffer, sig.records.byteOffset, sig.records.byteLength);
          for (let i = 0; i < sig.blockCount; i++) {
            const block = bytes.subarray(i * blockSize, (i + 1) * blockSize);
            expect(view.getUint32(i * 8, true)).toBe(rollsum(block));
          }
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe('rolling', () => {
  it('finds every block again after an unaligned shift (rolled and fresh sums agree)', async () => {
    for (const blockSize of [16, 100, 512, 4096]) {
      for (const shift of [1, 7, 15, 33]) {
        const oldBytes = pseudoRandom(200_000, blockSize + shift);
        const newBytes = new Uint8Array(oldBytes.length + shift);
        newBytes.set(pseudoRandom(shift, 99), 0);
        newBytes.set(oldBytes, shift);
        const { delta: d } = await roundTrip(oldBytes, newBytes, { blockSize });
        // header + one literal + one copy + END + checksum
        expect(d.length, `block ${blockSize}, shift ${shift}`).toBeLessThan(24 + shift + 40 + 40);
      }
    }
  });
});
