// Node-only helpers (file access); the rest of the package also runs in browsers.
import { open, type FileHandle } from 'node:fs/promises';
import { OldReaderError } from './errors.ts';
import type { OldFileReader } from './patch.ts';

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
