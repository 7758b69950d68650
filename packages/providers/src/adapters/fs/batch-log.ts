/**
 * The batch write's write-ahead log (issue #16: durability per bundle, not per file). With it
 * `writeMany` appends the whole batch — every file's path, modification time and bytes — to
 * one log segment and syncs that ONE file; the files themselves are then written and renamed
 * into place without an fsync each. A checkpoint later makes them durable together (one
 * syncfs(2) of the filesystem, `sync -f` run by a helper shell started once: tier-sync.ts;
 * per-file fsyncs where that is missing) and deletes
 * the segment. At open, before anything else reads the tier (the proxy's reconcile()), the
 * segments left by a crash are replayed: every logged file whose content on disk differs from
 * its last logged write (lost with the page cache) is written again.
 *
 * Ordering: a replay writes logged files over whatever is there, so no other mutation of a
 * logged path (or of a folder above one) may become durable before the log is checkpointed:
 * the provider's other writes, removes, moves and copies call `settle(paths)` first, which
 * checkpoints when the log holds one of those paths. Concurrent operations on the same path
 * have no order to keep (the proxy's scheduler never runs two).
 *
 * Segment `<seq>.wal` (local state, little-endian), records back to back:
 *
 *   offset  size  field
 *   0       4     magic "WFBL"
 *   4       4     version (1)
 *   8       4     item count n
 *   12      4     body length B
 *   16      B     n items: u32 path length, path (UTF-8), f64 mtimeMs (NaN: none),
 *                 u32 byte length, bytes
 *   16+B    4     CRC-32 of the body
 *
 * A record cut short or failing its CRC (a crash while it was appended: never acknowledged)
 * ends the segment's replay. An unknown version aborts the open.
 */
import { crc32 } from 'node:zlib';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { TierSync } from './tier-sync.ts';
import { fsyncDir } from './util.ts';

const MAGIC = 0x4c424657; // "WFBL" read little-endian
const VERSION = 1;
const HEADER = 16;

/** One logged file: provider path (normalised), bytes, optional modification time. */
export interface BatchLogItem {
  readonly path: string;
  readonly bytes: Uint8Array;
  readonly modifiedMs?: number;
}

export interface BatchLogOptions {
  /** Checkpoint this long after a segment's first record (ms). Default 1000. */
  readonly checkpointMs?: number;
  /** Checkpoint once a segment holds this many bytes. Default 64 MiB. */
  readonly checkpointBytes?: number;
}

/** What the log counts (tests count syncs per batch, never time). */
export interface BatchLogStats {
  /** Records appended. */
  appends: number;
  /** fsync/fdatasync calls the log made (segment data and its folder). */
  syncs: number;
  /** Checkpoints done (each: one syncfs, or per-file fsyncs as a fallback). */
  checkpoints: number;
  /** syncfs helper shells started (tier-sync.ts): each one fork of this process. */
  syncfsStarts: number;
  /** Tier syncs done by syncfs (the rest fell back to per-file fsyncs). */
  syncfs: number;
  /** Files written again by a replay at open. */
  replayed: number;
}

interface Segment {
  readonly seq: number;
  readonly file: string;
  handle: fsp.FileHandle | undefined;
  bytes: number;
  /** Absolute paths written under this segment (the fallback's fsyncs) and their lock keys. */
  readonly abs: Set<string>;
  readonly keys: Set<string>;
  /** The folders above those keys (settle's test for a folder is one lookup, not a scan). */
  readonly dirs: Set<string>;
  /** Batches appended but not yet applied (renamed into place). */
  inFlight: number;
  applied: (() => void) | undefined;
}

export class BatchLog {
  readonly stats: BatchLogStats = {
    appends: 0,
    syncs: 0,
    checkpoints: 0,
    syncfsStarts: 0,
    syncfs: 0,
    replayed: 0,
  };
  private current: Segment | undefined;
  private readonly sealed: Segment[] = [];
  private nextSeq: number;
  private appending: Promise<unknown> = Promise.resolve();
  private checkpointing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly checkpointMs: number;
  private readonly checkpointBytes: number;
  private readonly tierSync: TierSync;

  private constructor(
    private readonly dir: string,
    /** A path on the filesystem to sync (the tier's root). */
    private readonly syncRoot: string,
    private readonly fileMode: number,
    firstSeq: number,
    o: BatchLogOptions,
  ) {
    this.nextSeq = firstSeq;
    this.checkpointMs = o.checkpointMs ?? 1000;
    this.checkpointBytes = o.checkpointBytes ?? 64 * 1024 * 1024;
    this.tierSync = new TierSync(syncRoot);
  }

