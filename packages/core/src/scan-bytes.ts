/**
 * The bytes of small files the scan read to hash them, kept for the bundle upload that sends
 * them next (issue #16: every small file was read twice — by the scan to hash it, then by the
 * upload, with its own open, readlink, reads, fstat and close).
 *
 * Kept by path, with the hash and the stat the scan took of the file on the same descriptor
 * after reading it (scan-disk.ts). The upload takes an entry only for a put of this process's
 * scan with the same hash, and sends its bytes only when a stat of the path now shows the very
 * file the scan read, unchanged since before the scan began (upload-bundle.ts, sameAsScanned):
 * anything else — edited, replaced, moved, a symbolic link swapped in — is read from disk as
 * before, confined to the folder. The bytes never come from anywhere but the scan's own read.
 *
 * Bounded in bytes: copied into a few reused slabs (a buffer per file was the garbage that
 * read-slabs.ts was written to avoid), filled in turn. The upload takes an entry by copying its
 * bytes out at once (into its read slabs: a copy of a small file is a fraction of the system
 * calls it saves), so nothing here is pinned by an upload. When every slab is full the oldest
 * is written over only once nothing in it is still to be taken — all taken, or the upload has
 * taken from a later slab (it sends in the scan's order: what it passed is not coming), or it
 * was filled more than STALE_MS ago (puts cancelled, an upload stopped) — else the new file is
 * not kept and the upload reads it from disk. A scan running far ahead of the upload (the
 * queue lets it be 20,000 operations ahead, early-push.ts) so keeps what the upload meets
 * next, not what it meets last (the oldest written over: nothing was ever found).
 */
import type { BigIntStats } from 'node:fs';

/** Bytes of one slab. */
export const SCAN_BYTES_SLAB = 4 * 1024 * 1024;
/** Bytes kept at most (the agent's RSS at 100,000 files stays under 250 MB; issue #16). */
export const SCAN_BYTES_MAX = 32 * 1024 * 1024;
/** A full slab older than this is written over whatever it holds (milliseconds). */
export const STALE_MS = 120_000;

/** A small file as the scan read it. */
export interface ScannedFile {
  readonly path: string;
  /** Where the scan read it. */
  readonly abs: string;
  /** Its size in bytes. */
  readonly size: number;
  /** Its identity as the stat the scan took on the descriptor after the read showed it. */
  readonly id: FileIdentity;
}

/**
 * What of a stat tells the file is the same: four BigInts kept, not a whole BigIntStats (~20;
 * kept for seconds they were the agent's old-generation garbage).
 */
export interface FileIdentity {
  readonly ino: bigint;
  readonly dev: bigint;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
}

interface Slab {
  readonly buf: Buffer;
  used: number;
  /** Its turn in the filling order, and when that began (clock()). */
  turn: number;
  since: number;
  /** Entries in it not taken, replaced or forgotten. */
  live: number;
  /** Paths kept in it (an entry of another slab under the same path is left alone). */
  paths: string[];
}

interface Entry extends ScannedFile {
  readonly hash: string;
  readonly slab: Slab;
  /** Where its bytes are in the slab (offsets, not a view: an object less per file). */
  readonly at: number;
}

export class ScanBytes {
  /**
   * Files kept, taken, forgotten unread when their slab was written over, and not kept for
   * want of room (tests, benches).
   */
  kept = 0;
  /** Files the upload found kept under the put's hash (peek), and those it sent (take). */
  met = 0;
  taken = 0;
  forgotten = 0;
  full = 0;
  /** Bytes of the entries kept and not taken, replaced or forgotten (isFull). */
  private liveBytes = 0;
  private readonly entries = new Map<string, Entry>();
  private readonly slabs: Slab[] = [];
  /** The slab being filled (an index into slabs). */
  private at = -1;
  private turns = 0;
  /** Slabs of this turn or before have nothing the upload is still to take. */
  private passed = -1;

  constructor(
    private readonly maxBytes = SCAN_BYTES_MAX,
    private readonly slabBytes = SCAN_BYTES_SLAB,
    /** Milliseconds (a test's clock). */
    private readonly clock: () => number = Date.now,
  ) {}

