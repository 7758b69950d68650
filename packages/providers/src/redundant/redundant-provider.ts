/**
 * The redundant object tier (issue #17, HyRD): one Provider over a set of backend Providers.
 * Objects below `thresholdBytes` are replicated r ways on performance-class backends; larger
 * ones are striped RS(k, m) with @weft/reed-solomon-wasm, one fragment object per backend
 * (docs/formats/fragment.md). The namespace and the placement live in a placement store
 * (placement-store.ts: SQLite by default, store.ts; or one given, e.g. PostgreSQL shared by
 * several proxy instances); backends hold only immutable blobs under `.weft-redundant/`.
 *
 * Reads take a replica from the fastest available backend, or the k fastest fragments in
 * parallel, hedged (reading.ts). A backend that fails is marked down; writes go on, and
 * what it missed goes into the outage log, replayed in order when a probe finds it up again
 * (maintenance.ts, which also holds scrub and replacement); the backend set, its health and
 * measured speeds are backends.ts. Writes are object-write.ts. docs/redundancy.md for operators.
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import * as nodePath from 'node:path';
import { ReedSolomon } from '@weft/reed-solomon-wasm';
import { clampRange, throwIfAborted } from '../body.ts';
import { NotFoundError, isProviderError } from '../errors.ts';
import type { Features } from '../features.ts';
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
import { type BackendConfig, type BackendHealth, BackendSet } from './backends.ts';
import { writeObject } from './object-write.ts';
import type { BackendStats } from './planner.ts';
import type { ObjectRow, PlacementStore } from './placement-store.ts';
import { SqlitePlacementStore } from './store.ts';
import { readReplica, readStriped } from './reading.ts';

export type { BackendConfig, BackendHealth } from './backends.ts';

export const BLOB_DIR = '.weft-redundant';

export interface RedundantOptions {
  readonly backends: readonly BackendConfig[];
  /** Folder of the write spool, and of the placement store (placement.sqlite) unless `store` is given. */
  readonly dir: string;
  /**
   * The placement store (default: SQLite in `dir`). A shared one (PostgreSQL) lets several
   * processes serve one tier; then background work runs where `maintains()` says (the controller).
   */
  readonly store?: PlacementStore;
  /**
   * Objects smaller than this are replicated; the rest striped. Default 512 KiB, measured
   * (docs/redundancy.md "How the defaults were chosen", bench/redundant.bench.ts).
   */
  readonly thresholdBytes?: number;
  /** Replicas of a small object. Default 2. */
  readonly replicas?: number;
  /** RS(k, m). Default k = 3, m = 2 with five or more backends, else k = n − 1, m = 1. */
  readonly k?: number;
  readonly m?: number;
  /** Largest shard (bytes of one fragment per stripe). Default 1 MiB. */
  readonly maxShardBytes?: number;
  /** Start a spare fragment when a stripe is not in after this long. Default 2000 ms. */
  readonly hedgeAfterMs?: number;
  /** Probe down backends this often (and replay their logs when they answer). 0: never. Default 30 s. */
  readonly probeIntervalMs?: number;
  readonly name?: string;
}

export interface RedundantMetrics {
  hedgedReads: number;
  degradedReads: number;
  failedFragmentReads: number;
  corruptFragmentReads: number;
  loggedWrites: number;
  replayed: number;
}

export class RedundantProvider implements Provider {
  readonly name: string;
  readonly features: Features = {
    move: 'files-and-folders',
    copy: 'files-and-folders',
    changeFeed: false,
    conditionalWrite: true,
    rangeRead: true,
    caseSensitive: true,
    setModTime: true,
    maxSingleUploadBytes: Number.MAX_SAFE_INTEGER,
    hashAlgorithm: 'sha256',
    hashInListing: true,
    folders: 'real',
    notes: { changeFeed: 'not built yet in the redundant tier' },
  };
  readonly metrics: RedundantMetrics = {
    hedgedReads: 0,
    degradedReads: 0,
    failedFragmentReads: 0,
    corruptFragmentReads: 0,
    loggedWrites: 0,
    replayed: 0,
  };
  readonly store: PlacementStore;
  readonly thresholdBytes: number;
  readonly replicas: number;
  readonly k: number;
  readonly m: number;
  readonly maxShardBytes: number;
  readonly hedgeAfterMs: number;
  private readonly backends: BackendSet;
  private readonly codecs = new Map<string, Promise<ReedSolomon>>();
  /** Where a write of a stream of unknown length is spooled (object-write.ts). */
  readonly spoolDir: string;
  private timer: NodeJS.Timeout | undefined;
  private readonly replaying = new Map<string, Promise<void>>();
  private readonly writing = new Set<string>();
  /** Set by maintenance.ts: replays a backend's outage log after it came back. */
  onBackendUp: ((id: string) => Promise<void>) | undefined;
  /**
   * Whether this process runs the tier's background work (outage-log replay). Always on one
   * process; with a shared store the proxy points it at its controller role, so a log is
   * replayed by one instance (whose writes the store fences by the lease).
   */
  maintains: () => boolean = () => true;
  private readonly loading: Promise<void>[] = [];

