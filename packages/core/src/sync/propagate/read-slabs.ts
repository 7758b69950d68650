/**
 * Buffers for the small files a bundle upload reads, carved from a few reused slabs instead
 * of a fresh Buffer per file (issue #16). At 100,000 files of 1–16 KiB each file's read buffer
 * was its own allocation, dead once the bundle was encoded (the entries area is a copy), and
 * these piled up between collections: the agent's RSS spike when uploading starts. A slab is
 * used again once every file read into it has been released (its bundle encoded).
 */
import { MAX_BUNDLE_BYTES } from '@weft/wire';

/** Bytes of one slab: a bundle's worth. */
export const READ_SLAB_BYTES = 4 * 1024 * 1024;
/** Free slabs kept for reuse; more are left to the collector. */
const FREE_SLABS_KEPT = 2;

interface Slab {
  readonly buf: Buffer;
  /** Next free byte. */
  used: number;
  /** Slices handed out and not yet released. */
  live: number;
}

export class ReadSlabs {
  /** Slab memory allocated (slabs and files too large for one), for tests and benches. */
  bytesAllocated = 0;
  /** The buffers the bundles of the same upload are encoded into (kept with the slabs across runs). */
  readonly bundles = new BundleBuffers();
  private current: Slab | undefined;
  private readonly free: Slab[] = [];
  private readonly byBuffer = new Map<ArrayBufferLike, Slab>();

  /**
   * `size` bytes to read a file into. The bytes are the caller's until release(); a file of
   * more than half a slab gets a buffer of its own.
   */
  alloc(size: number): Buffer {
    if (size === 0) return Buffer.alloc(0);
    if (size > READ_SLAB_BYTES / 2) {
      this.bytesAllocated += size;
      return Buffer.allocUnsafeSlow(size);
    }
    let slab = this.current;
    if (!slab || slab.used + size > slab.buf.length) {
      if (slab && slab.live === 0)
        slab.used = 0; // nothing handed out lives: start it over
      else {
        slab = this.free.pop() ?? this.newSlab();
        slab.used = 0;
        this.current = slab;
      }
    }
    const out = slab.buf.subarray(slab.used, slab.used + size);
    slab.used += size;
    slab.live += 1;
    return out;
  }

  /**
   * The bytes of `content` (from alloc, any subarray of it) are no longer read: its slab is
   * used again once all of its slices are released. Anything else is ignored.
   */
  release(content: Uint8Array): void {
    const slab = this.byBuffer.get(content.buffer);
    if (!slab || slab.live === 0) return;
    slab.live -= 1;
    if (slab.live > 0 || slab === this.current) return;
    if (this.free.length < FREE_SLABS_KEPT) this.free.push(slab);
    else this.byBuffer.delete(slab.buf.buffer);
  }

  private newSlab(): Slab {
    const slab: Slab = { buf: Buffer.allocUnsafeSlow(READ_SLAB_BYTES), used: 0, live: 0 };
    this.bytesAllocated += READ_SLAB_BYTES;
    this.byBuffer.set(slab.buf.buffer, slab);
    return slab;
  }
}

/** Bytes of one bundle buffer: a whole bundle (docs/formats/bundle.md). */
export const BUNDLE_BUFFER_BYTES = MAX_BUNDLE_BYTES;

/**
 * The buffers bundles are encoded into (encodeBundle's `into`), reused from one bundle to the
 * next (issue #16): a fresh 4 MiB buffer per bundle — and fetch's copy of it — were dead
 * native memory that piled up for ~64 MiB (V8's external-memory step) before a full
 * collection freed it, the agent's RSS saw-tooth during an upload. One is taken per bundle
 * and given back once nothing reads it any more (its request settled): at most one per
 * bundle on its way and one being encoded are ever allocated.
 */
export class BundleBuffers {
  /** Bytes allocated, for tests and benches. */
  bytesAllocated = 0;
  /** Buffers taken and not yet given back. */
  taken = 0;
  private readonly free: Buffer[] = [];

  take(): Buffer {
    this.taken += 1;
    const reused = this.free.pop();
    if (reused) return reused;
    this.bytesAllocated += BUNDLE_BUFFER_BYTES;
    return Buffer.allocUnsafeSlow(BUNDLE_BUFFER_BYTES);
  }

  /** `buf` (from take) is read by nothing any more: the next bundle may be written in it. */
  give(buf: Buffer): void {
    this.taken -= 1;
    this.free.push(buf);
  }
}
