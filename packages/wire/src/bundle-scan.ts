/**
 * Reading a bundle's entry headers (path and content size) while its entries area is
 * inflated, a buffer at a time, so a receiver can refuse the bundle at the first entry that
 * does not fit (a storage quota) without expanding the rest: a 61 KB bundle that inflates
 * to 60 MiB is stopped after about the bytes it was allowed, not after 60 MiB.
 *
 * The scan only reads sizes; it does not validate. A bundle it cannot follow (bad header,
 * truncated or corrupt entries area) ends the scan quietly and is refused, with the precise
 * error, by decodeBundle, which the receiver runs afterwards.
 */
import { createInflateRaw } from 'node:zlib';
import { BUNDLE_HEADER_SIZE, BUNDLE_MAGIC } from './bundle.ts';

export interface BundleEntryHeader {
  /** The entry's index in the bundle. */
  readonly index: number;
  /** The path as sent (not yet checked: decodeBundle does that). */
  readonly path: string;
  /** Content bytes the entry declares. */
  readonly size: number;
}

/** Output of one inflate step; the scan stops within one such buffer of the refused entry. */
export const SCAN_CHUNK_BYTES = 64 * 1024;

const FLAG_COMPRESSED = 0x01;
const REV_VALUE = 2;

/** Bytes received but not yet parsed; contents are skipped without being kept. */
class Pending {
  private chunks: Buffer[] = [];
  private length = 0;

  push(b: Buffer): void {
    if (b.byteLength === 0) return;
    this.chunks.push(b);
    this.length += b.byteLength;
  }

  has(n: number): boolean {
    return this.length >= n;
  }

  /** The first n bytes (n ≤ length), not consumed. */
  peek(n: number): Buffer {
    if (this.chunks[0]!.byteLength < n) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0]!.subarray(0, n);
  }

  /** Consume up to n bytes; returns how many were consumed. */
  skip(n: number): number {
    let left = n;
    while (left > 0 && this.chunks.length > 0) {
      const c = this.chunks[0]!;
      if (c.byteLength <= left) {
        left -= c.byteLength;
        this.chunks.shift();
      } else {
        this.chunks[0] = c.subarray(left);
        left = 0;
      }
    }
    this.length -= n - left;
    return n - left;
  }
}

/**
 * Call `admit` with each entry's header as soon as it has been inflated, before its content
 * is. `admit` refuses an entry by throwing; the scan then stops inflating and rethrows.
 * `inflatedBytes` is how much of the entries area had been produced at that point.
 */
export async function scanBundleEntries(
  bytes: Uint8Array,
  admit: (entry: BundleEntryHeader, inflatedBytes: number) => void,
): Promise<{ inflatedBytes: number }> {
  if (bytes.byteLength < BUNDLE_HEADER_SIZE) return { inflatedBytes: 0 };
  for (let i = 0; i < BUNDLE_MAGIC.byteLength; i++)
    if (bytes[i] !== BUNDLE_MAGIC[i]) return { inflatedBytes: 0 };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const flags = view.getUint8(5);
  const count = view.getUint32(8, true);
  const rawLength = view.getUint32(12, true);
  const storedLength = view.getUint32(16, true);
  if (BUNDLE_HEADER_SIZE + storedLength > bytes.byteLength) return { inflatedBytes: 0 };
  const stored = Buffer.from(bytes.buffer, bytes.byteOffset + BUNDLE_HEADER_SIZE, storedLength);

  const pending = new Pending();
  let index = 0;
  let contentLeft = 0;
  let inflated = 0;
  /** Set while `admit` runs: an exception then is a refusal, not a format problem. */
  let refused = false;
  /** Parse what has arrived; false once every entry has been seen (or the scan must end). */
  const step = (): boolean => {
    for (;;) {
      if (contentLeft > 0) {
        contentLeft -= pending.skip(contentLeft);
        if (contentLeft > 0) return true;
      }
      if (index >= count) return false;
      if (!pending.has(2)) return true;
      const pathLength = pending.peek(2).readUInt16LE(0);
      if (!pending.has(2 + pathLength + 1)) return true;
      const revKind = pending.peek(2 + pathLength + 1)[2 + pathLength]!;
      let revBytes = 0;
      if (revKind === REV_VALUE) {
        if (!pending.has(2 + pathLength + 2)) return true;
        revBytes = 1 + pending.peek(2 + pathLength + 2)[2 + pathLength + 1]!;
      }
      const headerLength = 2 + pathLength + 1 + revBytes + 8 + 4 + 32;
      if (!pending.has(headerLength)) return true;
      const h = pending.peek(headerLength);
      const size = h.readUInt32LE(2 + pathLength + 1 + revBytes + 8);
      const path = h.toString('utf8', 2, 2 + pathLength);
      pending.skip(headerLength);
      refused = true;
      admit({ index, path, size }, inflated);
      refused = false;
      index += 1;
      contentLeft = size;
      if (contentLeft === 0 && index >= count) return false;
    }
  };

  if ((flags & FLAG_COMPRESSED) === 0) {
    pending.push(stored);
    inflated = stored.byteLength;
    step();
    return { inflatedBytes: inflated };
  }
  const inflater = createInflateRaw({ chunkSize: SCAN_CHUNK_BYTES });
  // Output is pulled one buffer at a time: zlib does not inflate ahead of what is read.
  inflater.end(stored);
  try {
    for await (const chunk of inflater as AsyncIterable<Buffer>) {
      inflated += chunk.byteLength;
      if (inflated > rawLength) break; // lies about its size: decodeBundle refuses it
      pending.push(chunk);
      if (!step()) break;
    }
  } catch (e) {
    // Corrupt deflate data ends the scan (decodeBundle reports it); a refusal goes up.
    if (refused) throw e;
  } finally {
    inflater.destroy();
  }
  return { inflatedBytes: inflated };
}
