import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { delta, signature, patch, collect } from '@weft/rsync-wasm';
import { sha256Hex } from '../src/bundle.ts';
import { DELTA_CONTAINER_MAGIC, decodeDeltaContainer, encodeDeltaContainer } from '../src/delta-container.ts';
import { WireFormatError } from '../src/errors.ts';
import { FUZZ_RUNS, mutate, RUNS } from './arbitraries.ts';

const container = fc.record({
  baseSha256: fc.stringMatching(/^[0-9a-f]{64}$/),
  targetSha256: fc.stringMatching(/^[0-9a-f]{64}$/),
  targetSize: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
  delta: fc
    .uint8Array({ maxLength: 1000 })
    .map((b) => new Uint8Array(Buffer.concat([Buffer.from('WFTD'), b]))),
});

function rejects(bytes: Uint8Array): WireFormatError {
  try {
    decodeDeltaContainer(bytes);
  } catch (e) {
    expect(e).toBeInstanceOf(WireFormatError);
    return e as WireFormatError;
  }
  throw new Error('decodeDeltaContainer accepted invalid input');
}

describe('delta container', () => {
  it('roundTrips', () => {
    fc.assert(
      fc.property(container, fc.boolean(), (c, compress) => {
        const d = decodeDeltaContainer(encodeDeltaContainer(c, { compress }));
        expect({ ...d, delta: Buffer.from(d.delta) }).toMatchObject({
          ...c,
          delta: Buffer.from(c.delta),
          compressed: compress,
        });
      }),
      { numRuns: RUNS },
    );
  });

  it('rejectsEveryOneByteMutation', () => {
    fc.assert(
      fc.property(container, fc.boolean(), fc.nat(), fc.nat(), (c, compress, at, xor) => {
        rejects(mutate(encodeDeltaContainer(c, { compress }), at, xor));
      }),
      { numRuns: FUZZ_RUNS },
    );
  });

  it('rejectsTruncationAndRandomBytes', () => {
    fc.assert(
      fc.property(container, fc.nat(), fc.uint8Array({ maxLength: 200 }), (c, cut, junk) => {
        const bytes = encodeDeltaContainer(c);
        rejects(bytes.subarray(0, cut % bytes.byteLength));
        rejects(Buffer.concat([DELTA_CONTAINER_MAGIC, Uint8Array.of(1, 0, 0, 0), junk]));
        rejects(junk);
      }),
      { numRuns: FUZZ_RUNS },
    );
  });

  it('carriesARealRsyncDelta', async () => {
    const oldFile = new Uint8Array(50_000).map((_, i) => (i * 7) % 251);
    const newFile = Buffer.concat([
      oldFile.subarray(0, 20_000),
      Buffer.from('inserted'),
      oldFile.subarray(20_000),
    ]);
    const sig = await collect(signature(oldFile, { blockSize: 1024 }));
    const d = await collect(delta(sig, newFile));
    const bytes = encodeDeltaContainer(
      {
        baseSha256: sha256Hex(oldFile),
        targetSha256: sha256Hex(newFile),
        targetSize: newFile.byteLength,
        delta: d,
      },
      { compress: true },
    );
    const got = decodeDeltaContainer(bytes);
    const rebuilt = await collect(patch(oldFile, got.delta));
    expect(sha256Hex(rebuilt)).toBe(got.targetSha256);
  });
});
