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
  /**
   * Then rename the new file (`abs`, a temp file) over this path, and stat it there: a
   * replacement readers see whole, old or new (a reader of the old file keeps reading it).
   */
  readonly placeAt?: string;
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
    let st;
    if (it.placeAt === undefined) {
      st = fs.fstatSync(fd, { bigint: true });
      fs.closeSync(fd);
    } else {
      fs.closeSync(fd);
      fd = undefined;
      fs.renameSync(it.abs, it.placeAt);
      st = fs.lstatSync(it.placeAt, { bigint: true });
    }
    const out = {};
    for (const k of KEYS) out[k] = st[k];
    return { st: out };
  } catch (e) {
    if (fd !== undefined) try { fs.closeSync(fd); } catch {}
    try { fs.rmSync(it.abs, { force: true }); } catch {}
    return { error: { message: String(e && e.message), code: e && e.code, syscall: e && e.syscall } };
  }
}
// This thread's time on a CPU and waiting for one (ns), from the kernel's scheduler statistics
// (Linux); undefined elsewhere. Wall time less both is time blocked: on the disk, the network.
function sched() {
  try {
    const f = fs.readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ');
    const cpu = Number(f[0]);
    const wait = Number(f[1]);
    return Number.isFinite(cpu) && Number.isFinite(wait) ? { cpu, wait } : undefined;
  } catch {
    return undefined;
  }
}
const nap = new Int32Array(new SharedArrayBuffer(4));
parentPort.on('message', (m) => {
  const results = [];
  const s0 = sched();
  const t0 = process.hrtime.bigint();
  for (const it of m.items) {
    // Tests only (InPlacePoolOptions.exitAfterItems): the worker dies mid-share.
    if (m.exitAfter !== undefined && results.length === m.exitAfter) process.exit(70);
    // Tests only (InPlacePoolOptions.latencyMsPerItem): a mount that answers slowly.
    if (m.latencyMs) Atomics.wait(nap, 0, 0, m.latencyMs);
    // Tests only (InPlacePoolOptions.spinMsPerItem): CPU work, not blocked time.
    if (m.spinMs) for (const end = Date.now() + m.spinMs; Date.now() < end; );
    results.push(one({ ...it, bytes: m.all.subarray(it.at, it.at + it.length) }));
  }
  const wallNs = Number(process.hrtime.bigint() - t0);
  const s1 = sched();
  const blockedNs = s0 && s1 && s1.cpu > 0 ? Math.max(0, wallNs - (s1.cpu - s0.cpu) - (s1.wait - s0.wait)) : undefined;
  // The bytes go back with the answer: kept here, they would wait for this thread's GC.
  parentPort.postMessage({ id: m.id, results, blockedNs, spare: m.all.buffer }, [m.all.buffer]);
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
  /**
   * Nanoseconds the share's thread was blocked (wall time less its time on a CPU and waiting
   * for one): undefined where the kernel does not tell (not Linux).
   */
  readonly blockedNs?: number;
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
  /** Workers at once, fixed (WEFT_FS_INPLACE_WORKERS): the pool does not adapt its width. */
  readonly size?: number;
  /** The most workers the pool spreads a batch over on a slow mount (adaptive). Default 8. */
  readonly maxSize?: number;
  /** A worker with nothing to do for this long ends; the next write starts one again. */
  readonly idleMs?: number;
  /** While spread, one batch in this many is written by one worker again (a probe). Default 32. */
  readonly probeEvery?: number;
  /** Tests only: each worker exits (code 70) after writing this many items of a share. */
  readonly exitAfterItems?: number;
  /** Tests only: each item waits this long first (ms), blocked, as on a mount far away. */
  readonly latencyMsPerItem?: number | (() => number);
  /** Tests only: each item first keeps the worker's CPU busy this long (ms of wall time). */
  readonly spinMsPerItem?: number;
}

/**
 * How many workers write a batch (issue #16). One by default: measured on a local disk (100,000
 * files of 1–16 KiB in batches of 2,000, load 7–11 on 2 cores), the event loop spent 11–15
 * µs per file with 1, 2 or 4 workers alike (its share is the messages), while all threads
 * together spent 78–94 / 231–264 / 399 µs per file and the run took 96 s with one worker
 * against 216 s with two: parallel creates in one folder contend in the kernel, where a
 * create is CPU work. On a mount far away (EFS, NFS) a create is a few round trips of a
 * millisecond or more, the thread mostly blocked, and one worker would write a few hundred
 * files a second; there more creates in flight is what pays.
 *
 * So the pool watches how long its worker is blocked per file — wall time less the thread's
 * time on a CPU and waiting for one, from the kernel's scheduler statistics
 * (/proc/thread-self/schedstat), so a loaded CPU is not mistaken for a slow mount — and
 * spreads batches over `maxSize` workers once one worker was blocked SLOW_ITEM_MS or more per
 * file; while spread, one batch in `probeEvery` is written by one worker again and brings the
 * pool back to one when it was not. Where the kernel does not tell (not Linux) the pool stays
 * at one. WEFT_FS_INPLACE_WORKERS fixes the count (0 turns the pool off: write-many.ts uses
 * the thread pool on the event loop).
 *
 * Through FsProvider.writeMany with the batch log (20 × 1,000 files, load 7.5–9): the event
 * loop spent 124 / 79 / 74 µs per file with 0 / 1 / 4 workers, peak RSS 193 / 210 / 273 MiB.
 * bench/many-files.bench.ts 100000, proxy peak RSS: 401–417 MiB with none; with one, 459–464
 * MiB, and 435–436 once the buffer a share came back in is reused for the next (load 4–13;
 * 620–639 with the four always-on workers before).
 */
const FIXED_SIZE =
  process.env.WEFT_FS_INPLACE_WORKERS === undefined ? undefined : Number(process.env.WEFT_FS_INPLACE_WORKERS);

/**
 * Whether the process's pool is on: WEFT_FS_INPLACE_WORKERS=0 turns it off, and a batch's
 * new files are written by the thread pool on the event loop as before (write-many.ts).
 */
export const inPlaceWorkersOn = FIXED_SIZE !== 0;
const DEFAULT_MAX_SIZE = 8;
const DEFAULT_IDLE_MS = 5_000;
const DEFAULT_PROBE_EVERY = 32;
/**
 * Milliseconds blocked per file, one worker writing, from which the mount counts as slow: a
 * local disk's creates are CPU work in the kernel (20–650 µs a file on this project's test
 * machine, almost none of it blocked); a network mount's are round trips.
 */
export const SLOW_ITEM_MS = 2;
/** Below this many files the batch is not worth splitting across workers. */
const PER_WORKER_MIN = 16;
/** Files a probe writes with one worker alone (a probe costs them at one worker's pace). */
const PROBE_ITEMS = 64;
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

  constructor(private readonly options: { readonly idleMs: number } & InPlacePoolOptions) {}

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
          placeAt: it.placeAt,
        };
        at += it.bytes.byteLength;
        return out;
      });
      w.postMessage(
        {
          id,
          all,
          items: list,
          exitAfter: this.options.exitAfterItems,
          latencyMs:
            typeof this.options.latencyMsPerItem === 'function'
              ? this.options.latencyMsPerItem()
              : this.options.latencyMsPerItem,
          spinMs: this.options.spinMsPerItem,
        },
        [all.buffer],
      );
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

