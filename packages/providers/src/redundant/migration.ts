/**
 * Moving an existing single-backend store into the redundant tier (issue #17,
 * docs/redundancy.md "Switching an existing store"). A `MigratingRedundantProvider` is the
 * redundant tier with the old store (`legacy`) behind it: what is not in the tier yet is
 * read, listed and stat'ed from the old store, so everything stays served; new writes go
 * to the tier; a background pass copies each old object into the tier (checked against
 * its size and SHA-256) and then deletes it from the old store. Each object moves under
 * a per-path lock shared with writes and deletes, so a delete or an overwrite racing the
 * move wins, and the move can stop at any point (a crash, a restart) and resume: the old
 * store's listing is the work left.
 */
import { KeyedMutex } from '../keyed-mutex.ts';
import { AlreadyExistsError, NotFoundError } from '../errors.ts';
import { normalizeEntryPath, normalizePath } from '../paths.ts';
import type {
  Body,
  Entry,
  ListOptions,
  Provider,
  ReadOptions,
  RemoveOptions,
  TransferOptions,
  WriteOptions,
} from '../provider.ts';
import { throwIfAborted } from '../body.ts';
import { RedundantProvider, type RedundantOptions } from './redundant-provider.ts';

export interface MigrationStatus {
  readonly state: 'idle' | 'running' | 'done' | 'failed';
  /** Objects moved into the tier since this process started. */
  readonly moved: number;
  readonly bytes: number;
  /** Objects found in the old store by the last pass's listing (its work). */
  readonly found: number;
  readonly error?: string;
}

export interface MigrationOptions {
  readonly signal?: AbortSignal;
  readonly onProgress?: (s: MigrationStatus) => void;
}

export class MigratingRedundantProvider extends RedundantProvider {
  private readonly locks = new KeyedMutex();
  private status: MigrationStatus = { state: 'idle', moved: 0, bytes: 0, found: 0 };
  private running: Promise<MigrationStatus> | undefined;
  private readonly stop = new AbortController();

  constructor(
    options: RedundantOptions,
    /** The store the objects come from; emptied as they move. */
    readonly legacy: Provider,
  ) {
    super(options);
  }

  migration(): MigrationStatus {
    return this.status;
  }

  override async stat(path: string, options?: { signal?: AbortSignal }): Promise<Entry> {
    try {
      return await super.stat(path, options);
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
      try {
        return await this.legacy.stat(path, options);
      } catch (e2) {
        if (!(e2 instanceof NotFoundError)) throw e2;
        // Moved between the two looks.
        return super.stat(path, options);
      }
    }
  }

  override async read(path: string, options: ReadOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    try {
      return await super.read(path, options);
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
      try {
        return await this.legacy.read(path, options);
      } catch (e2) {
        if (!(e2 instanceof NotFoundError)) throw e2;
        return super.read(path, options);
      }
    }
  }

