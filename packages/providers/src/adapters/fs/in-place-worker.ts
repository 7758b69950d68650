/**
 * The in-place writes of a logged batch (write-many.ts writeInPlace) done off the event loop
 * (issue #16): open(O_EXCL), write, futimes, fstat and close of each new file are five
 * thread-pool round trips, each with its callback and promise on the event loop — ~95 µs of
 * the proxy's single thread per small file of a bundle. Here a few worker threads make the
 * same system calls synchronously, one message per share of the batch each way.
 *
 * The worker's code is plain JavaScript given as a string (`eval`) that requires only
 * node:fs and node:worker_threads (no copy of the app in each worker), so it runs the same
 * under tsx, vitest and a build. Nothing changes on disk compared with writeInPlace: the same
 * calls in the same order per file, O_EXCL so that an existing file is left to the
 * temp-and-rename path.
 *
 * Memory (issue #16: the proxy's peak RSS at 100k files went 378–398 → 620–639 MiB with four
 * always-on workers). An idle worker costs ~9 MiB; what weighed was the bytes: each share's
 * buffer was moved into the worker and stayed there until the worker's own GC ran, which a
 * worker that allocates almost nothing rarely does. The buffer now moves back with the reply
 * (the main thread's frequent GC frees it), workers start on the first write and end after
 * `idleMs` without work, and their heaps are capped (`resourceLimits`).
 */
import * as fs from 'node:fs';
import { Worker } from 'node:worker_threads';

/** One new file to write where it belongs. */
export interface InPlaceItem {
  readonly abs: string;
  readonly bytes: Uint8Array;
  readonly modifiedMs?: number | undefined;
  readonly mode: number;
}

/** Per item: its stat once whole; 'exists' (something is there); or the error met. */
export type InPlaceResult = fs.BigIntStats | 'exists' | Error;

const WORKER_SOURCE = `
const fs = require('node:fs');
const { parentPort } = require('node:worker_threads');
const FLAGS = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL;
const KEYS = ['dev', 'mode', 'nlink', 'uid', 'gid', 'rdev', 'blksize', 'ino', 'size', 'blocks',
  'atimeNs', 'mtimeNs', 'ctimeNs', 'birthtimeNs'];
function one(it) {
  let fd;
  try {
    fd = fs.openSync(it.abs, FLAGS, it.mode);
  } catch (e) {
    if (e && e.code === 'EEXIST') return { exists: true };
    return { error: { message: String(e && e.message), code: e && e.code, syscall: e && e.syscall } };
  }
  try {
    const b = it.bytes;
    for (let at = 0; at < b.byteLength;) at += fs.writeSync(fd, b, at, b.byteLength - at, at);
    if (it.modifiedMs !== undefined) {
      const m = new Date(it.modifiedMs);
      fs.futimesSync(fd, m, m);
    }
    const st = fs.fstatSync(fd, { bigint: true });
    fs.closeSync(fd);
    const out = {};
    for (const k of KEYS) out[k] = st[k];
    return { st: out };
  } catch (e) {
    try { fs.closeSync(fd); } catch {}
    try { fs.rmSync(it.abs, { force: true }); } catch {}
    return { error: { message: String(e && e.message), code: e && e.code, syscall: e && e.syscall } };
  }
}
parentPort.on('message', (m) => {
  const results = [];
  for (const it of m.items) {
    // Tests only (InPlacePoolOptions.exitAfterItems): the worker dies mid-share.
    if (m.exitAfter !== undefined && results.length === m.exitAfter) process.exit(70);
    results.push(one({ ...it, bytes: m.all.subarray(it.at, it.at + it.length) }));
  }
  // The bytes go back with the answer: kept here, they would wait for this thread's GC.
  parentPort.postMessage({ id: m.id, results, spare: m.all.buffer }, [m.all.buffer]);
});
`;

/** The fstat fields the worker sends (the *Ms ones and the Dates are derived here). */
type StatFields = Record<
  | 'dev'
  | 'mode'
  | 'nlink'
  | 'uid'
  | 'gid'
  | 'rdev'
  | 'blksize'
  | 'ino'
  | 'size'
  | 'blocks'
  | 'atimeNs'
  | 'mtimeNs'
  | 'ctimeNs'
  | 'birthtimeNs',
  bigint
