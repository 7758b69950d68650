/**
 * The streaming reader of delta containers (openDeltaContainerStream) accepts exactly what
 * the whole-buffer decoder accepts, in any chunking, and rejects every mutation: the proxy
 * applies uploaded deltas as they arrive instead of buffering them.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeDeltaContainer,
  encodeDeltaContainer,
  openDeltaContainerStream,
} from '../src/delta-container.ts';
import { WireFormatError } from '../src/errors.ts';
import { FUZZ_RUNS, mutate, RUNS } from './arbitraries.ts';

const container = fc.record({
  baseSha256: fc.stringMatching(/^[0-9a-f]{64}$/),
  targetSha256: fc.stringMatching(/^[0-9a-f]{64}$/),
  targetSize: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
  delta: fc
    .uint8Array({ maxLength: 3000 })
    .map((b) => new Uint8Array(Buffer.concat([Buffer.from('WFTD'), b]))),
});

async function* chunks(bytes: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < bytes.byteLength; at += size) yield bytes.subarray(at, at + size);
}

async function readAll(bytes: Uint8Array, size: number): Promise<{ header: unknown; delta: Buffer }> {
  const s = await openDeltaContainerStream(chunks(bytes, size));
  const parts: Uint8Array[] = [];
  for await (const p of s.delta) parts.push(p);
  return { header: s.header, delta: Buffer.concat(parts) };
}

async function streamRejects(bytes: Uint8Array, size: number): Promise<void> {
  const error = await readAll(bytes, size).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WireFormatError);
}

describe('delta container stream', () => {
  it('readsWhatTheBufferDecoderReadsInAnyChunking', async () => {
    await fc.assert(
      fc.asyncProperty(
        container,
        fc.boolean(),
        fc.integer({ min: 1, max: 400 }),
        async (c, compress, size) => {
          const bytes = encodeDeltaContainer(c, { compress });
          const whole = decodeDeltaContainer(bytes);
          const got = await readAll(bytes, size);
          expect(got.delta.equals(Buffer.from(whole.delta))).toBe(true);
          expect(got.header).toMatchObject({
            baseSha256: c.baseSha256,
            targetSha256: c.targetSha256,
            targetSize: c.targetSize,
            compressed: compress,
            storedLength: whole.storedLength,
            rawLength: c.delta.byteLength,
          });
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('rejectsEveryOneByteMutationTruncationAndTrailingBytes', async () => {
    await fc.assert(
      fc.asyncProperty(
        container,
        fc.boolean(),
        fc.nat(),
        fc.nat(),
        fc.integer({ min: 1, max: 400 }),
        async (c, compress, at, xor, size) => {
          const bytes = encodeDeltaContainer(c, { compress });
          await streamRejects(mutate(bytes, at, xor), size);
          await streamRejects(bytes.subarray(0, at % bytes.byteLength), size);
          await streamRejects(Buffer.concat([bytes, Uint8Array.of(xor & 0xff)]), size);
        },
      ),
      { numRuns: FUZZ_RUNS },
    );
  });

  it('refusesARawLengthAboveTheLimitFromTheHeaderAlone', async () => {
    const bytes = encodeDeltaContainer({
      baseSha256: '0'.repeat(64),
      targetSha256: '1'.repeat(64),
      targetSize: 5,
      delta: new Uint8Array(Buffer.from('WFTD' + 'x'.repeat(1000))),
    });
    let pulled = 0;
    async function* counted(): AsyncGenerator<Uint8Array> {
      for await (const c of chunks(bytes, 100)) {
        pulled += c.byteLength;
        yield c;
      }
    }
    const error = await openDeltaContainerStream(counted(), { maxRawBytes: 100 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as WireFormatError).code).toBe('TOO_LARGE');
    expect(pulled).toBe(100);
  });
});