  override async *list(dir: string, options?: ListOptions): AsyncIterable<Entry> {
    const seen = new Map<string, Entry>();
    let found = false;
    for (const source of [
      (d: string) => super.list(d, options),
      (d: string) => this.legacy.list(d, options),
    ]) {
      try {
        for await (const e of source(normalizePath(dir))) if (!seen.has(e.path)) seen.set(e.path, e);
        found = true;
      } catch (e) {
        if (!(e instanceof NotFoundError)) throw e;
      }
    }
    if (!found) throw new NotFoundError(`${this.name}: no folder ${dir}`);
    yield* [...seen.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  override async write(path: string, body: Body, options: WriteOptions = {}): Promise<Entry> {
    const p = normalizeEntryPath(path);
    return this.locks.run([p], async () => {
      const old = await this.legacyEntry(p);
      if (old && options.ifNotExists && !(await this.inTier(p)))
        throw new AlreadyExistsError(`${this.name}: ${p} exists`);
      const entry = await super.write(p, body, options);
      // The old store's copy is superseded: it must not come back when this one is deleted.
      if (old) await this.legacy.remove(p).catch(ignoreNotFound);
      return entry;
    });
  }

  override async remove(path: string, options?: RemoveOptions): Promise<void> {
    const p = normalizeEntryPath(path);
    await this.locks.run([p], async () => {
      const inTier = await this.inTier(p);
      if (inTier) await super.remove(p, options);
      try {
        await this.legacy.remove(p, inTier ? { signal: options?.signal } : options);
      } catch (e) {
        if (!(e instanceof NotFoundError) || !inTier) throw e;
      }
    });
  }

  override async move(from: string, to: string, options?: TransferOptions): Promise<Entry> {
    await this.migrateOne(normalizeEntryPath(from));
    return super.move(from, to, options);
  }

  override async copy(from: string, to: string, options?: TransferOptions): Promise<Entry> {
    await this.migrateOne(normalizeEntryPath(from));
    return super.copy(from, to, options);
  }

  /**
   * Move one object from the old store into the tier (only the old copy deleted when the
   * tier has a newer one). Returns its size, or undefined when the old store has no file there.
   */
  async migrateOne(path: string, signal?: AbortSignal): Promise<number | undefined> {
    return this.locks.run([path], async () => {
      const old = await this.legacyEntry(path);
      if (!old || old.kind !== 'file') return undefined;
      if (!(await this.inTier(path))) {
        const sha256 = old.hash?.algorithm === 'sha256' ? old.hash.value : undefined;
        await super.write(path, () => this.legacyStream(path, signal), {
          size: old.size,
          modifiedMs: old.modifiedMs,
          ifNotExists: true,
          ...(sha256 ? { sha256 } : {}),
          ...(signal ? { signal } : {}),
        });
      }
      await this.legacy.remove(path, { signal }).catch(ignoreNotFound);
      return old.size;
    });
  }

  /**
   * One pass over the old store: every object in it moved into the tier. Resolves with the
   * status ('done' when the old store was emptied); a failure leaves the rest for the next
   * pass. One pass at a time (a second caller shares it).
   */
  migrate(options: MigrationOptions = {}): Promise<MigrationStatus> {
    this.running ??= this.pass(options).finally(() => (this.running = undefined));
    return this.running;
  }

  /**
   * Run passes in the background until the old store is empty, `everyMs` apart after a
   * failure. With a shared placement store only the instance that `maintains()` the tier
   * (the controller) runs passes; the others look again every `everyMs`.
   */
  startMigration(everyMs = 60_000): void {
    const loop = async (): Promise<void> => {
      while (!this.stop.signal.aborted) {
        const s = this.maintains() ? await this.migrate({ signal: this.stop.signal }) : undefined;
        if (s?.state === 'done' || this.stop.signal.aborted) return;
        await new Promise<void>((r) => {
          const t = setTimeout(r, everyMs);
          t.unref();
          this.stop.signal.addEventListener('abort', () => (clearTimeout(t), r()), { once: true });
        });
      }
    };
    void loop();
  }

  override async close(): Promise<void> {
    this.stop.abort();
    await this.running?.catch(() => undefined);
    await super.close();
    await this.legacy.close?.();
  }

  private async pass(options: MigrationOptions): Promise<MigrationStatus> {
    const signal = options.signal;
    const set = (s: Partial<MigrationStatus>): void => {
      this.status = { ...this.status, ...s };
      options.onProgress?.(this.status);
    };
    set({ state: 'running', found: 0 });
    try {
      const paths: string[] = [];
      try {
        for await (const e of this.legacy.list('', { recursive: true, signal }))
          if (e.kind === 'file') paths.push(e.path);
      } catch (e) {
        if (!(e instanceof NotFoundError)) throw e;
      }
      set({ found: paths.length });
      for (const p of paths) {
        throwIfAborted(signal);
        const bytes = await this.migrateOne(p, signal);
        if (bytes !== undefined) set({ moved: this.status.moved + 1, bytes: this.status.bytes + bytes });
      }
      set({ state: 'done' });
    } catch (e) {
      set({ state: 'failed', error: e instanceof Error ? e.message : String(e) });
    }
    return this.status;
  }

  private async inTier(path: string): Promise<boolean> {
    try {
      await super.stat(path);
      return true;
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  private async legacyEntry(path: string): Promise<Entry | undefined> {
    try {
      return await this.legacy.stat(path);
    } catch (e) {
      if (e instanceof NotFoundError) return undefined;
      throw e;
    }
  }

  private async *legacyStream(path: string, signal?: AbortSignal): AsyncIterable<Uint8Array> {
    yield* await this.legacy.read(path, signal ? { signal } : {});
  }
}

function ignoreNotFound(e: unknown): void {
  if (!(e instanceof NotFoundError)) throw e;
}
