import { DeltaEncoder, SignatureEncoder } from './engine.ts';
import { DEFAULT_STRONG_LENGTH, parseSignature, type Signature } from './format.ts';
import { chunksOf, collect, type ByteSource } from './source.ts';

export interface SignatureOptions {
  /** Bytes per block, an integer in [16, 1 MiB]. */
  readonly blockSize: number;
  /** Bytes of BLAKE2b-256 kept per block, in [4, 32]; default 8. */
  readonly strongLength?: number;
}

/**
 * Streams the signature of `source`: one record per block, emitted as blocks complete.
 * Memory: one block plus a 256 KiB window.
 */
export async function* signature(
  source: ByteSource,
  options: SignatureOptions,
): AsyncGenerator<Uint8Array, void, undefined> {
  const encoder = await SignatureEncoder.create(
    options.blockSize,
    options.strongLength ?? DEFAULT_STRONG_LENGTH,
  );
  yield encoder.header();
  const pending: Uint8Array[] = [];
  const keep = (bytes: Uint8Array): void => {
    pending.push(bytes.slice());
  };
  for await (const chunk of chunksOf(source)) {
    encoder.update(chunk, keep);
    yield* pending.splice(0);
  }
  encoder.finish(keep);
  yield* pending.splice(0);
}

export interface DeltaOptions {
  /** Append a BLAKE2b-256 of the new data that patch() verifies; default true. */
  readonly checksum?: boolean;
}

/** Accepts a parsed signature, or signature bytes in any ByteSource shape. */
export async function loadSignature(input: Signature | ByteSource): Promise<Signature> {
  if (isSignature(input)) return input;
  return parseSignature(await collect(input));
}

function isSignature(input: Signature | ByteSource): input is Signature {
  return typeof input === 'object' && input !== null && 'records' in input && 'blockSize' in input;
}

/**
 * Streams the delta that turns the file described by `sig` into `source`.
 * Memory: the signature index plus a fixed window (about 64 KiB + block size + 256 KiB).
 * Throws RsyncFormatError if the signature is malformed.
 */
export async function* delta(
  sig: Signature | ByteSource,
  source: ByteSource,
  options: DeltaOptions = {},
): AsyncGenerator<Uint8Array, void, undefined> {
  const parsed = await loadSignature(sig);
  const encoder = await DeltaEncoder.create(parsed, options.checksum ?? true);
  yield encoder.header();
  const pending: Uint8Array[] = [];
  const keep = (bytes: Uint8Array): void => {
    pending.push(bytes.slice());
  };
  for await (const chunk of chunksOf(source)) {
    encoder.update(chunk, keep);
    yield* pending.splice(0);
  }
  encoder.finish(keep);
  yield* pending.splice(0);
}