>;

interface Reply {
  readonly id: number;
  /** The share's buffer, back from the worker (reused for the next share). */
  readonly spare?: ArrayBuffer;
  readonly results: readonly (
    { st: StatFields } | { exists: true } | { error: { message: string; code?: string; syscall?: string } }
  )[];
}

const NS_PER_MS = 1_000_000n;
const toDate = (ns: bigint): Date => new Date(Number(ns / NS_PER_MS));
const { S_IFMT, S_IFREG, S_IFDIR, S_IFBLK, S_IFCHR, S_IFLNK, S_IFIFO, S_IFSOCK } = Object.fromEntries(
  (['S_IFMT', 'S_IFREG', 'S_IFDIR', 'S_IFBLK', 'S_IFCHR', 'S_IFLNK', 'S_IFIFO', 'S_IFSOCK'] as const).map(
    (k) => [k, BigInt(fs.constants[k])],
  ),
) as Record<
  'S_IFMT' | 'S_IFREG' | 'S_IFDIR' | 'S_IFBLK' | 'S_IFCHR' | 'S_IFLNK' | 'S_IFIFO' | 'S_IFSOCK',
  bigint
>;

/**
 * The worker's fstat as a BigIntStats. Node's own class is not constructible from outside
 * (its constructor is internal and has changed between versions), so rather than borrowing a
 * real instance's prototype this is a plain class with the same fields and methods, built
 * from the numbers the worker sends; the *Ms fields are derived from the *Ns ones as Node
 * derives them (whole milliseconds, rounded down).
 */
class WorkerStats implements fs.BigIntStats {
  readonly dev: bigint;
  readonly mode: bigint;
  readonly nlink: bigint;
  readonly uid: bigint;
  readonly gid: bigint;
  readonly rdev: bigint;
  readonly blksize: bigint;
  readonly ino: bigint;
  readonly size: bigint;
  readonly blocks: bigint;
  readonly atimeNs: bigint;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
  readonly birthtimeNs: bigint;

  constructor(f: StatFields) {
    this.dev = f.dev;
    this.mode = f.mode;
    this.nlink = f.nlink;
    this.uid = f.uid;
    this.gid = f.gid;
    this.rdev = f.rdev;
    this.blksize = f.blksize;
    this.ino = f.ino;
    this.size = f.size;
    this.blocks = f.blocks;
    this.atimeNs = f.atimeNs;
    this.mtimeNs = f.mtimeNs;
    this.ctimeNs = f.ctimeNs;
    this.birthtimeNs = f.birthtimeNs;
  }

  // Derived when asked, not built for every file: eight BigInt divisions and four Dates cost
  // the event loop ~20 µs a file of a bundle, and the ingest reads none of them but mtimeMs
  // (issue #16).
  get atimeMs(): bigint {
    return this.atimeNs / NS_PER_MS;
  }
  get mtimeMs(): bigint {
    return this.mtimeNs / NS_PER_MS;
  }
  get ctimeMs(): bigint {
    return this.ctimeNs / NS_PER_MS;
  }
  get birthtimeMs(): bigint {
    return this.birthtimeNs / NS_PER_MS;
  }
  get atime(): Date {
    return toDate(this.atimeNs);
  }
  get mtime(): Date {
    return toDate(this.mtimeNs);
  }
  get ctime(): Date {
    return toDate(this.ctimeNs);
  }
  get birthtime(): Date {
    return toDate(this.birthtimeNs);
  }

  private type(): bigint {
    return this.mode & S_IFMT;
  }
  isFile(): boolean {
    return this.type() === S_IFREG;
  }
  isDirectory(): boolean {
    return this.type() === S_IFDIR;
  }
  isBlockDevice(): boolean {
    return this.type() === S_IFBLK;
  }
  isCharacterDevice(): boolean {
    return this.type() === S_IFCHR;
  }
  isSymbolicLink(): boolean {
    return this.type() === S_IFLNK;
  }
  isFIFO(): boolean {
    return this.type() === S_IFIFO;
  }
  isSocket(): boolean {
    return this.type() === S_IFSOCK;
  }
}

