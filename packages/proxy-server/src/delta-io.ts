/**
 * Delta uploads and downloads without holding a file-sized buffer (issue #14): an uploaded
 * delta container's header is checked before its body is read (the body is then patched as
 * it arrives, by @weft/rsync-wasm/node's patchToFile), and a delta download is written to a
 * temporary file and streamed from there. Memory per request stays at a few MiB whatever
 * the file size; the patched output never exceeds the size the container declares.
 */
import { createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { Readable, Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { crc32, createDeflateRaw, deflateRawSync } from 'node:zlib';
import { delta as rsyncDelta, type Signature } from '@weft/rsync-wasm';
import {
  DELTA_CONTAINER_HEADER_SIZE,
  DELTA_CONTAINER_TRAILER_SIZE,
  encodeDeltaContainerHeader,
  openDeltaContainerStream,
  type DeltaContainerHeader,
  type EntryInfo,
} from '@weft/wire';
import { ApiError } from './errors.ts';
import type { HybridStore } from './store/hybrid.ts';
import { checkDeclaredSize } from './transfers.ts';

export interface DeltaLimits {
  readonly maxDeltaBytes: number;
  readonly maxFileBytes: number;
}

/**
 * Reads a container's header from the request body and checks the declared sizes before
 * any payload is read: FILE_TOO_LARGE for a target above maxFileBytes, PAYLOAD_TOO_LARGE
 * for a delta above maxDeltaBytes.
 */
export async function openDeltaUpload(
  body: AsyncIterable<Uint8Array>,
  contentLength: number | undefined,
  limits: DeltaLimits,
): Promise<{ header: DeltaContainerHeader; delta: AsyncGenerator<Uint8Array, void, undefined> }> {
  const overhead = DELTA_CONTAINER_HEADER_SIZE + DELTA_CONTAINER_TRAILER_SIZE;
  if (contentLength !== undefined && contentLength > limits.maxDeltaBytes + overhead)
    throw new ApiError('PAYLOAD_TOO_LARGE', `a delta container above ${limits.maxDeltaBytes} bytes`);
  const opened = await openDeltaContainerStream(body, { maxRawBytes: limits.maxDeltaBytes });
  checkDeclaredSize(opened.header.targetSize, limits.maxFileBytes);
  if (opened.header.storedLength > limits.maxDeltaBytes)
    throw new ApiError('PAYLOAD_TOO_LARGE', `a delta container above ${limits.maxDeltaBytes} bytes`);
  return opened;
}

/**
 * Pipes `source` into a new file at `path` through a handle opened (and closed) here, so
 * that when this returns or throws the file is closed: a caller's removal after a failure
 * cannot race a stream still opening it (which would leave an empty file behind).
 */
async function pipeToFile(path: string, run: (out: Writable) => Promise<void>): Promise<void> {
  const fh = await fsp.open(path, 'w', 0o600);
  try {
    // The stream closes the handle when it finishes or is destroyed, and pipeline()
    // settles only after that 'close'.
    await run(fh.createWriteStream());
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** Counts bytes and their CRC-32 as they pass; optionally gives up past `limit` bytes. */
class Tally extends Transform {
  bytes = 0;
  crc = 0;
  constructor(private readonly limit = Number.POSITIVE_INFINITY) {
    super();
  }
  override _transform(
    chunk: Buffer,
    _enc: BufferEncoding,
    done: (e?: Error | null, d?: Buffer) => void,
  ): void {
    this.bytes += chunk.byteLength;
    if (this.bytes > this.limit) return done(new TooBig());
    this.crc = crc32(chunk, this.crc);
    done(null, chunk);
  }
}
class TooBig extends Error {}

const SAMPLE_BYTES = 1 << 20;

/**
 * Whether deflating the file can save the 10 % that makes it worth it, judged on its first
 * MiB: deflate runs at tens of MB/s, and a delta of new content (literal bytes of a media
 * file, say) rarely compresses, so a sample spares the server a full pass.
 */
async function worthDeflating(file: string, size: number): Promise<boolean> {
  if (size <= SAMPLE_BYTES) return true;
  const fh = await fsp.open(file, 'r');
  try {
    const sample = Buffer.alloc(SAMPLE_BYTES);
    const { bytesRead } = await fh.read(sample, 0, SAMPLE_BYTES, 0);
    return deflateRawSync(sample.subarray(0, bytesRead), { level: 6 }).byteLength <= bytesRead * 0.9;
  } finally {
    await fh.close();
  }
}

/**
 * A delta container for a download: the delta of `entry` against the client's signature,
 * deflated when that saves at least 10 %. The delta goes to a temporary file, never to
 * memory; the returned body streams header, payload and CRC and removes the temporary
 * files when it closes.
 */
export async function deltaDownload(
  store: HybridStore,
  userId: string,
  entry: EntryInfo & { sha256: string },
  sig: Signature,
  baseSha256: string,
): Promise<{ length: number; body: Readable }> {
  const raw = store.tempFile();
  const packed = store.tempFile();
  const cleanup = async (): Promise<void> => {
    await fsp.rm(raw, { force: true });
    await fsp.rm(packed, { force: true });
  };
  try {
    const rawTally = new Tally();
    const { stream, release } = await store.openRead(userId, entry, undefined);
    try {
      await pipeToFile(raw, (out) => pipeline(Readable.from(rsyncDelta(sig, stream)), rawTally, out));
    } finally {
      release();
    }
    let chosen = { file: raw, stored: rawTally.bytes, crc: rawTally.crc, compressed: false };
    const packedTally = new Tally(Math.floor(rawTally.bytes * 0.9));
    try {
      if (!(await worthDeflating(raw, rawTally.bytes))) throw new TooBig();
      await pipeToFile(packed, (out) =>
        pipeline(createReadStream(raw), createDeflateRaw({ level: 6 }), packedTally, out),
      );
      chosen = { file: packed, stored: packedTally.bytes, crc: packedTally.crc, compressed: true };
    } catch (e) {
      if (!(e instanceof TooBig)) throw e;
    }
    const header = encodeDeltaContainerHeader({
      baseSha256,
      targetSha256: entry.sha256,
      targetSize: entry.size,
      rawLength: rawTally.bytes,
      storedLength: chosen.stored,
      compressed: chosen.compressed,
    });
    const trailer = Buffer.alloc(DELTA_CONTAINER_TRAILER_SIZE);
    trailer.writeUInt32LE(chosen.crc >>> 0, 0);
    const file = chosen.file;
    const body = Readable.from(
      (async function* () {
        try {
          yield Buffer.from(header);
          for await (const chunk of createReadStream(file)) yield chunk as Buffer;
          yield trailer;
        } finally {
          await cleanup();
        }
      })(),
    );
    // A client that goes away before the end: the generator's finally runs on destroy.
    body.once('close', () => void cleanup());
    return { length: header.byteLength + chosen.stored + trailer.byteLength, body };
  } catch (e) {
    await cleanup();
    throw e;
  }
}