/** A pool of in-place write workers (one per process: `writeInPlaceMany`). */
export class InPlacePool {
  private readonly workers: InPlaceWorker[] = [];
  private readonly options: { readonly idleMs: number } & InPlacePoolOptions;
  private readonly maxSize: number;
  private readonly probeEvery: number;
  /** Batches are spread over maxSize workers (the mount was found slow). */
  private spread = false;
  private sinceProbe = 0;
  /** Times the pool spread its batches, and came back to one worker (tests, benchmarks). */
  readonly changes = { spread: 0, narrowed: 0 };

  constructor(options: InPlacePoolOptions = {}) {
    this.options = { idleMs: DEFAULT_IDLE_MS, ...options };
    this.maxSize = options.size ?? options.maxSize ?? DEFAULT_MAX_SIZE;
    this.probeEvery = options.probeEvery ?? DEFAULT_PROBE_EVERY;
    for (const [name, v] of [
      ['size', this.maxSize],
      ['probeEvery', this.probeEvery],
    ] as const)
      if (!(Number.isInteger(v) && v >= 1))
        throw new RangeError(`in-place pool ${name} must be a whole number ≥ 1, not ${v}`);
  }

  /** Worker threads started so far (tests). */
  get started(): number {
    return this.workers.reduce((n, w) => n + w.starts, 0);
  }

