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

/** Slice [offset, offset+length) out of a buffer, clamped to its bounds. */
export function clampRange(size: number, offset = 0, length?: number): { start: number; end: number } {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`bad read offset ${offset}`);
  if (length !== undefined && (!Number.isSafeInteger(length) || length < 0)) {
    throw new RangeError(`bad read length ${length}`);
  }
  const start = Math.min(offset, size);
  const end = length === undefined ? size : Math.min(size, start + length);
  return { start, end };
}

/**
 * Re-chunk a stream into pieces of exactly `size` bytes (the last may be shorter),
 * holding at most one piece in memory. Used for multipart and chunked uploads.
 */
export async function* rechunk(stream: AsyncIterable<Uint8Array>, size: number): AsyncIterable<Buffer> {
  let parts: Buffer[] = [];
  let held = 0;
  for await (const chunk of stream) {
    let buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    while (held + buf.byteLength >= size) {
      const take = size - held;
      parts.push(buf.subarray(0, take));
      yield Buffer.concat(parts, size);
      parts = [];
      held = 0;
      buf = buf.subarray(take);
    }
    if (buf.byteLength > 0) {
      // Copy: the producer may reuse its buffer after we return control.
      parts.push(Buffer.from(buf));
      held += buf.byteLength;
    }
  }
  if (held > 0) yield Buffer.concat(parts, held);
}