export interface InPlacePoolOptions {
  /** Most workers at once (a share of a batch each). */
  readonly size?: number;
  /** A worker with nothing to do for this long ends; the next write starts one again. */
  readonly idleMs?: number;
  /** Tests only: each worker exits (code 70) after writing this many items of a share. */
  readonly exitAfterItems?: number;
}

/**
 * Workers of the pool: 1 by default, or WEFT_FS_INPLACE_WORKERS. Measured (issue #16, 100,000
 * files of 1–16 KiB in batches of 2,000, load 7–11 on 2 cores): the event loop spent 11–15
 * µs per file with 1, 2 or 4 workers alike (its share is the messages), while all threads
 * together spent 78–94 / 231–264 / 399 µs per file and the run took 96 s with one worker
 * against 216 s with two: parallel creates in one folder contend in the kernel. More workers
 * keep more system calls in flight, which may pay on a high-latency mount (EFS): not measured.
 * Through FsProvider.writeMany with the batch log (20 × 1,000 files, load 7.5–9): the event
 * loop spent 124 / 79 / 74 µs per file with 0 / 1 / 4 workers, peak RSS 193 / 210 / 273 MiB.
 * bench/many-files.bench.ts 100000, proxy peak RSS: 401–417 MiB with none; with one, 459–464
 * MiB, and 435–436 once the buffer a share came back in is reused for the next (load 4–13;
 * 620–639 with the four always-on workers before).
 */
const DEFAULT_SIZE = Number(process.env.WEFT_FS_INPLACE_WORKERS ?? 1);

/**
 * Whether the process's pool is on: WEFT_FS_INPLACE_WORKERS=0 turns it off, and a batch's
 * new files are written by the thread pool on the event loop as before (write-many.ts).
 */
export const inPlaceWorkersOn = DEFAULT_SIZE !== 0;
const DEFAULT_IDLE_MS = 5_000;
/** Below this many files the batch is not worth splitting across workers. */
const PER_WORKER_MIN = 16;
/**
 * The worker's heap: it holds one share's item list and results at a time (the bytes are an
 * ArrayBuffer outside the heap), so a few MiB do; V8's defaults would let it grow far more.
 */
const RESOURCE_LIMITS = { maxOldGenerationSizeMb: 32, maxYoungGenerationSizeMb: 4 };

/** The largest share buffer kept for reuse. */
const SPARE_MAX = 32 * 1024 * 1024;
/** A share buffer's size: a power of two from 64 KiB, so a spare fits the next share often. */
function roundUp(n: number): number {
  let size = 64 * 1024;
  while (size < n) size *= 2;
  return size;
}

class InPlaceWorker {
  private worker: Worker | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private spare: ArrayBuffer | undefined;
  private nextId = 0;
  /** Threads started (tests). */
  starts = 0;
  private readonly waiting = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();

  constructor(
    private readonly options: Required<Omit<InPlacePoolOptions, 'exitAfterItems'>> & InPlacePoolOptions,
  ) {}

  get alive(): boolean {
    return this.worker !== undefined;
  }