  /** Workers running now (started on a write, ended after idleMs without one). */
  get running(): number {
    return this.workers.filter((w) => w.alive).length;
  }

  /** How many workers the next large batch is spread over. */
  get width(): number {
    if (this.options.size !== undefined) return this.options.size;
    return this.spread ? this.maxSize : 1;
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
    const adaptive = this.options.size === undefined;
    // While spread, now and then the first PROBE_ITEMS files of a batch are written by one
    // worker alone (its blocked time says whether the mount is still slow), the rest spread.
    if (adaptive && this.spread && ++this.sinceProbe >= this.probeEvery && items.length > PROBE_ITEMS) {
      this.sinceProbe = 0;
      const head = await this.writeShares(items.slice(0, PROBE_ITEMS), 1, true);
      return [...head, ...(await this.writeShares(items.slice(PROBE_ITEMS), this.width, false))];
    }
    return this.writeShares(items, this.width, adaptive);
  }

  /** `items` in contiguous shares over at most `width` workers; `learn` from a lone worker's time. */
  private async writeShares(
    items: readonly InPlaceItem[],
    width: number,
    learn: boolean,
  ): Promise<InPlaceResult[]> {
    const n = Math.max(1, Math.min(width, Math.floor(items.length / PER_WORKER_MIN)));
    while (this.workers.length < n) this.workers.push(new InPlaceWorker(this.options));
    // Contiguous shares: a folder's files stay together on one worker.
    const per = Math.ceil(items.length / n);
    const replies = await Promise.all(
      Array.from({ length: n }, (_, k) => {
        const share = items.slice(k * per, (k + 1) * per);
        return this.workers[k]!.run(share).then(
          (r): { reply: Reply; error?: undefined } => ({ reply: r }),
          (e: Error) => ({ error: e, count: share.length }),
        );
      }),
    );
    const first = replies[0]!;
    if (learn && n === 1 && items.length >= PER_WORKER_MIN && !first.error)
      this.learn(first.reply, items.length);
    const out: InPlaceResult[] = [];
    for (const r of replies) {
      if (r.error) {
        for (let i = 0; i < r.count; i++) out.push(r.error);
        continue;
      }
      for (const x of r.reply.results) {
        if ('st' in x) out.push(new WorkerStats(x.st));
        else if ('exists' in x) out.push('exists');
        else out.push(Object.assign(new Error(x.error.message), x.error));
      }
    }
    return out;
  }

  /** One worker wrote a batch of `count` files: spread the next ones if it was mostly blocked. */
  private learn(r: Reply, count: number): void {
    if (r.blockedNs === undefined) return;
    const slow = r.blockedNs / count >= SLOW_ITEM_MS * 1e6;
    if (slow && !this.spread) {
      this.spread = true;
      this.sinceProbe = 0;
      this.changes.spread += 1;
    } else if (!slow && this.spread) {
      this.spread = false;
      this.changes.narrowed += 1;
    }
  }
}

const pool = new InPlacePool(FIXED_SIZE !== undefined && inPlaceWorkersOn ? { size: FIXED_SIZE } : {});

/** `InPlacePool.writeMany` on the process's pool. */
export function writeInPlaceMany(items: readonly InPlaceItem[]): Promise<InPlaceResult[]> {
  return pool.writeMany(items);
}