  constructor(options: RedundantOptions) {
    const n = options.backends.length;
    this.thresholdBytes = options.thresholdBytes ?? 512 * 1024;
    this.replicas = options.replicas ?? 2;
    this.k = options.k ?? (n >= 5 ? 3 : n - 1);
    this.m = options.m ?? (n >= 5 ? 2 : 1);
    this.maxShardBytes = options.maxShardBytes ?? 1 << 20;
    this.hedgeAfterMs = options.hedgeAfterMs ?? 2000;
    const ids = new Set(options.backends.map((b) => b.id));
    if (ids.size !== n) throw new RangeError('redundant: backend ids must be distinct');
    if (!Number.isInteger(this.k) || !Number.isInteger(this.m) || this.k < 2 || this.m < 1)
      throw new RangeError(`redundant: RS(${this.k}, ${this.m}) needs k ≥ 2 and m ≥ 1`);
    if (this.k + this.m > n)
      throw new RangeError(
        `redundant: RS(${this.k}, ${this.m}) needs ${this.k + this.m} backends, have ${n}`,
      );
    if (!Number.isInteger(this.replicas) || this.replicas < 1 || this.replicas > n)
      throw new RangeError(`redundant: ${this.replicas} replicas need as many backends (have ${n})`);
    if (!Number.isInteger(this.thresholdBytes) || this.thresholdBytes < 1)
      throw new RangeError('redundant: thresholdBytes must be a positive integer');
    if (!Number.isInteger(this.maxShardBytes) || this.maxShardBytes < 1 || this.maxShardBytes > 0xffffffff)
      throw new RangeError('redundant: maxShardBytes must be 1..2^32−1');
    this.name = options.name ?? `redundant:${options.backends.map((b) => b.id).join('+')}`;
    this.store = options.store ?? SqlitePlacementStore.open(options.dir);
    this.backends = new BackendSet(this.store, `${BLOB_DIR}/probe`);
    this.spoolDir = nodePath.join(options.dir, 'spool');
    // Spool files of writes a crash interrupted: never committed, so nothing refers to them.
    rmSync(this.spoolDir, { recursive: true, force: true });
    for (const b of options.backends) this.addBackend(b);
    const every = options.probeIntervalMs ?? 30_000;
    if (every > 0) {
      this.timer = setInterval(() => void this.probe().catch(() => undefined), every);
      this.timer.unref();
    }
  }

  // ---- backends ----------------------------------------------------------------------

  addBackend(b: BackendConfig): void {
    this.loading.push(this.backends.add(b));
  }

  /** Resolves once the backends' recorded states (down since …) are read from the store. */
  async ready(): Promise<void> {
    await Promise.all(this.loading.splice(0));
  }

  /** Take a backend out of the set (after its fragments were rebuilt elsewhere). */
  dropBackend(id: string): Promise<void> {
    return this.backends.drop(id);
  }

  backendIds(): string[] {
    return this.backends.ids();
  }

  backend(id: string): Provider | undefined {
    return this.backends.get(id)?.provider;
  }

  isUp(id: string): boolean {
    return this.backends.up(id) !== undefined;
  }

  health(): Promise<BackendHealth[]> {
    return this.backends.health();
  }

  /** Note a backend failure: it counts as down until a probe finds it answering. */
  markDown(id: string): void {
    this.backends.markDown(id);
  }

  /** Ask every backend (or one) whether it answers; a backend that comes back has its log replayed. */
  probe(only?: string): Promise<void> {
    return this.backends.probe(only, (id) => this.replay(id));
  }

  /** Replay a backend's outage log (one replay per backend at a time; a second caller waits for it). */
  replay(id: string): Promise<void> {
    const hook = this.onBackendUp;
    if (!hook || !this.maintains()) return Promise.resolve();
    let running = this.replaying.get(id);
    if (!running) {
      running = hook(id).finally(() => this.replaying.delete(id));
      this.replaying.set(id, running);
    }
    return running;
  }

  stats(ids: readonly string[]): BackendStats[] {
    return this.backends.stats(ids);
  }

  /** A backend's own recent samples (empty until measured; `stats` assumes a default then). */
  measured(id: string): { latencyMs: readonly number[]; throughputBps: readonly number[] } {
    return this.backends.measured(id);
  }

  recordTransfer(id: string, bytes: number, ms: number): void {
    this.backends.recordTransfer(id, bytes, ms);
  }

  codec(k: number, m: number): Promise<ReedSolomon> {
    const key = `${k},${m}`;
    let c = this.codecs.get(key);
    if (!c) {
      c = ReedSolomon.create(k + m, k);
      this.codecs.set(key, c);
    }
    return c;
  }

  // ---- namespace -----------------------------------------------------------------------

