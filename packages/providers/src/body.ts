/** Helpers for Body values and byte streams, shared by the adapters. */
import { createHash } from 'node:crypto';
import { abortError, InvalidArgumentError } from './errors.ts';
import type { Body, WriteOptions } from './provider.ts';

/** A Body that can be sent again after a failed attempt. */
export function isReplayable(body: Body): boolean {
  return body instanceof Uint8Array || typeof body === 'function';
}

/** Open a Body as a stream of chunks (each call opens it afresh for replayable bodies). */
export function openBody(body: Body): AsyncIterable<Uint8Array> {
  if (body instanceof Uint8Array) return oneChunk(body);
  if (typeof body === 'function') return body();
  return body;
}

async function* oneChunk(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  if (bytes.byteLength > 0) yield bytes;
}

/** Read a whole stream into one buffer. */
export async function collect(stream: AsyncIterable<Uint8Array>, signal?: AbortSignal): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) {
    if (signal?.aborted) throw abortError(signal);
    chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
  }
  return Buffer.concat(chunks);
}

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * A write's received bytes against what the caller declared (WriteOptions.size, .sha256):
 * InvalidArgumentError naming adapter `name` and path `p` when either differs.
 */
export function checkBody(
  name: string,
  p: string,
  options: WriteOptions,
  size: number,
  shaHex: string,
): void {
  if (options.size !== undefined && options.size !== size) {
    throw new InvalidArgumentError(`${name}: expected ${options.size} bytes for ${p}, received ${size}`);
  }
  if (options.sha256 !== undefined && options.sha256.toLowerCase() !== shaHex) {
    throw new InvalidArgumentError(`${name}: SHA-256 of the bytes received for ${p} does not match`);
  }
}

/** Throw the abort reason if the signal fired. */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortError(signal);
}

/**
 * A read's range, checked: `offset` (default 0) and `length` (default: to the end) whole
 * numbers ≥ 0, else InvalidArgumentError (the contract's error, not a RangeError).
 */
export function readRange(options: { offset?: number; length?: number }): {
  offset: number;
  length: number | undefined;
} {
  const offset = options.offset ?? 0;
  if (!Number.isSafeInteger(offset) || offset < 0)
    throw new InvalidArgumentError(`bad read offset ${offset}`);
  const length = options.length;
  if (length !== undefined && (!Number.isSafeInteger(length) || length < 0)) {
    throw new InvalidArgumentError(`bad read length ${length}`);
  }
  return { offset, length };
}

/** Slice [offset, offset+length) out of a buffer, clamped to its bounds (readRange's checks). */
export function clampRange(size: number, offset0 = 0, length0?: number): { start: number; end: number } {
  const { offset, length } = readRange({ offset: offset0, length: length0 });
  const start = Math.min(offset, size);
  const end = length === undefined ? size : Math.min(size, start + length);
  return { start, end };
}

/**
 * Re-chunk a stream into pieces of exactly `size` bytes (the last may be shorter),
 * holding at most one piece in memory. Used for multipart and chunked uploads and for
 * cutting fragment reads into shards. Every piece is the consumer's own (the producer may
 * reuse its buffers once we return control): each byte is copied once, straight into the
 * piece it belongs to — not into a held copy first and then concatenated (issue #17: the
 * second copy and its garbage were a tenth of the redundant tier's CPU).
 */
export async function* rechunk(stream: AsyncIterable<Uint8Array>, size: number): AsyncIterable<Buffer> {
  if (!Number.isSafeInteger(size) || size < 1) throw new InvalidArgumentError(`bad chunk size ${size}`);
  let piece: Buffer | undefined;
  let held = 0;
  for await (const chunk of stream) {
    for (let at = 0; at < chunk.byteLength;) {
      piece ??= Buffer.allocUnsafe(size);
      const take = Math.min(size - held, chunk.byteLength - at);
      piece.set(chunk.subarray(at, at + take), held);
      held += take;
      at += take;
      if (held === size) {
        const full = piece;
        piece = undefined;
        held = 0;
        yield full;
      }
    }
  }
  // The short last piece: its own buffer unless it fills most of the one it is in.
  if (piece && held > 0)
    yield held * 2 >= size ? piece.subarray(0, held) : Buffer.from(piece.subarray(0, held));
}