  /**
   * Open the log in `dir`, replaying what a crash left: `replay` is given the last logged
   * write of each path, in log order, and must leave every one on disk (or skip what cannot be written),
   * returning how many it wrote and the absolute paths of all it checked; the segments are
   * deleted once those files are synced (the ones found intact may be in the page cache only).
   */
  static async open(
    dir: string,
    syncRoot: string,
    fileMode: number,
    dirMode: number,
    replay: (items: BatchLogItem[]) => Promise<{ written: number; abs: string[] }>,
    o: BatchLogOptions = {},
  ): Promise<BatchLog> {
    await fsp.mkdir(dir, { recursive: true, mode: dirMode });
    const names = (await fsp.readdir(dir))
      .filter((n) => /^\d+\.wal$/.test(n))
      .sort((a, b) => Number.parseInt(a, 10) - Number.parseInt(b, 10));
    const log = new BatchLog(
      dir,
      syncRoot,
      fileMode,
      names.length > 0 ? Number.parseInt(names[names.length - 1]!, 10) + 1 : 1,
      o,
    );
    // Only the last logged write of each path matters (nothing else touched a logged path
    // before its checkpoint): the log is replayed as that, in the order of those writes.
    const last = new Map<string, BatchLogItem>();
    for (const name of names)
      for (const items of decodeRecords(await fsp.readFile(nodePath.join(dir, name))))
        for (const it of items) {
          last.delete(it.path);
          last.set(it.path, it);
        }
    let checked: string[] = [];
    if (last.size > 0) {
      const r = await replay([...last.values()]);
      log.stats.replayed = r.written;
      checked = r.abs;
    }
    if (names.length > 0) {
      await log.syncTier(checked);
      for (const name of names) await fsp.rm(nodePath.join(dir, name), { force: true });
      await fsyncDir(dir);
    }
    return log;
  }

  /**
   * Append one batch and make it durable (one data sync; a new segment also syncs the log's
   * folder once). Returns the call that says the batch's files are in place: a checkpoint
   * waits for it before it syncs the tier and deletes the segment.
   */
  async append(items: readonly (BatchLogItem & { abs: string; key: string })[]): Promise<() => void> {
    const record = encodeRecord(items);
    const run = this.appending.then(async () => {
      let seg = this.current;
      if (!seg) {
        const seq = this.nextSeq++;
        seg = {
          seq,
          file: nodePath.join(this.dir, `${seq}.wal`),
          handle: undefined,
          bytes: 0,
          abs: new Set(),
          keys: new Set(),
          dirs: new Set(),
          inFlight: 0,
          applied: undefined,
        };
        seg.handle = await fsp.open(seg.file, 'wx', this.fileMode);
        await fsyncDir(this.dir);
        this.stats.syncs++;
        this.current = seg;
      }
      await seg.handle!.write(record);
      await seg.handle!.datasync();
      this.stats.syncs++;
      this.stats.appends++;
      seg.bytes += record.byteLength;
      for (const it of items) {
        seg.abs.add(it.abs);
        seg.keys.add(it.key);
        // Its folders, deepest first, until one already known (then so are those above it).
        for (let at = it.key.lastIndexOf('/'); at > 0; at = it.key.lastIndexOf('/', at - 1)) {
          const dir = it.key.slice(0, at);
          if (seg.dirs.has(dir)) break;
          seg.dirs.add(dir);
        }
      }
      seg.inFlight++;
      return seg;
    });
    this.appending = run.catch(() => undefined);
    const seg = await run;
    if (seg.bytes >= this.checkpointBytes) void this.checkpoint().catch(() => undefined);
    else if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        void this.checkpoint().catch(() => undefined);
      }, this.checkpointMs);
      this.timer.unref();
    }
    let done = false;
    return () => {
      if (done) return;
      done = true;
      seg.inFlight--;
      if (seg.inFlight === 0) seg.applied?.();
    };
  }

  /**
   * Before another mutation of these paths (lock keys): when the log holds one of them or a
   * file under one, checkpoint first, so a replay can never undo the mutation.
   */
  async settle(keys: readonly string[]): Promise<void> {
    const segs = [...this.sealed, ...(this.current ? [this.current] : [])];
    // A key logged, or a folder above one (its lookups are O(1): a scan of every logged key
    // per call made a burst of single operations quadratic in what the log held).
    const hit = segs.some((s) =>
      keys.some((k) => (k === '' ? s.keys.size > 0 : s.keys.has(k) || s.dirs.has(k))),
    );
    if (hit) await this.checkpoint();
  }

  /** Make every batch logged so far durable in place and delete their segments. */
  async checkpoint(): Promise<void> {
    while (this.checkpointing) await this.checkpointing.catch(() => undefined);
    if (!this.current && this.sealed.length === 0) return;
    this.checkpointing = this.checkpointNow();
    try {
      await this.checkpointing;
    } finally {
      this.checkpointing = undefined;
    }
  }

  private async checkpointNow(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    // Seal the current segment after the appends already queued; new batches open the next.
    await this.appending;
    if (this.current) {
      this.sealed.push(this.current);
      this.current = undefined;
    }
    const segs = [...this.sealed];
    for (const s of segs) if (s.inFlight > 0) await new Promise<void>((resolve) => (s.applied = resolve));
    await this.syncTier(segs.flatMap((s) => [...s.abs]));
    for (const s of segs) {
      await s.handle?.close();
      s.handle = undefined;
      await fsp.rm(s.file, { force: true });
    }
    await fsyncDir(this.dir);
    this.stats.syncs++;
    this.sealed.splice(0, segs.length);
    this.stats.checkpoints++;
  }

  /** syncfs(2) of the tier's filesystem (`sync -f`), else an fsync of each file and folder. */
  private async syncTier(files: readonly string[]): Promise<void> {
    const synced = await this.tierSync.sync();
    this.stats.syncfsStarts = this.tierSync.stats.starts;
    if (synced) {
      this.stats.syncfs++;
      return;
    }
    // No `sync -f` (not GNU coreutils, no shell, the helper died): fsync what was written.
    const dirs = new Set<string>();
    for (const f of files) {
      dirs.add(nodePath.dirname(f));
      const fh = await fsp.open(f, 'r').catch(() => undefined);
      if (!fh) continue; // replaced or removed since: its new state was made durable by its writer
      try {
        await fh.sync();
      } finally {
        await fh.close();
      }
    }
    for (const d of dirs) await fsyncDir(d).catch(() => undefined);
  }

  /** Checkpoint what is logged and stop the timer. */
  async close(): Promise<void> {
    await this.checkpoint();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.tierSync.close();
  }
}