  run(items: readonly InPlaceItem[]): Promise<Reply> {
    const w = this.start();
    const id = this.nextId++;
    return new Promise<Reply>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      if (this.idleTimer) clearTimeout(this.idleTimer);
      this.idleTimer = undefined;
      if (this.waiting.size === 1) w.ref();
      // The share's bytes copied into one buffer moved to the worker: views of a bundle's
      // buffer would each clone that whole buffer with them.
      const total = items.reduce((n, it) => n + it.bytes.byteLength, 0);
      // The buffer the last share came back in, when big enough: a new one per share is
      // garbage the main thread's GC frees only once enough such memory piled up.
      const spare = this.spare !== undefined && this.spare.byteLength >= total ? this.spare : undefined;
      this.spare = undefined;
      const all = new Uint8Array(
        spare ?? new ArrayBuffer(total <= SPARE_MAX ? roundUp(total) : total),
        0,
        total,
      );
      let at = 0;
      const list = items.map((it) => {
        all.set(it.bytes, at);
        const out = {
          abs: it.abs,
          at,
          length: it.bytes.byteLength,
          modifiedMs: it.modifiedMs,
          mode: it.mode,
        };
        at += it.bytes.byteLength;
        return out;
      });
      w.postMessage({ id, all, items: list, exitAfter: this.options.exitAfterItems }, [all.buffer]);
    });
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(WORKER_SOURCE, { eval: true, resourceLimits: RESOURCE_LIMITS });
    this.starts += 1;
    w.unref();
    w.on('message', (r: Reply) => {
      if (r.spare !== undefined && r.spare.byteLength <= SPARE_MAX) this.spare = r.spare;
      const waiter = this.waiting.get(r.id);
      this.waiting.delete(r.id);
      if (this.waiting.size === 0) {
        w.unref();
        this.idleTimer = setTimeout(() => this.stop(w), this.options.idleMs);
        this.idleTimer.unref();
      }
      waiter?.resolve(r);
    });
    const fail = (e: Error): void => {
      // A worker stop() ended had nothing waiting; what waits now is a newer worker's share.
      if (this.worker !== w) return;
      this.worker = undefined;
      const all = [...this.waiting.values()];
      this.waiting.clear();
      for (const x of all) x.reject(e);
    };
    w.on('error', (e) => fail(new Error(`in-place write worker failed: ${e.message}`, { cause: e })));
    w.on('exit', (code) => fail(new Error(`in-place write worker exited (code ${code})`)));
    this.worker = w;
    return w;
  }

  /** End the worker if it is still idle (nothing waiting). */
  private stop(w: Worker): void {
    this.idleTimer = undefined;
    if (this.worker !== w || this.waiting.size > 0) return;
    this.worker = undefined;
    this.spare = undefined;
    void w.terminate();
  }
}

/** A pool of in-place write workers (one per process by default: `writeInPlaceMany`). */
export class InPlacePool {
  private readonly workers: InPlaceWorker[] = [];
  private readonly options: Required<Omit<InPlacePoolOptions, 'exitAfterItems'>> & InPlacePoolOptions;

  constructor(options: InPlacePoolOptions = {}) {
    this.options = { size: DEFAULT_SIZE, idleMs: DEFAULT_IDLE_MS, ...options };
    if (!(Number.isInteger(this.options.size) && this.options.size >= 1))
      throw new RangeError(`in-place pool size must be a whole number ≥ 1, not ${this.options.size}`);
  }

  /** Worker threads started so far (tests). */
  get started(): number {
    return this.workers.reduce((n, w) => n + w.starts, 0);
  }

  /** Workers running now (started on a write, ended after idleMs without one). */
  get running(): number {
    return this.workers.filter((w) => w.alive).length;
  }

  /**
   * Write each item as a new file where it belongs (O_EXCL), its bytes and time, and take its
   * stat on the open descriptor; results in item order. A file that fails is removed again.
   * A worker that dies mid-share fails that share's items with its error (any of them it had
   * written stay, whole: the next write of one meets 'exists' and replaces it); the other
   * shares' answers stand.
   */
  async writeMany(items: readonly InPlaceItem[]): Promise<InPlaceResult[]> {
    if (items.length === 0) return [];
    const n = Math.max(1, Math.min(this.options.size, Math.floor(items.length / PER_WORKER_MIN)));
    while (this.workers.length < n) this.workers.push(new InPlaceWorker(this.options));
    // Contiguous shares: a folder's files stay together on one worker.
    const per = Math.ceil(items.length / n);
    const replies = await Promise.all(
      Array.from({ length: n }, (_, k) => {
        const share = items.slice(k * per, (k + 1) * per);
        return this.workers[k]!.run(share).catch((e: Error) => ({ id: -1, results: share.map(() => e) }));
      }),
    );
    const out: InPlaceResult[] = [];
    for (const r of replies)
      for (const x of r.results) {
        if (x instanceof Error) out.push(x);
        else if ('st' in x) out.push(new WorkerStats(x.st));
        else if ('exists' in x) out.push('exists');
        else out.push(Object.assign(new Error(x.error.message), x.error));
      }
    return out;
  }
}

const pool = new InPlacePool(inPlaceWorkersOn ? {} : { size: 1 });

/** `InPlacePool.writeMany` on the process's pool. */
export function writeInPlaceMany(items: readonly InPlaceItem[]): Promise<InPlaceResult[]> {
  return pool.writeMany(items);
}
