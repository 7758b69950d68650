import { DeltaEncoder, SignatureEncoder } from './engine.ts';
import { DEFAULT_STRONG_LENGTH, parseSignature } from './format.ts';
import { chunksOf, type ByteSource } from './source.ts';

export interface EliminationEstimate {
  readonly blockSize: number;
  /** Bytes of the old file's signature at this block size. */
  readonly signatureBytes: number;
  /** Bytes of the delta (without whole-file checksum). */
  readonly deltaBytes: number;
  /** HyCloud's γ = 1 − Δ / S_f, clamped to [0, 1] (0 for an empty new file). */
  readonly eliminationRatio: number;
}

export interface EstimateOptions {
  /** Candidate block sizes, e.g. 512 … 65536. */
  readonly blockSizes: readonly number[];
  readonly strongLength?: number;
}

/**
 * Measures the elimination ratio of each candidate block size with one pass over each
 * file: every candidate's signature is built while `oldSource` streams past, then every
 * candidate's delta is sized (not stored) while `newSource` streams past.
 */
export async function estimateEliminationRatios(
  oldSource: ByteSource,
  newSource: ByteSource,
  options: EstimateOptions,
): Promise<EliminationEstimate[]> {
  const strongLength = options.strongLength ?? DEFAULT_STRONG_LENGTH;
  const sizes = [...options.blockSizes];
  const signers = await Promise.all(sizes.map((size) => SignatureEncoder.create(size, strongLength)));
  const parts = signers.map((s) => [s.header()]);
  for await (const chunk of chunksOf(oldSource)) {
    signers.forEach((s, i) => s.update(chunk, (bytes) => parts[i]?.push(bytes.slice())));
  }
  signers.forEach((s, i) => s.finish((bytes) => parts[i]?.push(bytes.slice())));
  const signatures = parts.map((list) => {
    const total = list.reduce((n, p) => n + p.length, 0);
    const joined = new Uint8Array(total);
    let offset = 0;
    for (const p of list) {
      joined.set(p, offset);
      offset += p.length;
    }
    return joined;
  });
  parts.length = 0;

  const encoders = await Promise.all(
    signatures.map((bytes) => DeltaEncoder.create(parseSignature(bytes), false)),
  );
  const deltaBytes = encoders.map((e) => e.header().length);
  let newLength = 0;
  for await (const chunk of chunksOf(newSource)) {
    newLength += chunk.length;
    encoders.forEach((e, i) =>
      e.update(chunk, (bytes) => (deltaBytes[i] = (deltaBytes[i] ?? 0) + bytes.length)),
    );
  }
  encoders.forEach((e, i) => e.finish((bytes) => (deltaBytes[i] = (deltaBytes[i] ?? 0) + bytes.length)));
  return sizes.map((blockSize, i) => {
    const delta = deltaBytes[i] ?? 0;
    const ratio = newLength === 0 ? 0 : Math.min(1, Math.max(0, 1 - delta / newLength));
    return {
      blockSize,
      signatureBytes: signatures[i]?.length ?? 0,
      deltaBytes: delta,
      eliminationRatio: ratio,
    };
  });
}
