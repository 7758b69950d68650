/** Content a write stores — bytes in memory or a local file — and what is computed from it. */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { LINK_CHUNK_BYTES, type LinkFile } from './link-file.ts';

/** Content to store: bytes in memory, or a local file (staged upload, patched delta). */
export type Content = { readonly bytes: Uint8Array } | { readonly file: string; readonly size: number };

export async function contentSha(c: Content): Promise<string> {
  if ('bytes' in c) return createHash('sha256').update(c.bytes).digest('hex');
  const h = createHash('sha256');
  for await (const chunk of createReadStream(c.file)) h.update(chunk as Buffer);
  return h.digest('hex');
}

export function contentSize(c: Content): number {
  return 'bytes' in c ? c.bytes.byteLength : c.size;
}

export async function chunkList(c: Content): Promise<LinkFile['chunks']> {
  const out: LinkFile['chunks'] = [];
  const size = contentSize(c);
  if ('bytes' in c) {
    for (let off = 0; off < size; off += LINK_CHUNK_BYTES) {
      const piece = c.bytes.subarray(off, Math.min(size, off + LINK_CHUNK_BYTES));
      out.push({
        offset: off,
        length: piece.byteLength,
        sha256: createHash('sha256').update(piece).digest('hex'),
      });
    }
    return out;
  }
  let off = 0;
  for await (const piece of createReadStream(c.file, { highWaterMark: LINK_CHUNK_BYTES })) {
    const b = piece as Buffer;
    out.push({ offset: off, length: b.byteLength, sha256: createHash('sha256').update(b).digest('hex') });
    off += b.byteLength;
  }
  return out;
}
