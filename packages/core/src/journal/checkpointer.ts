/**
 * The journal's WAL checkpoints, off the event loop (issue #16: the agent answers its UI
 * within 100 ms throughout). In WAL mode with synchronous = NORMAL a commit appends to the
 * WAL and syncs nothing; the sync is in the checkpoint, which SQLite runs in the committing
 * connection once the WAL passes 1,000 pages — on the agent's event loop, where it held the
 * loop 234 ms (13 ms of CPU, the rest the disk's sync) in a 1,000,000-file first scan.
 *
 * So the agent's connection checkpoints nothing itself (wal_autocheckpoint = 0) and a worker
 * thread with a connection of its own does it: every `everyMs` while the database changed
 * (PRAGMA data_version) it runs a PASSIVE checkpoint, which copies what it can without
 * waiting on the writer; the writer restarts the WAL from its start on its next commit
 * once a checkpoint has copied it all. A crash at any point is SQLite's ordinary recovery.
 *
 * Should the worker fail to start or die, the agent's connection checkpoints itself again
 * (wal_autocheckpoint back to SQLite's 1,000 pages), so the WAL never grows without bound.
 * The worker's code is plain JavaScript given as a string (eval) that requires only
 * node:worker_threads and better-sqlite3 by the path this module resolved, so it runs the
 * same under tsx, vitest, the esbuild bundle and Electron.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';

/** SQLite's own default auto-checkpoint, in pages (restored when the worker is gone). */
const SQLITE_AUTOCHECKPOINT = 1000;
/** How often the worker looks for changes to checkpoint (ms). */
export const CHECKPOINT_EVERY_MS = 500;

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.module);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('busy_timeout = 0');
db.pragma('cache_size = -256');
let seen = -1;
function tick() {
  try {
    const version = db.pragma('data_version', { simple: true });
    if (version !== seen) {
      const r = db.pragma('wal_checkpoint(PASSIVE)')[0];
      seen = version;
      parentPort.postMessage({ type: 'checkpoint', pages: r.checkpointed, wal: r.log, busy: r.busy });
    }
  } catch (e) {
    // SQLITE_BUSY and the like: the next tick tries again.
    parentPort.postMessage({ type: 'skipped', message: String(e && e.message) });
  }
}
const timer = setInterval(tick, workerData.everyMs);
parentPort.on('message', (m) => {
  if (m !== 'close') return;
  clearInterval(timer);
  try { db.close(); } catch {}
  parentPort.close();
});
parentPort.postMessage({ type: 'ready' });
`;

/** What the checkpointer did (tests). */
export interface CheckpointStats {
  /** Checkpoints the worker ran. */
  checkpoints: number;
  /** Pages they copied into the database. */
  pages: number;
  /** Ticks that could not checkpoint (busy). */
  skipped: number;
  /** Whether the worker is running (false: the agent's connection checkpoints itself). */
  running: boolean;
  /** The worker thread has ended (or never started): nothing of it holds the database. */
  ended: boolean;
}

export class Checkpointer {
  readonly stats: CheckpointStats = { checkpoints: 0, pages: 0, skipped: 0, running: false, ended: true };
  private worker: Worker | undefined;
  private closed = false;
  private readyWaiters: (() => void)[] = [];

  private constructor(private readonly db: Database.Database) {}

  /**
   * Start checkpointing `db` (file `file`) in a worker thread. `module` is what the worker
   * requires for better-sqlite3 (tests give a wrong one to see the fallback).
   */
  static start(
    db: Database.Database,
    file: string,
    o: { readonly everyMs?: number; readonly module?: string } = {},
  ): Checkpointer {
    const c = new Checkpointer(db);
    let module: string;
    try {
      module = o.module ?? createRequire(import.meta.url).resolve('better-sqlite3');
    } catch {
      return c; // the connection keeps checkpointing itself
    }
    let w: Worker;
    try {
      w = new Worker(WORKER_SOURCE, {
        eval: true,
        workerData: { module, file, everyMs: o.everyMs ?? CHECKPOINT_EVERY_MS },
        resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2 },
      });
    } catch {
      return c;
    }
    w.unref();
    c.worker = w;
    c.stats.ended = false;
    w.once('exit', () => {
      c.stats.ended = true;
    });
    w.on('message', (m: { type: string; pages?: number }) => {
      if (m.type === 'ready') {
        if (c.closed || c.worker !== w) return;
        // From here on, the worker's: the agent's connection stops checkpointing.
        db.pragma('wal_autocheckpoint = 0');
        c.stats.running = true;
        for (const r of c.readyWaiters.splice(0)) r();
      } else if (m.type === 'checkpoint') {
        c.stats.checkpoints += 1;
        c.stats.pages += Math.max(0, m.pages ?? 0);
      } else if (m.type === 'skipped') c.stats.skipped += 1;
    });
    const gone = (): void => {
      if (c.worker !== w) return;
      c.worker = undefined;
      c.fallBack();
    };
    w.on('error', gone);
    w.on('exit', gone);
    return c;
  }

  /** Resolves once the worker has taken over (or at once if it never will). Tests. */
  ready(): Promise<void> {
    if (this.stats.running || !this.worker) return Promise.resolve();
    return new Promise((resolve) => this.readyWaiters.push(resolve));
  }

  /** Tests: the worker ends as a crash would end it (the fallback takes over). */
  async killWorker(): Promise<void> {
    await this.worker?.terminate();
  }

  /** The worker is gone: the agent's connection checkpoints itself again. */
  private fallBack(): void {
    this.stats.running = false;
    for (const r of this.readyWaiters.splice(0)) r();
    if (!this.closed && this.db.open) this.db.pragma(`wal_autocheckpoint = ${SQLITE_AUTOCHECKPOINT}`);
  }

  /**
   * Stop the worker (its connection closes; the journal's close checkpoints what is left).
   * Resolves once the worker has ended — its connection closed, so nothing of it touches the
   * journal's folder any more (a worker still starting when an engine stopped opened the
   * database after the engine's folder was being removed: ENOTEMPTY in a test's cleanup).
   */
  close(): Promise<void> {
    if (this.closed) return this.ended;
    this.closed = true;
    const w = this.worker;
    this.worker = undefined;
    this.stats.running = false;
    for (const r of this.readyWaiters.splice(0)) r();
    // The worker closes its connection after the checkpoint under way, if any, and ends (it
    // is unref'd: it never holds the process).
    if (w) {
      this.ended = new Promise<void>((resolve) => w.once('exit', () => resolve()));
      w.postMessage('close');
    }
    return this.ended;
  }

  private ended: Promise<void> = Promise.resolve();
}
