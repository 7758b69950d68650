/**
 * Relay cache (HyCloud §III-B): large objects are staged from the object tier into a
 * bounded directory on the filesystem tier and streamed to clients from there, with Range
 * support. Least recently used copies are evicted when the total exceeds the bound; a copy
 * being read is pinned. Concurrent requests for the same object share one staging.
 *
 * The books (which copies exist, recency, pins) are a RelayBook (relay-book.ts): in memory
 * when this process owns the directory, on PostgreSQL when several proxy instances share the
 * filesystem tier — then a copy staged by one is a hit for all, the bound is the directory's,
 * and no instance evicts a copy another is reading.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { createWriteStream } from 'node:fs';
import type { Provider } from '@weft/providers';
import { LocalRelayBook, type RelayBook, type RelayEntry } from './relay-book.ts';

export interface RelayStats {
  hits: number;
  misses: number;
  bytes: number;
  files: number;
}

export interface RelayCacheOptions {
  readonly onStaged?: (bytes: number, ms: number) => void;
  /** The books; default in memory (this process owns the directory). */
  readonly book?: RelayBook;
  /** How often this process renews its pins in a shared book. Default 10 s. */
  readonly renewMs?: number;
  /** Pins not renewed for this long (their holder died) stop counting. Default 60 s. */
  readonly staleMs?: number;
  readonly now?: () => number;
}

/** Files a crash left behind: a staging still unfinished after an hour, a copy never recorded after ten minutes. */
const TMP_SWEEP_MS = 3600_000;
const UNRECORDED_SWEEP_MS = 600_000;

export class RelayCache {
  private readonly staging = new Map<string, Promise<RelayEntry>>();
  private readonly book: RelayBook;
  /** This process in the book's pins. */
  private readonly holder = randomUUID();
  private readonly now: () => number;
  private readonly staleMs: number;
  /** The book's changes from this process, in call order (a release before the next eviction). */
  private chain: Promise<unknown> = Promise.resolve();
  private held = 0;
  private renewTimer: NodeJS.Timeout | undefined;
  readonly stats: RelayStats = { hits: 0, misses: 0, bytes: 0, files: 0 };

  constructor(
    private readonly dir: string,
    private readonly maxBytes: number,
    private readonly objects: Provider,
    private readonly o: RelayCacheOptions = {},
  ) {
    this.book = o.book ?? new LocalRelayBook();
    this.now = o.now ?? Date.now;
    this.staleMs = o.staleMs ?? 60_000;
  }

  async init(): Promise<void> {
    if (!this.book.shared) {
      // Anything left from a previous run is only a cache: start empty.
      await fsp.rm(this.dir, { recursive: true, force: true });
      await fsp.mkdir(this.dir, { recursive: true, mode: 0o700 });
      return;
    }
    await fsp.mkdir(this.dir, { recursive: true, mode: 0o700 });
    // Shared with other instances: keep every recorded copy; sweep what a crash left.
    const recorded = await this.book.files();
    const now = this.now();
    for (const name of await fsp.readdir(this.dir)) {
      if (recorded.has(name)) continue;
      const age = await fsp.stat(nodePath.join(this.dir, name)).then(
        (s) => now - s.mtimeMs,
        () => -1,
      );
      if (age > (name.startsWith('.tmp-') ? TMP_SWEEP_MS : UNRECORDED_SWEEP_MS))
        await fsp.rm(nodePath.join(this.dir, name), { force: true });
    }
    const timer = setInterval(() => {
      if (this.held > 0) void this.book.renew(this.holder, this.now()).catch(() => undefined);
    }, this.o.renewMs ?? 10_000);
    timer.unref();
    this.renewTimer = timer;
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => undefined);
    return run;
  }

  /**
   * Pin the object's local copy (staging it if needed) and return its file; call
   * `release()` when done reading.
   */
  async acquire(sha256: string, key: string, size: number): Promise<{ file: string; release: () => void }> {
    let counted = false;
    for (let attempt = 0; ; attempt++) {
      let entry = await this.serial(() => this.book.pin(sha256, this.holder, this.now()));
      if (entry && !(await exists(this.path(entry)))) {
        // Recorded, but its file is gone (removed by hand, or another directory): stage again.
        const gone = entry;
        await this.serial(async () => {
          await this.book.unpin(sha256, this.holder);
          await this.book.drop(gone);
        });
        entry = undefined;
      }
      if (entry) {
        if (!counted) this.stats.hits += 1;
        return this.handle(entry);
      }
      let pending = this.staging.get(sha256);
      if (pending) {
        if (!counted) this.stats.hits += 1;
        counted = true;
        // Pinned for its stager: pin it for this reader too (again, unless evicted meanwhile).
        await pending.catch(() => undefined);
        if (attempt < 3) continue;
      }
      if (!counted) this.stats.misses += 1;
      counted = true;
      pending = this.stage(sha256, key, size).finally(() => this.staging.delete(sha256));
      this.staging.set(sha256, pending);
      return this.handle(await pending);
    }
  }

  private path(e: RelayEntry): string {
    return nodePath.join(this.dir, e.file);
  }

  private handle(entry: RelayEntry): { file: string; release: () => void } {
    this.held += 1;
    let released = false;
    return {
      file: this.path(entry),
      release: () => {
        if (released) return;
        released = true;
        this.held -= 1;
        void this.serial(() => this.book.unpin(entry.sha256, this.holder))
          .then(() => this.evict())
          .catch(() => undefined);
      },
    };
  }

  /** Stage a copy; it comes back recorded and pinned for this process. */
  private async stage(sha256: string, key: string, size: number): Promise<RelayEntry> {
    const started = performance.now();
    const name = `${sha256}.${randomBytes(6).toString('hex')}`;
    const file = nodePath.join(this.dir, name);
    const tmp = nodePath.join(this.dir, `.tmp-${randomBytes(8).toString('hex')}`);
    try {
      const body = await this.objects.read(key);
      await pipeline(Readable.from(body), createWriteStream(tmp, { mode: 0o600 }));
      const st = await fsp.stat(tmp);
      if (st.size !== size) throw new Error(`object ${sha256} has ${st.size} bytes, expected ${size}`);
      await fsp.rename(tmp, file);
    } catch (e) {
      await fsp.rm(tmp, { force: true });
      throw e;
    }
    this.o.onStaged?.(size, performance.now() - started);
    const entry = await this.serial(() =>
      this.book.add({ sha256, file: name, size }, this.holder, this.now()),
    );
    // Another instance recorded a copy of the same object first: use that one.
    if (entry.file !== name) await fsp.rm(file, { force: true });
    await this.evict();
    return entry;
  }

  private async evict(): Promise<void> {
    const victims = await this.serial(() => this.book.evict(this.maxBytes, this.now() - this.staleMs));
    for (const v of victims) await fsp.rm(this.path(v), { force: true });
    const t = await this.book.totals();
    this.stats.bytes = t.bytes;
    this.stats.files = t.files;
  }

  /** Drop an object's copy (after GC deleted the object). */
  async forget(sha256: string): Promise<void> {
    const e = await this.serial(() => this.book.forget(sha256, this.now() - this.staleMs));
    if (e) await fsp.rm(this.path(e), { force: true });
  }

  /** Whether some copy of the object is staged (by this or, with a shared book, another instance). */
  has(sha256: string): Promise<boolean> {
    return this.book.has(sha256);
  }

  async close(): Promise<void> {
    if (this.renewTimer) clearInterval(this.renewTimer);
    await this.chain;
    await this.book.close();
  }
}

async function exists(file: string): Promise<boolean> {
  return fsp.access(file).then(
    () => true,
    () => false,
  );
}