  /** Keep a copy of `content` (the scan's read, in its reused buffer) for the upload. */
  keep(path: string, abs: string, hash: string, content: Buffer, stat: BigIntStats): void {
    const n = content.byteLength;
    this.forget(path); // an older read of it is not what is on disk now
    const slab = n === 0 || n > this.slabBytes ? undefined : this.room(n);
    if (slab === undefined) return;
    const at = slab.used;
    content.copy(slab.buf, at, 0, n);
    slab.used += n;
    slab.paths.push(path);
    slab.live += 1;
    this.liveBytes += n;
    const { ino, dev, mtimeNs, ctimeNs } = stat;
    this.entries.set(path, { path, abs, hash, slab, at, size: n, id: { ino, dev, mtimeNs, ctimeNs } });
    this.kept += 1;
  }

  /**
   * The scan's read of `path`, when it hashed to `hash` (else undefined, and a read of
   * other bytes is let go): still here, to be checked against the file before take().
   */
  peek(path: string, hash: string): ScannedFile | undefined {
    const e = this.entries.get(path);
    if (e === undefined) return undefined;
    if (e.hash !== hash) {
      this.forget(path);
      return undefined;
    }
    this.met += 1;
    return e;
  }

  /**
   * The bytes of `file` (from peek), copied into `alloc(size)` (the caller's), or undefined
   * when they are gone since (written over, kept again). Either way the entry is let go.
   */
  take(file: ScannedFile, alloc: (size: number) => Buffer): Buffer | undefined {
    const e = this.entries.get(file.path);
    if (e !== file) return undefined;
    this.forget(file.path);
    this.passed = Math.max(this.passed, e.slab.turn - 1);
    const content = alloc(e.size);
    e.slab.buf.copy(content, 0, e.at, e.at + e.size);
    this.taken += 1;
    return content;
  }

  /** Let go of the read of `path`, if kept (the upload will not take it: see upload-bundle.ts). */
  drop(path: string): void {
    this.forget(path);
  }

  /**
   * Whether half the cache or more holds what the upload is still to take: the scan's next
   * chunk of files (CHUNK_ENTRIES, up to ~16 MiB of small files) may not fit (early-push.ts:
   * the scan then waits for the upload).
   */
  isFull(): boolean {
    return this.liveBytes * 2 >= this.maxBytes;
  }

  /** Entries kept and not taken (tests). */
  get size(): number {
    return this.entries.size;
  }

  /** The slab filled after the current one. */
  private nextAt(): number {
    return (this.at + 1) % Math.max(1, Math.floor(this.maxBytes / this.slabBytes));
  }

  /** Whether `slab` (full) still holds what the upload is to take, and is not stale. */
  private holds(slab: Slab, now: number): boolean {
    return slab.live > 0 && slab.turn > this.passed && now - slab.since < STALE_MS;
  }

  /** The entry of `path`, out of the cache. */
  private forget(path: string): Entry | undefined {
    const e = this.entries.get(path);
    if (e === undefined) return undefined;
    this.entries.delete(path);
    e.slab.live -= 1;
    this.liveBytes -= e.size;
    return e;
  }

  /** A slab with `n` bytes free: the current one, a new one, the oldest written over, or none. */
  private room(n: number): Slab | undefined {
    const cur = this.slabs[this.at];
    if (cur !== undefined && cur.used + n <= cur.buf.length) return cur;
    const next = this.nextAt();
    let slab = this.slabs[next];
    const now = this.clock();
    if (slab === undefined) {
      slab = { buf: Buffer.allocUnsafeSlow(this.slabBytes), used: 0, turn: 0, since: 0, live: 0, paths: [] };
      this.slabs[next] = slab;
    } else {
      if (this.holds(slab, now)) {
        this.full += 1;
        return undefined;
      }
      for (const p of slab.paths)
        if (this.entries.get(p)?.slab === slab) {
          this.forget(p);
          this.forgotten += 1;
        }
      slab.paths = [];
      slab.used = 0;
    }
    slab.turn = this.turns++;
    slab.since = now;
    this.at = next;
    return slab;
  }
}