  async *list(dir: string, options?: ListOptions): AsyncIterable<Entry> {
    const d = normalizePath(dir);
    throwIfAborted(options?.signal);
    for (const e of await this.store.list(d, options?.recursive ?? false)) yield e;
  }

  async stat(path: string, options?: { signal?: AbortSignal }): Promise<Entry> {
    const p = normalizeEntryPath(path);
    throwIfAborted(options?.signal);
    const e = await this.store.entry(p);
    if (!e) throw new NotFoundError(`${this.name}: nothing at ${p}`);
    return e;
  }

  async mkdir(path: string, options?: { signal?: AbortSignal }): Promise<void> {
    const p = normalizeEntryPath(path);
    throwIfAborted(options?.signal);
    await this.store.mkdirs(p, Date.now());
  }

  async remove(path: string, options?: RemoveOptions): Promise<void> {
    const p = normalizeEntryPath(path);
    throwIfAborted(options?.signal);
    await this.release(await this.store.remove(p, options?.ifRevision));
  }

  async move(from: string, to: string, options?: TransferOptions): Promise<Entry> {
    return this.transfer(from, to, options, 'move');
  }

  async copy(from: string, to: string, options?: TransferOptions): Promise<Entry> {
    return this.transfer(from, to, options, 'copy');
  }

  private async transfer(
    from: string,
    to: string,
    options: TransferOptions | undefined,
    mode: 'move' | 'copy',
  ): Promise<Entry> {
    const f = normalizeEntryPath(from);
    const t = normalizeEntryPath(to);
    throwIfAborted(options?.signal);
    const { entry, released } = await this.store.transfer(f, t, options?.overwrite ?? false, mode);
    await this.release(released);
    return entry;
  }

  /** Delete the blobs of objects no entry references; a down backend gets a logged delete. */
  async release(objects: readonly ObjectRow[]): Promise<void> {
    for (const o of objects) {
      for (const loc of await this.store.locations(o.id)) {
        const key = blobKey(o, loc.slot);
        const b = this.backends.up(loc.backend);
        if (b && loc.state !== 'owed') {
          try {
            await b.provider.remove(key);
            continue;
          } catch (e) {
            if (e instanceof NotFoundError) continue;
            this.markDown(loc.backend);
          }
        }
        await this.store.logAppend(loc.backend, 'delete', o.id, loc.slot, key);
      }
      await this.store.forgetObject(o.id);
    }
  }

  // ---- write ---------------------------------------------------------------------------

  async write(path: string, body: Body, options: WriteOptions = {}): Promise<Entry> {
    const id = randomBytes(16).toString('hex');
    // Its blobs are stored before the commit records them: the orphan sweep leaves them alone.
    this.writing.add(id);
    try {
      return await writeObject(this, id, path, body, options);
    } finally {
      this.writing.delete(id);
    }
  }

  /** Whether object `id` is being written by this process (stored, not yet committed). */
  isWriting(id: string): boolean {
    return this.writing.has(id);
  }

  /** Store one blob; false (and the backend marked down) when it could not. Aborts propagate as false too. */
  async putBlob(
    backend: string,
    key: string,
    body: Body,
    size: number,
    sha256: string | undefined,
    signal?: AbortSignal,
  ): Promise<boolean> {
    const b = this.backends.up(backend);
    if (!b) return false;
    const started = Date.now();
    try {
      // A fragment (no sha256): the tier checks every shard against its placement record on
      // read and scrub, so the backend need not hash it again (issue #17).
      await b.provider.write(key, body, { size, sha256, signal, callerVerifies: sha256 === undefined });
      this.recordTransfer(backend, size, Date.now() - started);
      return true;
    } catch (e) {
      if (signal?.aborted) return false;
      if (!isProviderError(e) || e.code !== 'InvalidArgument') this.markDown(backend);
      return false;
    }
  }

  // ---- read ----------------------------------------------------------------------------

  async read(path: string, options: ReadOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    const p = normalizeEntryPath(path);
    throwIfAborted(options.signal);
    const id = await this.store.objectOf(p);
    const obj = id === undefined ? undefined : await this.store.object(id);
    if (!obj) throw new NotFoundError(`${this.name}: no file at ${p}`);
    const { start, end } = clampRange(obj.size, options.offset, options.length);
    const locs = (await this.store.locations(obj.id)).filter((l) => l.state === 'ok');
    if (obj.layout === 'replicated') {
      const data = await readReplica(this, obj, locs, options.signal);
      return once(data.subarray(start, end));
    }
    if (start >= end) return once(Buffer.alloc(0));
    return readStriped(this, obj, locs, start, end, options.signal);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.ready().catch(() => undefined);
    await this.backends.close();
    await this.store.close();
  }
}

/** Where slot `slot` of an object lives on its backend. */
export function blobKey(o: { id: string; layout: 'replicated' | 'striped' }, slot: number): string {
  return `${BLOB_DIR}/${o.id.slice(0, 2)}/${o.id}.${o.layout === 'replicated' ? 'r' : 'f'}${slot}`;
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  if (bytes.byteLength > 0) yield bytes;
}
