// Node-only helpers (file access); the rest of the package also runs in browsers.
import { createHash } from 'node:crypto';
import { open, rm, type FileHandle } from 'node:fs/promises';
import { OldReaderError } from './errors.ts';
import { patch, type OldFileReader, type PatchOptions } from './patch.ts';
import type { ByteSource } from './source.ts';

export interface OldFile extends OldFileReader {
  close(): Promise<void>;
}

/** Bytes read ahead per positioned read: copies of neighbouring blocks then cost no syscall. */
const WINDOW = 1 << 17;

/**
 * Opens a file for patch(): positioned reads of max(length, 128 KiB), never the whole
 * file. One read-ahead window is kept, since copies mostly walk the old file forwards.
 */
export async function openOldFile(path: string): Promise<OldFile> {
  const handle: FileHandle = await open(path, 'r');
  const { size } = await handle.stat();
  let window = new Uint8Array(0);
  let windowStart = 0;

  async function fill(offset: number, length: number): Promise<void> {
    const next = new Uint8Array(Math.max(0, Math.min(Math.max(length, WINDOW), size - offset)));
    let done = 0;
    while (done < next.length) {
      const { bytesRead } = await handle.read(next, done, next.length - done, offset + done);
      if (bytesRead === 0) break;
      done += bytesRead;
    }
    window = next.subarray(0, done);
    windowStart = offset;
  }

  function fromWindow(offset: number, length: number): Uint8Array {
    const start = offset - windowStart;
    const out = window.subarray(start, start + length);
    if (out.length !== length) {
      throw new OldReaderError(`${path} ended at ${windowStart + window.length}, expected ${length} bytes`);
    }
    return out;
  }

  return {
    size,
    // Synchronous when the range is already buffered: patch() then skips an await per copy.
    read(offset: number, length: number): Uint8Array | Promise<Uint8Array> {
      if (offset >= windowStart && offset + length <= windowStart + window.length) {
        return fromWindow(offset, length);
      }
      return fill(offset, length).then(() => fromWindow(offset, length));
    },
    close: () => handle.close(),
  };
}

export interface PatchToFileOptions extends PatchOptions {
  /** fsync the file before closing it (it is about to be moved into place). */
  readonly sync?: boolean;
}

/**
 * patch() into a new file at `path` (mode 0600), hashing the output as it is written: the
 * result's size and SHA-256 without reading the file back. Output stops at
 * `maxOutputBytes` (OUTPUT_TOO_LARGE). When this returns the file is closed (fsynced first
 * with `sync`); when it throws, the file is closed and removed.
 */
export async function patchToFile(
  old: OldFileReader | Uint8Array,
  delta: ByteSource,
  path: string,
  options: PatchToFileOptions = {},
): Promise<{ size: number; sha256: string }> {
  const handle = await open(path, 'w', 0o600);
  const hash = createHash('sha256');
  let size = 0;
  try {
    for await (const chunk of patch(old, delta, options)) {
      hash.update(chunk);
      size += chunk.byteLength;
      for (let done = 0; done < chunk.byteLength;) {
        const { bytesWritten } = await handle.write(chunk, done, chunk.byteLength - done);
        done += bytesWritten;
      }
    }
    if (options.sync) await handle.sync();
  } catch (e) {
    await handle.close().catch(() => undefined);
    await rm(path, { force: true });
    throw e;
  }
  await handle.close();
  return { size, sha256: hash.digest('hex') };
}
