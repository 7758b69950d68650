/**
 * A small file's one read for a bundle upload, and whether the hash the scan took of it still
 * holds (issue #16: each file was hashed twice, by the scan and again here, ~5 µs of SHA-256
 * per 8 KiB file on top of everything else a first sync spends per file).
 *
 * The scan's hash is trusted only when nothing about the file can have changed since the scan
 * read it. The file is read to its end first and its stat taken after the read, on the same
 * descriptor (a write during the read moves its ctime before the stat); then:
 * - its put was found by a scan of this process that started at `hashedAfterMs` (ScanHashes:
 *   the operation object the scan made, so a put merged with another one or loaded from the
 *   journal after a restart is hashed again), and the file was not moved since it was queued;
 * - its index row (what the scan saw: size, mtime, inode, and the hash it recorded with them)
 *   is the put's, and the stat matches it, on the folder's own device;
 * - its ctime — which every write, truncation, rename and `utimes` sets to the current time,
 *   and which nobody can set back — is older than the scan's start by more than the coarsest
 *   timestamp tick (RACY_MS, as the journal's "racily clean" rule): the file's inode and content
 *   are as they were when the scan began, so as when it read them.
 * Anything else — a file edited after the scan with its size and mtime put back (only its
 * ctime tells), a file replaced, a clock step — is hashed from the bytes read, as before; the
 * server checks every entry's SHA-256 against its bytes anyway (a mismatch refuses the bundle).
 */
import type { BigIntStats } from 'node:fs';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import type { UploadRow } from '../../journal/journal.ts';
import type { Op } from '../../ops.ts';

/** Timestamps younger than this are not trusted to show a change (the journal's RACY_MS). */
export const RACY_MS = 2_000;

/** What a scan of this process hashed: its put operations, with when that scan began. */
export class ScanHashes {
  /** Files a bundle upload hashed, and those it sent under the scan's hash (tests, benches). */
  hashed = 0;
  trusted = 0;
  private readonly began = new WeakMap<Op, number>();

  /** The puts among `ops` were hashed by a scan that began at `startedMs` (Date.now()). */
  add(ops: readonly Op[], startedMs: number): void {
    for (const op of ops) if (op.kind === 'put') this.began.set(op, startedMs);
  }

  private off = false;

  /** When the scan that hashed this very operation began, if a scan of this process did. */
  hashedAfter(op: Op): number | undefined {
    return this.off ? undefined : this.began.get(op);
  }

  /** No scan hash is trusted from now on (a bundle holding such files failed). */
  distrust(): void {
    this.off = true;
  }
}

/** Whether the put's scan hash still names the bytes just read (see the module comment). */
export function scanHashHolds(o: {
  readonly op: Extract<Op, { kind: 'put' }>;
  readonly movedSince: boolean;
  readonly hashedAfterMs: number | undefined;
  readonly row: UploadRow | undefined;
  readonly bytesRead: number;
  readonly stat: BigIntStats;
  readonly folderDev: bigint | undefined;
}): boolean {
  const { op, row, stat } = o;
  return (
    o.hashedAfterMs !== undefined &&
    !o.movedSince &&
    row !== undefined &&
    row.kind === 'file' &&
    row.hash === op.hash &&
    row.size === op.size &&
    o.bytesRead === op.size &&
    stat.isFile() &&
    stat.size === BigInt(op.size) &&
    stat.mtimeNs === row.mtimeNs &&
    stat.ino === row.inode &&
    stat.dev === o.folderDev &&
    stat.ctimeNs < BigInt(o.hashedAfterMs - RACY_MS) * 1_000_000n
  );
}

/** A file read whole, with its stat taken on the same descriptor after the read. */
export interface UploadRead {
  readonly content: Buffer;
  readonly stat: BigIntStats;
}

/** A one-byte probe for growth past the expected size (reads on the loop only: not shared across awaits). */
const PROBE = Buffer.allocUnsafe(1);

/**
 * Read `abs` on the calling thread (the event loop: callers ask their LoopGate first) into
 * `alloc(size)` — `size` as queued, no stat before the read — on to its end if it grew, then
 * fstat. A file that grew past `size` comes back whole in a buffer of its own (`alloc`'s is
 * given back through `release`). Throws as the system calls do.
 */
export function readForUploadSync(
  /** The file's path, or a descriptor open for reading (closed here either way). */
  file: string | number,
  size: number,
  alloc: (size: number) => Buffer,
  release: (b: Buffer) => void,
): UploadRead {
  const fd = typeof file === 'number' ? file : fs.openSync(file, 'r');
  try {
    const buf = alloc(size);
    let n = 0;
    while (n < size) {
      const got = fs.readSync(fd, buf, n, size - n, null);
      if (got === 0) break;
      n += got;
    }
    let content = buf.subarray(0, n);
    if (n === size && fs.readSync(fd, PROBE, 0, 1, null) > 0) {
      content = Buffer.concat([buf, PROBE, fs.readFileSync(fd)]);
      release(buf);
    }
    return { content, stat: fs.fstatSync(fd, { bigint: true }) };
  } finally {
    fs.closeSync(fd);
  }
}

/** readForUploadSync through the thread pool (when reads on the loop are slow). */
export async function readForUpload(
  abs: string,
  size: number,
  alloc: (size: number) => Buffer,
  release: (b: Buffer) => void,
): Promise<UploadRead> {
  const fh = await fsp.open(abs, 'r');
  try {
    const buf = alloc(size);
    let n = 0;
    while (n < size) {
      const { bytesRead } = await fh.read(buf, n, size - n, null);
      if (bytesRead === 0) break;
      n += bytesRead;
    }
    let content = buf.subarray(0, n);
    if (n === size) {
      const probe = Buffer.allocUnsafe(1);
      if ((await fh.read(probe, 0, 1, null)).bytesRead > 0) {
        content = Buffer.concat([buf, probe, await fh.readFile()]);
        release(buf);
      }
    }
    return { content, stat: await fh.stat({ bigint: true }) };
  } finally {
    await fh.close();
  }
}
