// Node-only helpers (file access); the rest of the package also runs in browsers.
import { open, type FileHandle } from 'node:fs/promises';
import { OldReaderError } from './errors.ts';
import type { OldFileReader } from './patch.ts';

export interface OldFile extends OldFileReader {
  close(): Promise<void>;
}

/** Opens a file for patch(): reads ranges with positioned reads, never the whole file. */
export async function openOldFile(path: string): Promise<OldFile> {
  const handle: FileHandle = await open(path, 'r');
  const { size } = await handle.stat();
  return {
    size,
    async read(offset: number, length: number): Promise<Uint8Array> {
      const out = new Uint8Array(length);
      let done = 0;
      while (done < length) {
        const { bytesRead } = await handle.read(out, done, length - done, offset + done);
        if (bytesRead === 0)
          throw new OldReaderError(`${path} ended at ${offset + done}, expected ${length} bytes`);
        done += bytesRead;
      }
      return out;
    },
    close: () => handle.close(),
  };
}