function encodeRecord(items: readonly BatchLogItem[]): Uint8Array {
  const paths = items.map((it) => Buffer.from(it.path, 'utf8'));
  let body = 0;
  for (const [i, it] of items.entries()) body += 4 + paths[i]!.byteLength + 8 + 4 + it.bytes.byteLength;
  const out = Buffer.allocUnsafe(HEADER + body + 4);
  out.writeUInt32LE(MAGIC, 0);
  out.writeUInt32LE(VERSION, 4);
  out.writeUInt32LE(items.length, 8);
  out.writeUInt32LE(body, 12);
  let at = HEADER;
  for (const [i, it] of items.entries()) {
    const p = paths[i]!;
    out.writeUInt32LE(p.byteLength, at);
    p.copy(out, at + 4);
    at += 4 + p.byteLength;
    out.writeDoubleLE(it.modifiedMs ?? Number.NaN, at);
    out.writeUInt32LE(it.bytes.byteLength, at + 8);
    out.set(it.bytes, at + 12);
    at += 12 + it.bytes.byteLength;
  }
  out.writeUInt32LE(crc32(out.subarray(HEADER, HEADER + body)), at);
  return out;
}

/** The complete records of a segment, in order; stops at a torn or damaged one. */
export function decodeRecords(buf: Buffer): BatchLogItem[][] {
  const out: BatchLogItem[][] = [];
  let at = 0;
  while (at + HEADER <= buf.byteLength) {
    if (buf.readUInt32LE(at) !== MAGIC) break;
    const version = buf.readUInt32LE(at + 4);
    if (version !== VERSION) throw new Error(`batch log: unknown record version ${version}`);
    const n = buf.readUInt32LE(at + 8);
    const body = buf.readUInt32LE(at + 12);
    const end = at + HEADER + body;
    if (end + 4 > buf.byteLength) break;
    if (crc32(buf.subarray(at + HEADER, end)) !== buf.readUInt32LE(end)) break;
    const items: BatchLogItem[] = [];
    let p = at + HEADER;
    for (let i = 0; i < n; i++) {
      const pl = buf.readUInt32LE(p);
      const path = buf.toString('utf8', p + 4, p + 4 + pl);
      p += 4 + pl;
      const mtime = buf.readDoubleLE(p);
      const len = buf.readUInt32LE(p + 8);
      const bytes = buf.subarray(p + 12, p + 12 + len);
      p += 12 + len;
      items.push({ path, bytes, ...(Number.isNaN(mtime) ? {} : { modifiedMs: mtime }) });
    }
    out.push(items);
    at = end + 4;
  }
  return out;
}
