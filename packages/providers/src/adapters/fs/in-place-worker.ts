/**
 * The in-place writes of a logged batch (write-many.ts writeInPlace) done off the event loop
 * (issue #16): open(O_EXCL), write, futimes, fstat and close of each new file are five
 * thread-pool round trips, each with its callback and promise on the event loop — ~95 µs of
 * the proxy's single thread per small file of a bundle. Here a few worker threads make the
 * same system calls synchronously, one message per share of the batch each way.
 *
 * The worker's code is plain JavaScript given as a string (`eval`), so it runs the same under
 * tsx, vitest and a build. The workers are started on first use and unref'd (they never keep
 * a process alive). Nothing changes on disk compared with writeInPlace: the same calls in the
 * same order per file, O_EXCL so that an existing file is left to the temp-and-rename path.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
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
  'atimeMs', 'mtimeMs', 'ctimeMs', 'birthtimeMs', 'atimeNs', 'mtimeNs', 'ctimeNs', 'birthtimeNs'];
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
  const results = m.items.map((it) => one({ ...it, bytes: m.all.subarray(it.at, it.at + it.length) }));
  parentPort.postMessage({ id: m.id, results });
});
`;

interface Reply {
  readonly id: number;
  readonly results: readonly (
    | { st: Record<string, bigint> }
    | { exists: true }
    | { error: { message: string; code?: string; syscall?: string } }
  )[];
}

/**
 * Workers of the pool (a share of a batch each): 4, the thread pool's size, so as many system
 * calls are in flight as before — they spend most of their time blocked (open(2) waits on the
 * folder and the journal: ~0.7 ms each in the 10,029-file bench while the log syncs), not on a core.
 */
const POOL_SIZE = 4;
/** Below this many files the batch is not worth splitting across workers. */
const PER_WORKER_MIN = 16;

/** A real BigIntStats's prototype: the worker's fields become a BigIntStats again (isDirectory…). */
const BIGINT_STATS_PROTO = Object.getPrototypeOf(fs.lstatSync(os.tmpdir(), { bigint: true })) as object;

class InPlaceWorker {
  private worker: Worker | undefined;
  private nextId = 0;
  private readonly waiting = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();

  run(items: readonly InPlaceItem[]): Promise<Reply> {
    const w = this.start();
    const id = this.nextId++;
    return new Promise<Reply>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      if (this.waiting.size === 1) w.ref();
      // The share's bytes copied into one buffer moved to the worker: views of a bundle's
      // buffer would each clone that whole buffer with them.
      const all = new Uint8Array(items.reduce((n, it) => n + it.bytes.byteLength, 0));
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
      w.postMessage({ id, all, items: list }, [all.buffer]);
    });
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(WORKER_SOURCE, { eval: true });
    w.unref();
    w.on('message', (r: Reply) => {
      const waiter = this.waiting.get(r.id);
      this.waiting.delete(r.id);
      if (this.waiting.size === 0) w.unref();
      waiter?.resolve(r);
    });
    const fail = (e: Error): void => {
      if (this.worker === w) this.worker = undefined;
      const all = [...this.waiting.values()];
      this.waiting.clear();
      for (const x of all) x.reject(e);
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`in-place write worker exited (${code})`)));
    this.worker = w;
    return w;
  }
}

const pool: InPlaceWorker[] = [];

/**
 * Write each item as a new file where it belongs (O_EXCL), its bytes and time, and take its
 * stat on the open descriptor; results in item order. A file that fails is removed again.
 */
export async function writeInPlaceMany(items: readonly InPlaceItem[]): Promise<InPlaceResult[]> {
  if (items.length === 0) return [];
  const n = Math.max(1, Math.min(POOL_SIZE, Math.floor(items.length / PER_WORKER_MIN)));
  while (pool.length < n) pool.push(new InPlaceWorker());
  // Contiguous shares: a folder's files stay together on one worker.
  const per = Math.ceil(items.length / n);
  const replies = await Promise.all(
    Array.from({ length: n }, (_, k) => pool[k]!.run(items.slice(k * per, (k + 1) * per))),
  );
  const out: InPlaceResult[] = [];
  for (const r of replies)
    for (const x of r.results) {
      if ('st' in x) out.push(Object.assign(Object.create(BIGINT_STATS_PROTO) as fs.BigIntStats, x.st));
      else if ('exists' in x) out.push('exists');
      else out.push(Object.assign(new Error(x.error.message), x.error));
    }
  return out;
}
