/**
 * The sync engine for one folder: watcher → scanner → journal/queue → push to the proxy;
 * proxy change feed → decisions → atomic local writes. One sync pass runs at a time
 * (pull, then scan, then push), so local and remote changes never race each other.
 *
 * Safety: every local write is temp + fsync + rename; every replaced or deleted local file
 * goes to the trash first; a delete of more than the mass-delete threshold pauses the
 * folder until the person confirms; a conflict keeps both versions.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { deflateRawSync } from 'node:zlib';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { caseFoldKey } from '@weft/providers/paths';
import {
  delta as rsyncDelta,
  estimateEliminationRatios,
  patch as rsyncPatch,
  signature as rsyncSignature,
} from '@weft/rsync-wasm';
import { openOldFile } from '@weft/rsync-wasm/node';
import {
  type BundleEntry,
  type ChangeRecord,
  type EntryInfo,
  type FileOp,
  MAX_BLOCK_PAYLOAD,
  MAX_BUNDLE_BYTES,
  type OpResult,
  BUNDLE_OVERHEAD,
  bundleEntrySize,
  encodeBundle,
  encodeDeltaContainer,
  encodeTransferBlock,
} from '@weft/wire';
import {
  CANDIDATE_BLOCK_SIZES,
  CompressionAdvisor,
  RateEstimator,
  updateHistory,
  chooseBlockSize,
  deltaPays,
  initialHistory,
  type BlockSizeHistory,
} from './adaptive.ts';
import { BoundedTasks } from './bounded-tasks.ts';
import { conflictCopyPath } from './conflict-name.ts';
import { LocalMerkle, findDivergence } from './consistency.ts';
import { decide } from './decisions.ts';
import { IgnoreRules } from './ignore-rules.ts';
import { type FileRow, Journal, SMUDGED_MTIME } from './journal/journal.ts';
import { DisposableStore, type Disposable, toDisposable } from './lifecycle.ts';
import { PARTIAL_PREFIX, Trash, atomicWrite, sha256File, sweepPartials } from './local-fs.ts';
import {
  LocalPaths,
  type PathRules,
  UnsafeLocalPathError,
  describeEncoding,
  hostPathRules,
} from './local-path.ts';
import type { Op } from './ops.ts';
import { OfflineError, RemoteError } from './remote/proxy-client.ts';
import type { RemoteStore } from './remote/remote-store.ts';
import { privateDir } from './private-file.ts';
import { ScanStopped, enqueueScan, scan } from './scanner.ts';
import { type StorageTimings, StorageWatch, isQuotaExceeded } from './storage-usage.ts';
import { type FolderStatus, StatusModel } from './status.ts';
import { FolderWatcher } from './watcher.ts';

export interface EngineOptions {
  /** The synced folder. */
  readonly folder: string;
  /** Where the journal and trash live (never inside the folder). */
  readonly stateDir: string;
  /** The server side: a ProxyClient, or an in-memory store in tests. */
  readonly client: RemoteStore;
  readonly deviceName: string;
  /** Files below this go in bundles. Default 2 MiB (HyCloud Fig. 18). */
  readonly smallFileBytes?: number;
  /** Settle time for files being written. Default 1000 ms. */
  readonly settleMs?: number;
  /** Watch the folder (default true); tests may drive syncNow() instead. */
  readonly watch?: boolean;
  /** Pause and ask when one pass would delete more than this share of files… (default 0.5) */
  readonly massDeleteFraction?: number;
  /** …and more than this many files (default 1000, and at least 10). */
  readonly massDeleteCount?: number;
  /** Extra ignore patterns on top of the defaults. */
  readonly ignore?: readonly string[];
  /** Blocks of a large upload in flight at once. Default 4. */
  readonly blocksInFlight?: number;
  /** Bytes/s between the server's object tier and filesystem tier (r_t of HyCloud Eq. 2). Default 100 MiB/s. */
  readonly serverTierRate?: number;
  /** Quiet time after a feed notification before pulling. Default 250 ms. */
  readonly feedDebounceMs?: number;
  /** Listen to the server's live feed (default true); without it, passes run only when asked. */
  readonly liveFeed?: boolean;
  /** The folder's filesystem folds case (macOS, Windows). Default: probed at open. */
  readonly caseInsensitive?: boolean;
  /** Retry interval while offline. Default 2000 ms. */
  readonly offlineRetryMs?: number;
  readonly now?: () => number;
  /** Offline longer than this (ms) and the reconnect runs the consistency check. Default 10 min. */
  readonly longDisconnectMs?: number;
  /** Debug hook: told every remote change applied, decision taken and operation sent. */
  readonly trace?: (event: string, detail: unknown) => void;
  /**
   * Whose filesystem rules name the local files (default: this host's). Tests use `win32`
   * on Linux to show what a Windows device writes (see local-path.ts).
   */
  readonly pathRules?: PathRules;
  /** When Weft storage usage is read, and re-read while it is full (storage-usage.ts). */
  readonly storageTimings?: Partial<StorageTimings>;
}

/** The status message of a device whose token was revoked (removed from its account). */
export const DEVICE_REMOVED_MESSAGE = 'This computer was removed from your Weft account';
/** The status message when the server does not know this device's token at all. */
export const DEVICE_UNKNOWN_MESSAGE =
  'The Weft server no longer recognises this computer; connect it again under Accounts';

export class Engine implements Disposable {
  readonly status: StatusModel;
  readonly journal: Journal;
  /** Weft storage usage, and whether it is full (uploads wait then; storage-usage.ts). */
  readonly storage: StorageWatch;
  private readonly store = new DisposableStore();
  private readonly ignore: IgnoreRules;
  private readonly trash: Trash;
  /** Every filesystem touch of a synced path resolves it here (local-path.ts). */
  private readonly paths: LocalPaths;
  private readonly small: number;
  private watcher: FolderWatcher | undefined;
  private feed: Disposable | undefined;
  private pendingScope = new Set<string>(['']);
  private remoteDirty = true;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  /** The server refused this device's token (revoked or unknown): nothing more is tried. */
  private removed = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private feedTimer: NodeJS.Timeout | undefined;
  private pausedUntil = 0;
  private massDeletePending = false;
  private readonly uploadRate = new RateEstimator();
  private readonly deltaRate = new RateEstimator(5, 50 * 1024 * 1024);
  private idleWaiters: (() => void)[] = [];
  private readonly compression = new CompressionAdvisor((sample) => {
    const t = performance.now();
    const out = deflateRawSync(sample, { level: 6 });
    return { outBytes: out.byteLength, seconds: (performance.now() - t) / 1000 };
  });
  /** Block-size measurements waiting for idle time: (old copy, new file). */
  private readonly idleEstimates: { path: string; oldCopy: string; newFile: string }[] = [];
  private lastError: unknown;
  /** Run the Merkle consistency check after the next successful pull (crash, long outage). */
  private checkPending = false;
  private offlineSince: number | undefined;
  /** The outcome of the last consistency check (for tests and the status UI). */
  lastCheck: { paths: string[]; roundTrips: number; repaired: number; atMs: number } | undefined;
  /** How the last large upload travelled (for tests and benchmarks). */
  lastUpload: { path: string; mode: 'delta' | 'whole'; bytes: number } | undefined;

  constructor(private readonly options: EngineOptions) {
    this.status = new StatusModel(options.folder);
    this.journal = new Journal(nodePath.join(options.stateDir, 'journal.db'));
    this.ignore = new IgnoreRules(options.ignore ?? []);
    this.trash = new Trash(nodePath.join(options.stateDir, 'trash'));
    this.paths = new LocalPaths(options.folder, options.pathRules ?? hostPathRules(), (l) =>
      this.journal.remoteNameOf(l),
    );
    this.showLocalNames();
    this.small = options.smallFileBytes ?? 2 * 1024 * 1024;
    this.storage = new StorageWatch({
      usage: options.client.usage?.bind(options.client),
      status: this.status,
      onRoom: () => this.kick(),
      ...(options.storageTimings ? { timings: options.storageTimings } : {}),
    });
    this.store.add(this.storage);
  }

  static async open(options: EngineOptions): Promise<Engine> {
    await fsp.mkdir(options.folder, { recursive: true });
    await privateDir(options.stateDir);
    const caseInsensitive = options.caseInsensitive ?? (await probeCaseInsensitive(options.folder));
    const e = new Engine({ ...options, caseInsensitive });
    await sweepPartials(options.folder);
    return e;
  }

  get deviceName(): string {
    return this.options.deviceName;
  }

  /** Start watching and syncing. */
  async start(): Promise<void> {
    // A journal still marked running was not stopped cleanly (a crash, kill -9, power
    // loss): feed events may have been lost in between, so check against the server.
    if (this.journal.getMeta('running') === '1' && this.journal.getMeta('cursor')) this.checkPending = true;
    this.journal.setMeta('running', '1');
    if (this.options.watch ?? true) {
      const w = new FolderWatcher(this.options.folder, { toRemote: (l) => this.paths.remotePath(l) });
      this.watcher = w;
      this.store.add(w);
      this.store.add(w.onDirty((scope) => this.markDirty(scope)));
      await w.start();
    }
    if (this.options.liveFeed ?? true) this.connectFeed();
    this.storage.start();
    this.kick();
  }

  /** Ask for a pass covering these local subtrees. */
  markDirty(scope: readonly string[]): void {
    for (const s of scope) this.pendingScope.add(s);
    this.kick();
  }

  /** Run passes until nothing is left to do (or we are offline/paused). */
  async syncNow(): Promise<void> {
    this.pendingScope.add('');
    this.remoteDirty = true;
    this.kick();
    await this.running;
    while (this.running) await this.running;
  }

  /** Resolves when a pass finishes with nothing pending. */
  waitIdle(): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private kick(): void {
    if (this.stopped || this.removed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.loop().finally(() => {
      this.running = undefined;
      for (const w of this.idleWaiters.splice(0)) w();
    });
  }

  private async loop(): Promise<void> {
    do {
      this.again = false;
      try {
        await this.pass();
        // A pass that ran on while the feed reported the revocation does not undo its state.
        if (this.removed) return this.showRemoved();
        this.lastError = undefined;
      } catch (e) {
        if (e instanceof ScanStopped && this.stopped) return; // stop() asked for it
        this.lastError = e;
        if (e instanceof RemoteError && e.status === 401) {
          this.halt(e.code);
          return;
        }
        if (isQuotaExceeded(e)) {
          // Weft storage is full: uploads wait (queued) and are not sent again until usage
          // shows room; the pass runs again at once without them (deletes free space).
          const first = !this.storage.isFull;
          this.storage.refused(e);
          if (first) {
            this.again = true;
            continue;
          }
          this.showFull();
          return;
        }
        if (e instanceof OfflineError) {
          this.status.update({ state: 'offline', error: e.message });
          this.scheduleRetry();
          return;
        }
        this.status.update({ state: 'error', error: (e as Error).message });
        this.scheduleRetry();
        return;
      }
    } while (this.again && !this.stopped);
  }

  /**
   * The server no longer accepts this device's token: stop syncing for good (no retry loop)
   * and say why. The journal and the folder stay as they are; enrolling again resumes.
   */
  private halt(code: string): void {
    if (this.removed) return;
    this.removed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    if (this.feedTimer) clearTimeout(this.feedTimer);
    this.feedTimer = undefined;
    const feed = this.feed;
    this.feed = undefined;
    feed?.dispose();
    this.removedMessage = code === 'DEVICE_REVOKED' ? DEVICE_REMOVED_MESSAGE : DEVICE_UNKNOWN_MESSAGE;
    this.showRemoved();
  }

  private removedMessage = DEVICE_REMOVED_MESSAGE;

  private showRemoved(): void {
    this.status.update({ state: 'removed', error: this.removedMessage, transfers: [] });
  }

  private showFull(): void {
    this.status.update({
      state: 'full',
      error: this.storage.message(this.journal.pendingOps().length),
      transfers: this.status.get().transfers.filter((t) => t.direction === 'down'),
    });
  }

  /** True once the server has refused this device's token (see halt). */
  get isRemoved(): boolean {
    return this.removed;
  }

  private scheduleRetry(): void {
    if (this.retryTimer || this.stopped || this.removed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.remoteDirty = true;
      if (!this.feed && (this.options.liveFeed ?? true)) this.connectFeed();
      this.kick();
    }, this.options.offlineRetryMs ?? 2000);
  }

  /** The error that stopped the last pass, if any. */
  get error(): unknown {
    return this.lastError;
  }

  // ------------------------------------------------------------------ pause / guard

  pause(untilMs = Number.MAX_SAFE_INTEGER): void {
    if (this.removed) return;
    this.pausedUntil = untilMs;
    this.status.update({ state: 'paused', pausedUntilMs: untilMs });
  }

  resume(): void {
    if (this.removed) return;
    this.pausedUntil = 0;
    this.status.update({ state: 'idle', pausedUntilMs: undefined });
    this.kick();
  }

  private get paused(): boolean {
    if (this.pausedUntil > 0 && (this.options.now ?? Date.now)() >= this.pausedUntil) this.pausedUntil = 0;
    return this.pausedUntil > 0 || this.massDeletePending;
  }

  /** The person's answer to a mass delete: send the deletes, or bring the files back. */
  async resolveMassDelete(answer: 'delete' | 'restore'): Promise<void> {
    if (!this.massDeletePending) return;
    if (answer === 'restore') {
      // Drop the deletes; forget the rows so the next pull downloads the files again.
      for (const q of this.journal.pendingOps()) {
        if (q.op.kind === 'delete') this.journal.completeOp(q.id, () => undefined);
      }
      this.journal.setMeta('cursor', '');
    }
    this.massDeletePending = false;
    this.status.update({ state: 'idle', error: undefined });
    this.remoteDirty = true;
    this.kick();
  }

  // ------------------------------------------------------------------ one pass

  private async pass(): Promise<void> {
    if (this.paused) {
      this.status.update({ state: 'paused' });
      return;
    }
    // Offline, the scan still runs: edits are queued (and coalesced) until the server is back.
    let offline: OfflineError | undefined;
    if (this.remoteDirty) {
      this.remoteDirty = false;
      try {
        await this.pull();
        const now = (this.options.now ?? Date.now)();
        if (
          this.offlineSince !== undefined &&
          now - this.offlineSince >= (this.options.longDisconnectMs ?? 600_000)
        )
          this.checkPending = true;
        this.offlineSince = undefined;
        if (this.checkPending) {
          this.checkPending = false;
          await this.runConsistencyCheck();
        }
      } catch (e) {
        if (!(e instanceof OfflineError)) throw e;
        this.remoteDirty = true;
        this.offlineSince ??= (this.options.now ?? Date.now)();
        offline = e;
      }
    }
    const scope = [...this.pendingScope];
    this.pendingScope.clear();
    if (scope.length > 0) {
      this.status.update({ state: 'scanning' });
      const result = await scan(this.options.folder, this.journal, this.ignore, {
        scope,
        settleMs: this.options.settleMs ?? 1000,
        now: this.options.now,
        detectCaseClashes: this.options.caseInsensitive ?? false,
        shouldStop: () => this.stopped,
        paths: this.paths,
      });
      this.options.trace?.('scan', result.ops);
      for (const w of result.warnings) this.status.warn(w);
      if (this.isMassDelete(result.deletedFiles, result.knownFilesBefore)) {
        if (!(await enqueueScan(this.journal, result, { shouldStop: () => this.stopped })).complete) return;
        this.massDeletePending = true;
        this.status.update({
          state: 'paused',
          error: `This sync would delete ${result.ops.filter((o) => o.kind === 'delete').length} items. Confirm to continue, or restore them.`,
        });
        return;
      }
      const before = this.journal.pendingCount();
      // In batches, yielding between them: the UI and SIGTERM are answered meanwhile (issue #16).
      const queued = await enqueueScan(this.journal, result, {
        shouldStop: () => this.stopped,
        onBatch: (n) => this.status.update({ pendingOperations: n }),
      });
      if (!queued.complete) return; // stopping: the next scan finds the rest
      const after = queued.queued;
      if (result.storedAs > 0) this.showLocalNames();
      this.status.save('operationsEliminated', before + result.ops.length - after);
      if (result.unsettled.length > 0) {
        setTimeout(() => this.markDirty(result.unsettled), this.options.settleMs ?? 1000).unref();
      }
    }
    if (offline) throw offline;
    await this.push();
    if (!this.again) await this.runIdleEstimates();
    const pending = this.journal.pendingOps().length;
    const full = this.storage.isFull;
    this.status.update({
      // A remote change announced during this pass is known but not applied yet.
      state: full ? 'full' : this.remoteDirty ? 'syncing' : 'idle',
      error: full ? this.storage.message(pending) : undefined,
      pendingOperations: pending,
      files: this.journal.fileCount(),
    });
  }

  private isMassDelete(deletedFiles: number, knownFiles: number): boolean {
    if (deletedFiles === 0) return false;
    const fraction = this.options.massDeleteFraction ?? 0.5;
    const count = Math.max(10, this.options.massDeleteCount ?? 1000);
    return deletedFiles > count || (deletedFiles >= 10 && deletedFiles / Math.max(1, knownFiles) > fraction);
  }

  // ------------------------------------------------------------------ remote → local

  private async pull(): Promise<void> {
    const raw = this.journal.getMeta('cursor');
    if (raw === undefined || raw === '') {
      await this.fullReconcile();
      return;
    }
    let cursor = Number(raw);
    for (;;) {
      const page = await this.options.client.changes(cursor);
      if (page.reset) {
        await this.fullReconcile();
        return;
      }
      // Known and not yet applied: not up to date until they are (issue #14).
      if (page.changes.length > 0) this.status.update({ state: 'syncing' });
      for (const c of page.changes) this.options.trace?.('remote', c);
      await this.applyRemoteBatch(page.changes);
      cursor = page.cursor;
      this.journal.setMeta('cursor', String(cursor));
      if (!page.hasMore) return;
    }
  }

  /** First sync or a reset feed: compare the whole remote listing with the journal. */
  private async fullReconcile(): Promise<void> {
    const listing = await this.options.client.list('', true);
    this.status.update({ state: 'syncing' });
    const remote = new Map(listing.entries.map((e) => [e.path, e]));
    const dirs = listing.entries.filter((e) => e.kind === 'dir').sort((a, b) => (a.path < b.path ? -1 : 1));
    for (const d of dirs) await this.guarded(d.path, () => this.applyUpsert(d));
    await this.downloadMany(listing.entries.filter((e) => e.kind === 'file'));
    // Rows the server no longer has (and we had synced): deleted remotely.
    for (const row of this.journal.allFiles()) {
      if (row.syncedRev !== null && !remote.has(row.path))
        await this.guarded(row.path, () => this.applyDelete(row.path));
    }
    this.journal.setMeta('cursor', String(listing.seq));
  }

  /**
   * Apply a page of changes in order, but download runs of file upserts together (one
   * bundle request for many small files). A run ends at any other kind of change, so
   * deletes, moves and folder changes keep their place in the order.
   */
  private async applyRemoteBatch(changes: readonly ChangeRecord[]): Promise<void> {
    let run = new Map<string, { entry: EntryInfo; device: string | undefined }>();
    const flush = async (): Promise<void> => {
      if (run.size === 0) return;
      const byDevice = new Map<string | undefined, EntryInfo[]>();
      for (const { entry, device } of run.values()) {
        const list = byDevice.get(device) ?? [];
        list.push(entry);
        byDevice.set(device, list);
      }
      run = new Map();
      for (const [device, entries] of byDevice) await this.downloadMany(entries, device);
    };
    for (const c of changes) {
      if (c.type === 'upsert' && c.entry.kind === 'file' && !this.ignore.ignores(c.path, false)) {
        run.delete(c.path); // a later version of the same path replaces the earlier one
        run.set(c.path, { entry: c.entry, device: c.deviceName });
        continue;
      }
      await flush();
      await this.guarded(c.path, () => this.applyRemote(c));
    }
    await flush();
  }

  private async applyRemote(c: ChangeRecord): Promise<void> {
    if (this.ignore.ignores(c.path, c.type !== 'delete' && c.entry.kind === 'dir')) return;
    if (c.type === 'upsert') {
      if (c.entry.kind === 'dir') await this.applyUpsert(c.entry);
      else await this.downloadMany([c.entry], c.deviceName);
    } else if (c.type === 'delete') {
      await this.applyDelete(c.path);
    } else {
      await this.applyMove(c.from, c.path, c.entry);
    }
  }

  private async localHash(row: FileRow | undefined, p: string): Promise<string | undefined> {
    let abs: string;
    let st: import('node:fs').BigIntStats;
    try {
      abs = await this.at(p);
      st = await fsp.lstat(abs, { bigint: true });
    } catch {
      return undefined;
    }
    if (!st.isFile()) return undefined;
    if (row && row.hash && row.size === Number(st.size) && row.mtimeNs === st.mtimeNs && row.inode === st.ino)
      return row.hash;
    return sha256File(abs);
  }

  private async applyUpsert(entry: EntryInfo): Promise<void> {
    const row = this.journal.getFile(entry.path);
    if (entry.kind === 'dir') {
      if (row?.kind === 'dir' && row.syncedRev !== null) return;
      const abs = await this.at(entry.path);
      const st = await fsp.lstat(abs).catch(() => undefined);
      if (st && !st.isDirectory()) return; // a local file is in the way: the scanner reports it
      await fsp.mkdir(abs, { recursive: true });
      const now = await fsp.lstat(abs, { bigint: true });
      this.noteLocalName(entry.path);
      this.journal.upsertFile({
        path: entry.path,
        kind: 'dir',
        size: 0,
        mtimeNs: now.mtimeNs,
        inode: now.ino,
        hash: null,
        syncedRev: entry.revision,
        syncedHash: null,
        signature: null,
        signatureBlock: null,
      });
    }
  }

  /** Bring remote file entries down: small ones in bundles, large ones by delta or whole. */
  private async downloadMany(entries: readonly EntryInfo[], device?: string): Promise<void> {
    const wanted: {
      entry: EntryInfo;
      row: FileRow | undefined;
      local: string | undefined;
      action: string;
    }[] = [];
    for (const entry of entries) {
      const row = this.journal.getFile(entry.path);
      if (row?.syncedRev === entry.revision) continue; // our own write, or already applied
      const local = await this.localHash(row, entry.path);
      if (entry.sha256 && this.journal.wasSent(entry.path, entry.sha256)) {
        // Our own write whose acknowledgement was lost (a crash): it is the new base.
        this.journal.transaction(() => {
          this.recordSynced(entry, row, local ?? entry.sha256);
          this.journal.clearSent(entry.path);
        });
        continue;
      }
      const d = decide({
        baseHash: row?.syncedHash ?? undefined,
        localHash: local,
        remoteHash: entry.sha256,
      });
      wanted.push({ entry, row, local, action: d.action });
      this.options.trace?.('decide', {
        path: entry.path,
        rev: entry.revision,
        base: row?.syncedHash,
        local,
        remote: entry.sha256,
        action: d.action,
      });
    }
    const smallDownloads: EntryInfo[] = [];
    const expected = new Map(wanted.map((w) => [w.entry.path, w.local]));
    for (const w of wanted) {
      switch (w.action) {
        case 'record':
        case 'nothing':
          this.recordSynced(w.entry, w.row, w.local);
          break;
        case 'upload':
          // Our newer local edit is queued; the remote is at our base or we win a delete race.
          break;
        case 'conflict':
          await this.guarded(w.entry.path, () => this.keepConflict(w.entry, w.row, device));
          break;
        case 'download':
          if (w.entry.size < this.small) smallDownloads.push(w.entry);
          else await this.guarded(w.entry.path, () => this.downloadLarge(w.entry, w.row, w.local));
          break;
        default:
          break;
      }
    }
    for (let i = 0; i < smallDownloads.length; i += 2000) {
      const chunk = smallDownloads.slice(i, i + 2000);
      const byPath = new Map(chunk.map((e) => [e.path, e]));
      let pending = chunk.map((e) => e.path);
      while (pending.length > 0) {
        const { bundle, deferred } = await this.options.client.downloadBundle(pending);
        if (bundle.entries.length > 1) this.status.save('requestsSavedByBundling', bundle.entries.length - 1);
        for (const be of bundle.entries) {
          const entry = byPath.get(be.path);
          if (!entry) continue;
          await this.guarded(entry.path, () =>
            this.writeDownloaded(
              entry.path,
              be.content,
              be.sha256,
              be.rev ?? entry.revision,
              be.mtimeMs,
              expected.get(entry.path),
            ),
          );
        }
        // Every other path was deferred with its reason: a large file comes by GET /v1/files;
        // no room left in this bundle, or changed while read: ask again; absent: the feed tells.
        const retry: string[] = [];
        for (const { path: p, reason } of deferred) {
          const e = byPath.get(p);
          if (!e || reason === 'absent') continue;
          if (reason === 'large' || e.size >= MAX_BUNDLE_BYTES / 2) {
            await this.guarded(p, () => this.downloadLarge(e, this.journal.getFile(p), expected.get(p)));
          } else retry.push(p);
        }
        pending = retry;
        if (bundle.entries.length === 0) break;
      }
    }
  }

  private recordSynced(entry: EntryInfo, row: FileRow | undefined, local: string | undefined): void {
    if (local === undefined) return;
    const base: FileRow = row ?? {
      path: entry.path,
      kind: 'file',
      size: entry.size,
      mtimeNs: 0n,
      inode: 0n,
      hash: local,
      syncedRev: null,
      syncedHash: null,
      signature: null,
      signatureBlock: null,
    };
    const same = base.syncedHash !== null && base.syncedHash === entry.sha256;
    // A signature belongs to the synced content it was made from: a new base voids it.
    this.journal.upsertFile({
      ...base,
      syncedRev: entry.revision,
      syncedHash: entry.sha256 ?? null,
      ...(same ? {} : { signature: null, signatureBlock: null }),
    });
  }

  /** Both sides changed: the remote version becomes a conflicted copy beside ours. */
  private async keepConflict(entry: EntryInfo, row: FileRow | undefined, device?: string): Promise<void> {
    const when = new Date((this.options.now ?? Date.now)());
    const copy = conflictCopyPath(
      entry.path,
      device ?? 'another device',
      when,
      (c) => this.journal.getFile(c) !== undefined,
    );
    const dl = await this.options.client.download(entry.path).catch(unlessGone);
    if (!dl) return; // gone from the server since: a later change in the feed says where
    await atomicWrite(await this.at(copy), dl.body, { mtimeMs: entry.mtimeMs });
    this.noteLocalName(copy);
    await this.adoptAsEditOf(entry.path, entry.revision, entry.sha256 ?? null, row);
    this.markDirty([copy]);
    this.status.conflict(entry.path, copy);
  }

  /**
   * Theirs was kept as a conflicted copy; ours stays in place and from now on counts as
   * an edit of their version, so the next scan uploads it over theirs without a second
   * conflict. The row's content is marked unknown, so the scan re-reads the file and
   * queues the upload even when its stat has not moved — and a file the journal did not
   * know yet (say, the far end of a local move not scanned) gets a row, so it is not
   * mistaken for a new file or a move onto a taken name.
   */
  private async adoptAsEditOf(
    p: string,
    revision: string,
    sha256: string | null,
    row: FileRow | undefined = this.journal.getFile(p),
  ): Promise<void> {
    const st = await this.at(p)
      .then((abs) => fsp.lstat(abs, { bigint: true }))
      .catch(() => undefined);
    if (st?.isFile()) {
      this.journal.upsertFile({
        path: p,
        kind: 'file',
        size: Number(st.size),
        mtimeNs: SMUDGED_MTIME,
        inode: st.ino,
        hash: null,
        syncedRev: revision,
        syncedHash: sha256,
        signature: null, // theirs is the base now; our signature was of an older version
        signatureBlock: null,
      });
    } else if (row) {
      this.journal.upsertFile({ ...row, syncedRev: revision, syncedHash: sha256 });
    }
    this.markDirty([p]);
  }

  private async writeDownloaded(
    p: string,
    content: Uint8Array | AsyncIterable<Uint8Array>,
    sha256: string,
    revision: string,
    mtimeMs: number,
    /** The local content the decision to download was based on (undefined: absent). */
    expectedLocal?: string | null,
  ): Promise<void> {
    const abs = await this.at(p);
    if (this.options.caseInsensitive && this.caseClash(p)) {
      // On this disk the name would land on another file that differs only by case: keep
      // ours, leave theirs on the server, and say so.
      this.status.warn(`not downloaded: ${p} differs only by case from a file already here`);
      return;
    }
    const parentRel = p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '';
    // A local file where a parent folder must go: keep it (the scanner uploads it as a conflict).
    if (parentRel !== '') {
      const pst = await fsp.lstat(await this.at(parentRel)).catch(() => undefined);
      if (pst && !pst.isDirectory()) return;
    }
    let previous: string | undefined;
    let landedAt = p;
    const st = await atomicWrite(abs, content, {
      mtimeMs,
      beforeRename: async () => {
        // The person may have changed the file since we decided: never replace that edit.
        if (expectedLocal !== null) {
          const row = this.journal.getFile(p);
          const now = await this.localHash(row, p);
          const expected = expectedLocal ?? undefined;
          if (now !== expected && now !== sha256) {
            landedAt = conflictCopyPath(
              p,
              'another device',
              new Date((this.options.now ?? Date.now)()),
              (c) => this.journal.getFile(c) !== undefined,
            );
            return this.at(landedAt);
          }
        }
        previous = await this.trash.keepCopy(abs, this.paths.localRel(p));
      },
    });
    this.noteLocalName(landedAt);
    if (landedAt !== p) {
      // Theirs became the conflicted copy; ours stays and now counts as an edit of theirs.
      await this.adoptAsEditOf(p, revision, sha256);
      this.markDirty([landedAt]);
      this.status.conflict(p, landedAt);
      return;
    }
    // HyCloud Eq. 1: after a large download, measure every candidate block size in idle time.
    if (previous && Number(st.size) >= this.small)
      this.idleEstimates.push({ path: p, oldCopy: previous, newFile: abs });
    const size = Number(st.size);
    this.journal.upsertFile({
      path: p,
      kind: 'file',
      size,
      mtimeNs: st.mtimeNs,
      inode: st.ino,
      hash: sha256,
      syncedRev: revision,
      syncedHash: sha256,
      signature: null,
      signatureBlock: null,
    });
    this.status.update({ bytesDownloaded: this.status.get().bytesDownloaded + size });
    this.status.activity({ kind: 'downloaded', path: p });
  }

  private async downloadLarge(
    entry: EntryInfo,
    row: FileRow | undefined,
    local: string | undefined,
  ): Promise<void> {
    const abs = await this.at(entry.path);
    const sha = entry.sha256 ?? '';
    if (local !== undefined && sha !== '') {
      // Delta download (HyCloud §III-B): send our old version's signature, patch locally.
      const blockSize = chooseBlockSize(this.history(entry.path));
      const sigChunks: Uint8Array[] = [];
      for await (const c of rsyncSignature(createReadStream(abs) as AsyncIterable<Uint8Array>, {
        blockSize,
      })) {
        sigChunks.push(c);
      }
      const sig = Buffer.concat(sigChunks);
      try {
        const container = await this.options.client.downloadDelta(entry.path, local, sig);
        const old = await openOldFile(abs);
        try {
          await this.writeDownloaded(
            entry.path,
            rsyncPatch(old, container.delta, { maxOutputBytes: container.targetSize }),
            container.targetSha256,
            entry.revision,
            entry.mtimeMs,
            local,
          );
        } finally {
          await old.close();
        }
        this.status.save(
          'deltaBytesSaved',
          Math.max(0, entry.size - container.delta.byteLength - sig.byteLength),
        );
        return;
      } catch (e) {
        if (!(e instanceof RemoteError)) throw e;
        // The server cannot build a delta (base unknown): fall back to the whole file.
      }
    }
    const dl = await this.options.client.download(entry.path).catch(unlessGone);
    if (!dl) return; // gone from the server since: a later change in the feed says where
    await this.writeDownloaded(
      entry.path,
      dl.body,
      dl.sha256 || sha,
      dl.revision || entry.revision,
      entry.mtimeMs,
      local,
    );
  }

  private async applyDelete(p: string): Promise<void> {
    const rows = this.journal.filesUnder(p);
    if (rows.length === 0) return;
    const abs = await this.at(p);
    // Files here that are not what we last synced — edited, or new and not scanned yet —
    // outrank the delete (D15): they stay, and go up again.
    const keep = new Set<string>();
    for (const f of await this.localFilesUnder(p)) {
      const row = this.journal.getFile(f);
      const local = await this.localHash(row, f);
      if (local !== undefined && (!row || row.kind !== 'file' || local !== row.syncedHash)) keep.add(f);
    }
    if (keep.size === 0) {
      await this.trash.keep(abs, this.paths.localRel(p));
      this.journal.deleteFilesUnder(p);
      this.forgetLocalNames(p);
      this.status.activity({ kind: 'deleted', path: p });
      return;
    }
    const holdsKept = (dir: string): boolean => [...keep].some((k) => k.startsWith(dir + '/'));
    const ops: Op[] = [];
    // Deepest first, so a folder is looked at after everything in it.
    for (const r of [...rows].sort((a, b) => (a.path < b.path ? 1 : -1))) {
      const rAbs = await this.at(r.path);
      if (r.kind === 'file') {
        if (keep.has(r.path)) {
          this.journal.upsertFile({
            ...r,
            syncedRev: null,
            syncedHash: null,
            mtimeNs: SMUDGED_MTIME,
            hash: null,
          });
        } else {
          await this.trash.keep(rAbs, this.paths.localRel(r.path));
          this.journal.deleteFile(r.path);
          this.forgetLocalNames(r.path);
        }
      } else if (holdsKept(r.path)) {
        this.journal.upsertFile({ ...r, syncedRev: null });
        ops.push({ kind: 'mkdir', path: r.path, created: true });
      } else {
        await this.trash.keep(rAbs, this.paths.localRel(r.path));
        this.journal.deleteFilesUnder(r.path);
        this.forgetLocalNames(r.path);
      }
    }
    this.journal.enqueueMany(ops.reverse());
    this.markDirty([p]); // the kept files are uploaded as new by the scan
    this.status.activity({ kind: 'deleted', path: p, detail: `kept ${keep.size} changed file(s)` });
  }

  /** Files on disk at or under `p` (not ignored, not our temp files), as folder paths. */
  private async localFilesUnder(p: string): Promise<string[]> {
    const out: string[] = [];
    const visit = async (rel: string): Promise<void> => {
      const abs = await this.at(rel).catch(() => undefined);
      if (abs === undefined) return;
      const st = await fsp.lstat(abs).catch(() => undefined);
      if (!st) return;
      if (st.isFile()) {
        if (!this.ignore.ignores(rel, false)) out.push(rel);
        return;
      }
      if (!st.isDirectory() || this.ignore.ignores(rel, true)) return;
      const names = await fsp.readdir(abs).catch(() => [] as string[]);
      for (const n of names) {
        if (n.startsWith(PARTIAL_PREFIX)) continue;
        const remote = this.paths.remoteName(n.normalize('NFC'));
        if (remote !== undefined) await visit(`${rel}/${remote}`);
      }
    };
    await visit(p);
    return out;
  }

  private async applyMove(from: string, to: string, entry: EntryInfo): Promise<void> {
    const row = this.journal.getFile(from);
    const absFrom = await this.at(from);
    const absTo = await this.at(to);
    const target = this.journal.getFile(to);
    if (row && !target && !(await fsp.lstat(absTo).catch(() => undefined))) {
      await fsp.mkdir(nodePath.dirname(absTo), { recursive: true });
      try {
        await fsp.rename(absFrom, absTo);
        this.journal.moveFiles(from, to);
        this.forgetLocalNames(from);
        this.noteLocalName(to);
        const moved = this.journal.getFile(to);
        if (moved) this.journal.upsertFile({ ...moved, syncedRev: entry.revision });
        this.status.activity({ kind: 'moved', path: to, detail: from });
        return;
      } catch {
        /* fall through to a plain download */
      }
    }
    // We did not have it (or something is in the way): fetch the destination as new content.
    if (entry.kind === 'dir') await this.fetchRemoteSubtree(to);
    else await this.downloadMany([entry]);
    if (row) await this.applyDelete(from);
  }

  // ------------------------------------------------------------------ local → remote

  /** Idle-time work: fold measured elimination ratios into each file's block-size history. */
  private async runIdleEstimates(): Promise<void> {
    while (this.idleEstimates.length > 0 && !this.again && !this.stopped) {
      const job = this.idleEstimates.shift();
      if (!job) return;
      try {
        const estimates = await estimateEliminationRatios(
          createReadStream(job.oldCopy) as AsyncIterable<Uint8Array>,
          createReadStream(job.newFile) as AsyncIterable<Uint8Array>,
          { blockSizes: CANDIDATE_BLOCK_SIZES },
        );
        const next = updateHistory(
          this.history(job.path),
          CANDIDATE_BLOCK_SIZES.map((b) => estimates.find((e) => e.blockSize === b)?.eliminationRatio ?? 0),
        );
        this.journal.db
          .prepare(
            'INSERT INTO delta_history(path, block_probs, n) VALUES (?, ?, ?) ON CONFLICT(path) DO UPDATE SET block_probs = excluded.block_probs, n = excluded.n',
          )
          .run(job.path, JSON.stringify(next.probs), next.n);
      } catch {
        // The file changed or vanished meanwhile: skip this measurement.
      }
    }
  }

  /** The block-size history of a file (for tests and the status UI). */
  blockSizeHistory(p: string): BlockSizeHistory {
    return this.history(p);
  }

  private history(p: string): BlockSizeHistory {
    const r = this.journal.db.prepare('SELECT block_probs, n FROM delta_history WHERE path = ?').get(p) as
      { block_probs: string; n: bigint } | undefined;
    if (!r) return initialHistory();
    try {
      const probs = JSON.parse(r.block_probs) as number[];
      if (probs.length === CANDIDATE_BLOCK_SIZES.length) return { probs, n: Number(r.n) };
    } catch {
      /* corrupt row: start over */
    }
    return initialHistory();
  }

  private async push(): Promise<void> {
    for (;;) {
      if (this.paused || this.stopped) return;
      const queue = this.journal.pendingOps();
      if (queue.length === 0) return;
      if (this.storage.isFull) return this.pushWhileFull(queue);
      this.status.update({ state: 'syncing', pendingOperations: queue.length });
      // A window of creates (puts and mkdirs, no deletes or moves) can send all its folders
      // first, then all its files: within such a window the two kinds commute.
      const window: typeof queue = [];
      for (const q of queue) {
        if (q.op.kind !== 'put' && q.op.kind !== 'mkdir') break;
        window.push(q);
      }
      if (window.length === 0) {
        const run: typeof queue = [];
        for (const q of queue) {
          if (q.op.kind === 'put' || q.op.kind === 'mkdir' || run.length >= 500) break;
          run.push(q);
        }
        await this.pushOps(run);
        await this.resolveServerConflicts();
        continue;
      }
      const mkdirs = window.filter((q) => q.op.kind === 'mkdir');
      for (let i = 0; i < mkdirs.length; i += 500) await this.pushOps(mkdirs.slice(i, i + 500));
      const puts = window.filter((q) => q.op.kind === 'put');
      const small: typeof queue = [];
      const large: typeof queue = [];
      for (const q of puts) {
        if (this.stopped) return;
        const st = await this.at(q.op.kind === 'put' ? q.op.path : '', true)
          .then((abs) => fsp.lstat(abs))
          .catch(() => undefined);
        if (st && st.isFile() && st.size >= this.small) large.push(q);
        else small.push(q);
      }
      // In slices, so a stop lands between requests, not after 100,000 files.
      for (let i = 0; i < small.length; i += 2_000) {
        if (this.stopped) return;
        await this.pushBundles(small.slice(i, i + 2_000));
      }
      await this.resolveServerConflicts();
      for (const q of large) {
        if (this.paused || this.stopped) return;
        await this.pushLarge(q.id, q.op as Extract<Op, { kind: 'put' }>);
        await this.resolveServerConflicts();
      }
    }
  }

  /**
   * Weft storage is full: uploads stay queued; send, in queue order, the operations that
   * cannot depend on a waiting upload (deletes free space; moves and folders add none): those
   * on paths unrelated to every upload, or other operation, held back before them.
   */
  private async pushWhileFull(queue: readonly { id: number; op: Op }[]): Promise<void> {
    const held: string[] = [];
    const related = (a: string, b: string): boolean =>
      a === b || a.startsWith(b + '/') || b.startsWith(a + '/') || a === '' || b === '';
    const send: { id: number; op: Op }[] = [];
    for (const q of queue) {
      const paths = q.op.kind === 'move' ? [q.op.from, q.op.to] : [q.op.path];
      if (q.op.kind === 'put' || paths.some((p) => held.some((h) => related(p, h)))) held.push(...paths);
      else send.push(q);
    }
    for (let i = 0; i < send.length; i += 500) await this.pushOps(send.slice(i, i + 500));
    await this.resolveServerConflicts();
  }

  private async pushOps(run: readonly { id: number; op: Op }[]): Promise<void> {
    const wire: FileOp[] = run.map(({ op }) => {
      switch (op.kind) {
        case 'mkdir':
          return { op: 'mkdir', path: op.path };
        case 'delete':
          return { op: 'delete', path: op.path, ...(op.revision ? { baseRevision: op.revision } : {}) };
        case 'move':
          return { op: 'move', from: op.from, to: op.to };
        case 'put':
          throw new Error('puts go through bundles or transfers');
      }
    });
    const results = await this.options.client.ops(wire);
    this.options.trace?.(
      'ops',
      wire.map((w, i) => ({ ...w, result: results[i] })),
    );
    const failed: { op: Op; code: string }[] = [];
    run.forEach((q, i) => {
      const r = results[i];
      this.journal.completeOp(q.id, () => {
        if (!r) return;
        if (r.status === 'applied' && (q.op.kind === 'mkdir' || q.op.kind === 'move') && r.entry) {
          const path = q.op.kind === 'mkdir' ? q.op.path : q.op.to;
          const row = this.journal.getFile(path);
          if (row) this.journal.upsertFile({ ...row, syncedRev: r.entry.revision });
        }
        if (r.status === 'error')
          this.status.activity({ kind: 'error', path: describe(q.op), detail: r.error.message });
      });
      if (r?.status === 'applied') {
        this.status.activity({ kind: q.op.kind === 'delete' ? 'deleted' : 'moved', path: describe(q.op) });
      }
      if (r?.status === 'conflict') this.handleServerConflict(q.op, r);
      if (r?.status === 'error') failed.push({ op: q.op, code: r.error.code });
    });
    for (const f of failed) await this.repairFailedOp(f.op, f.code);
  }

  /**
   * An operation the server refused leaves this side and the server apart; bring them
   * back together without losing either side's content:
   * - a move onto a name someone else took meanwhile keeps both: ours moves on under a
   *   conflicted-copy name, theirs comes down;
   * - a move whose source the server no longer has (deleted or moved elsewhere by another
   *   device) makes what we moved new content there;
   * - anything else: compare the whole folder with the server on the next pull.
   */
  private async repairFailedOp(op: Op, code: string): Promise<void> {
    if (op.kind === 'move' && code === 'ALREADY_EXISTS') {
      const copy = conflictCopyPath(
        op.to,
        this.deviceName,
        new Date((this.options.now ?? Date.now)()),
        (c) => this.journal.getFile(c) !== undefined,
      );
      const [r] = await this.options.client.ops([{ op: 'move', from: op.from, to: copy }]);
      if (r?.status === 'applied') {
        const moved = await Promise.all([this.at(op.to), this.at(copy)])
          .then(([a, b]) => fsp.rename(a, b))
          .then(() => true)
          .catch(() => false);
        this.journal.transaction(() => {
          if (moved) this.journal.moveFiles(op.to, copy);
          const row = this.journal.getFile(copy);
          if (row && r.entry) this.journal.upsertFile({ ...row, syncedRev: r.entry.revision });
        });
        if (!moved) this.markDirty([copy]);
        this.status.conflict(op.to, copy);
        await this.fetchRemoteSubtree(op.to);
        return;
      }
    }
    if (op.kind === 'move' && code === 'NOT_FOUND') {
      const ops: Op[] = [];
      this.journal.transaction(() => {
        for (const row of this.journal.filesUnder(op.to)) {
          this.journal.upsertFile({ ...row, syncedRev: null, syncedHash: null });
          if (row.kind === 'dir') ops.push({ kind: 'mkdir', path: row.path, created: true });
          else if (row.hash)
            ops.push({ kind: 'put', path: row.path, hash: row.hash, size: row.size, created: true });
        }
      });
      this.journal.enqueueMany(ops);
      return;
    }
    this.reconcileEverything();
  }

  /** Forget the feed position: the next pull lists the whole folder and compares. */
  private reconcileEverything(): void {
    this.journal.setMeta('cursor', '');
    this.remoteDirty = true;
    this.again = true;
  }

  /**
   * Compare the journal's synced view with the server's namespace by Merkle hashes and
   * repair every entry where they differ as a remote change (download, delete, or keep
   * both on a conflict). Entries with local operations still queued are left to those.
   */
  async checkConsistency(): Promise<{ paths: string[]; roundTrips: number; repaired: number }> {
    // Run inside a pass, never beside one: it reads and writes the same journal rows.
    this.checkPending = true;
    this.remoteDirty = true;
    this.lastCheck = undefined;
    await this.syncNow();
    return this.lastCheck ?? { paths: [], roundTrips: 0, repaired: 0 };
  }

  private async runConsistencyCheck(): Promise<void> {
    const local = new LocalMerkle(this.journal.allFiles());
    const found = await findDivergence(local, (paths) => this.options.client.merkle(paths));
    const busy = this.journal
      .pendingOps()
      .flatMap(({ op }) => (op.kind === 'move' ? [op.from, op.to] : [op.path]));
    const related = (a: string, b: string): boolean =>
      a === b || a.startsWith(b + '/') || b.startsWith(a + '/');
    let repaired = 0;
    for (const p of found.paths) {
      if (busy.some((q) => related(p, q))) continue;
      this.options.trace?.('repair', p);
      await this.repairPath(p);
      repaired += 1;
    }
    this.lastCheck = { ...found, repaired, atMs: (this.options.now ?? Date.now)() };
    if (found.paths.length > 0)
      this.status.activity({
        kind: 'error',
        path: '',
        detail: `consistency check repaired ${repaired} item(s)`,
      });
  }

  /** Make `p` match the server: what it holds comes down, what it lacks goes (edits kept). */
  private async repairPath(p: string): Promise<void> {
    const current = await this.options.client.stat(p);
    const row = this.journal.getFile(p);
    // Nothing there, or a file where we had a folder (or the other way round): ours goes first.
    if (row && row.kind !== current?.kind) await this.applyDelete(p);
    if (current) await this.fetchRemoteSubtree(p, current, true);
  }

  /**
   * Bring down whatever the server holds at `p` (a file, or a folder and its content).
   * `dropMissing`: synced entries under the folder the server no longer has go too.
   */
  private async fetchRemoteSubtree(p: string, known?: EntryInfo, dropMissing = false): Promise<void> {
    const current = known ?? (await this.options.client.stat(p));
    if (current?.kind === 'file') {
      await this.downloadMany([current]);
    } else if (current?.kind === 'dir') {
      const listing = await this.options.client.list(p, true);
      if (dropMissing) {
        const there = new Set(listing.entries.map((e) => e.path));
        const gone = this.journal
          .filesUnder(p)
          .filter((r) => r.path !== p && r.syncedRev !== null && !there.has(r.path))
          .sort((a, b) => (a.path < b.path ? -1 : 1));
        // Top-most first; a folder's delete takes its content with it.
        for (const r of gone) if (this.journal.getFile(r.path)) await this.applyDelete(r.path);
      }
      await this.applyUpsert(current);
      for (const d of listing.entries.filter((e) => e.kind === 'dir')) await this.applyUpsert(d);
      await this.downloadMany(listing.entries.filter((e) => e.kind === 'file'));
    }
  }

  private async pushBundles(run: readonly { id: number; op: Op }[]): Promise<void> {
    let batch: { id: number; entry: BundleEntry }[] = [];
    let bytes = BUNDLE_OVERHEAD;
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      const current = batch;
      batch = [];
      bytes = BUNDLE_OVERHEAD;
      this.journal.markSent(current.map((b) => ({ path: b.entry.path, sha256: b.entry.sha256 })));
      const encoded = encodeBundle(
        current.map((b) => b.entry),
        {
          compress:
            shouldCompress(current.map((b) => b.entry.path)) &&
            this.compression.shouldCompress(
              current.map((b) => b.entry.content),
              this.uploadRate.rate,
            ),
        },
      );
      const started = performance.now();
      const results = await this.options.client.uploadBundle(encoded);
      this.options.trace?.(
        'bundle',
        current.map((b, i) => ({
          path: b.entry.path,
          rev: b.entry.rev,
          sha: b.entry.sha256,
          result: results[i]?.result,
        })),
      );
      this.uploadRate.add(encoded.byteLength, (performance.now() - started) / 1000);
      if (current.length > 1) this.status.save('requestsSavedByBundling', current.length - 1);
      this.journal.transaction(() => {
        current.forEach((b, i) => {
          const r = results[i]?.result;
          this.finishPut(b.id, b.entry.path, b.entry.sha256, r);
        });
      });
      this.status.update({ bytesUploaded: this.status.get().bytesUploaded + encoded.byteLength });
    };
    for (const q of run) {
      if (q.op.kind !== 'put') continue;
      let abs: string;
      let content: Buffer;
      try {
        abs = await this.at(q.op.path);
        content = await fsp.readFile(abs);
      } catch {
        this.journal.completeOp(q.id, () => undefined); // gone since: the scanner queues its delete
        continue;
      }
      const sha = createHash('sha256').update(content).digest('hex');
      const row = this.journal.getFile(q.op.path);
      const st = await fsp.lstat(abs, { bigint: true });
      const entry: BundleEntry = {
        path: q.op.path,
        rev: row?.syncedRev ?? null,
        mtimeMs: Number(st.mtimeMs),
        sha256: sha,
        content,
      };
      const size = bundleEntrySize(entry.path, entry.rev, content.byteLength);
      if (bytes + size > MAX_BUNDLE_BYTES) await flush();
      batch.push({ id: q.id, entry });
      bytes += size;
    }
    await flush();
  }

  /** Record the outcome of one file write on the server. */
  private finishPut(
    opId: number,
    p: string,
    sha: string,
    r: OpResult | undefined,
    signature?: { bytes: Buffer; block: number },
  ): void {
    this.journal.completeOp(opId, () => {
      this.journal.clearSent(p);
      if (!r) return;
      if (r.status === 'applied' && r.entry) {
        const row = this.journal.getFile(p);
        if (row) {
          this.journal.upsertFile({
            ...row,
            syncedRev: r.entry.revision,
            syncedHash: r.entry.sha256 ?? sha,
            signature: signature?.bytes ?? null,
            signatureBlock: signature?.block ?? null,
          });
        }
      }
      if (r.status === 'error') this.status.activity({ kind: 'error', path: p, detail: r.error.message });
    });
    if (r?.status === 'error') this.reconcileEverything();
    if (r?.status === 'applied') this.status.activity({ kind: 'uploaded', path: p });
    if (r?.status === 'conflict')
      this.handleServerConflict({ kind: 'put', path: p, hash: sha, size: 0, created: false }, r);
  }

  /**
   * The server kept our write as a conflicted copy (someone else changed the file first).
   * Mirror that locally once the current request is done: our content moves to the
   * copy's name, and the version the server has at the original name is fetched now —
   * the feed may have delivered it before our write, so it would not come again.
   */
  private handleServerConflict(op: Op, r: Extract<OpResult, { status: 'conflict' }>): void {
    const { path, conflictPath } = r.conflict;
    this.status.conflict(path, conflictPath || path);
    this.serverConflicts.push({ op, path, conflictPath, entry: r.entry });
    this.remoteDirty = true;
    this.again = true;
  }

  private serverConflicts: { op: Op; path: string; conflictPath: string; entry: EntryInfo | undefined }[] =
    [];

  private async resolveServerConflicts(): Promise<void> {
    for (const c of this.serverConflicts.splice(0))
      await this.guarded(c.path, () => this.resolveServerConflict(c));
  }

  private async resolveServerConflict(c: {
    op: Op;
    path: string;
    conflictPath: string;
    entry: EntryInfo | undefined;
  }): Promise<void> {
    if (c.op.kind === 'put' && c.conflictPath !== '') {
      const row = this.journal.getFile(c.path);
      const from = await this.at(c.path);
      const to = await this.at(c.conflictPath);
      await fsp.mkdir(nodePath.dirname(to), { recursive: true });
      const moved = await fsp
        .rename(from, to)
        .then(() => true)
        .catch(() => false);
      const st = moved ? await fsp.lstat(to, { bigint: true }).catch(() => undefined) : undefined;
      this.journal.transaction(() => {
        if (st && row) {
          this.journal.upsertFile({
            ...row,
            path: c.conflictPath,
            size: Number(st.size),
            mtimeNs: st.mtimeNs,
            inode: st.ino,
            syncedRev: c.entry?.revision ?? null,
            syncedHash: c.entry?.sha256 ?? row.hash,
            signature: null,
            signatureBlock: null,
          });
        }
        this.journal.deleteFile(c.path);
      });
    }
    // Whatever the server now has at the path (or nothing): apply it as a remote change.
    await this.fetchRemoteSubtree(c.path);
  }

  private async pushLarge(opId: number, op: Extract<Op, { kind: 'put' }>): Promise<void> {
    let abs: string;
    let st: import('node:fs').BigIntStats;
    try {
      abs = await this.at(op.path);
      st = await fsp.lstat(abs, { bigint: true });
    } catch {
      this.journal.completeOp(opId, () => undefined);
      return;
    }
    const size = Number(st.size);
    const sha = await sha256File(abs);
    const row = this.journal.getFile(op.path);
    const mtimeMs = Number(st.mtimeMs);
    const blockSize = chooseBlockSize(this.history(op.path));
    // Modified large file with a known base: rsync delta when Eq. 2 says it beats the whole file.
    // The base's signature is ours from the last upload, or else (the base came down from
    // another device) the one the server keeps beside the object, if it is of that base.
    let signature = row?.signature ?? null;
    if (row?.syncedRev && row.syncedHash && !signature) {
      const served = await this.options.client.signature(op.path).catch((e: unknown) => {
        if (e instanceof RemoteError) return undefined;
        throw e;
      });
      if (served && served.sha256 === row.syncedHash) signature = Buffer.from(served.bytes);
    }
    if (row?.syncedRev && signature && row.syncedHash) {
      const started = performance.now();
      const parts: Uint8Array[] = [];
      for await (const c of rsyncDelta(signature, createReadStream(abs) as AsyncIterable<Uint8Array>))
        parts.push(c);
      const deltaBytes = Buffer.concat(parts);
      this.deltaRate.add(size, (performance.now() - started) / 1000);
      const container = encodeDeltaContainer(
        { baseSha256: row.syncedHash, targetSha256: sha, targetSize: size, delta: deltaBytes },
        { compress: true },
      );
      // γ measured on this very edit; Eq. 2 weighs it against the uplink and the server's tier link.
      const gamma = size > 0 ? Math.max(0, 1 - container.byteLength / size) : 0;
      if (
        deltaPays(
          this.uploadRate.rate,
          this.deltaRate.rate,
          this.options.serverTierRate ?? 100 * 1024 * 1024,
          gamma,
        )
      ) {
        try {
          this.journal.markSent([{ path: op.path, sha256: sha }]);
          const r = await this.options.client.uploadDelta(op.path, row.syncedRev, mtimeMs, container);
          const sig = await this.signatureOf(abs, row.signatureBlock ?? blockSize);
          this.status.save('deltaBytesSaved', Math.max(0, size - container.byteLength));
          this.status.update({ bytesUploaded: this.status.get().bytesUploaded + container.byteLength });
          this.lastUpload = { path: op.path, mode: 'delta', bytes: container.byteLength };
          this.finishPut(opId, op.path, sha, r, sig);
          return;
        } catch (e) {
          // The server lost the base, or refused the delta (say, made from a stale
          // signature): the whole file is always a correct answer.
          if (!(e instanceof RemoteError) || e.status >= 500 || e.status === 429) throw e;
          this.journal.upsertFile({ ...row, signature: null, signatureBlock: null });
        }
      }
    }
    await this.uploadWhole(opId, op.path, abs, size, sha, mtimeMs, row?.syncedRev ?? null, blockSize);
  }

  private async signatureOf(abs: string, blockSize: number): Promise<{ bytes: Buffer; block: number }> {
    const parts: Uint8Array[] = [];
    for await (const c of rsyncSignature(createReadStream(abs) as AsyncIterable<Uint8Array>, { blockSize }))
      parts.push(c);
    return { bytes: Buffer.concat(parts), block: blockSize };
  }

  /** New large file: 4 MiB transfer blocks, several in flight, resumable from the server's acks. */
  private async uploadWhole(
    opId: number,
    p: string,
    abs: string,
    size: number,
    sha: string,
    mtimeMs: number,
    baseRevision: string | null,
    blockSize: number,
  ): Promise<void> {
    const client = this.options.client;
    const saved = this.journal.db.prepare('SELECT transfer_id, hash FROM transfers WHERE path = ?').get(p) as
      { transfer_id: string; hash: string } | undefined;
    let state = saved && saved.hash === sha ? await client.getTransfer(saved.transfer_id) : undefined;
    if (!state) {
      state = await client.createTransfer({ path: p, size, sha256: sha, mtimeMs, baseRevision });
      this.journal.db
        .prepare(
          'INSERT INTO transfers(path, transfer_id, hash, size) VALUES (?, ?, ?, ?) ON CONFLICT(path) DO UPDATE SET transfer_id = excluded.transfer_id, hash = excluded.hash, size = excluded.size',
        )
        .run(p, state.transferId, sha, size);
    }
    const transferId = state.transferId;
    if (!state.haveObject) {
      const blockBytes = Math.min(state.maxBlockBytes, MAX_BLOCK_PAYLOAD);
      const have = state.received;
      const missing: { seq: number; offset: number; length: number }[] = [];
      for (let seq = 0, offset = 0; offset < size || (size === 0 && seq === 0); seq++, offset += blockBytes) {
        const length = Math.min(blockBytes, size - offset);
        const covered = have.some((r) => r.offset <= offset && r.offset + r.length >= offset + length);
        if (!covered) missing.push({ seq, offset, length });
        if (size === 0) break;
      }
      const fh = await fsp.open(abs, 'r');
      let done = size - missing.reduce((n, m) => n + m.length, 0);
      const started = performance.now();
      try {
        // Every block's outcome is heard, even while the next one is read (issue #14).
        const blocks = new BoundedTasks(this.options.blocksInFlight ?? 4);
        for (const m of missing) {
          const payload = Buffer.alloc(m.length);
          await fh.read(payload, 0, m.length, m.offset);
          const frame = encodeTransferBlock({
            transferId,
            seq: m.seq,
            offset: m.offset,
            last: m.offset + m.length >= size,
            payload,
          });
          await blocks.add(async () => {
            await client.putBlock(transferId, frame);
            done += m.length;
            const secs = (performance.now() - started) / 1000;
            const rate = secs > 0 ? done / secs : 0;
            this.status.transfer({
              path: p,
              direction: 'up',
              bytesDone: done,
              bytesTotal: size,
              rate,
              etaSeconds: rate > 0 ? (size - done) / rate : undefined,
            });
          });
        }
        await blocks.drain();
      } finally {
        await fh.close();
      }
      this.uploadRate.add(size, (performance.now() - started) / 1000);
      this.status.update({ bytesUploaded: this.status.get().bytesUploaded + size });
    }
    this.journal.markSent([{ path: p, sha256: sha }]);
    const [r] = await client.ops([
      {
        op: 'commit',
        path: p,
        sha256: sha,
        size,
        mtimeMs,
        // Content the server already holds is linked by hash; naming the transfer (to which
        // no block was sent) is TRANSFER_INCOMPLETE and the file never went up (issue #15,
        // found by the engine harness: test/fake-cloud-transfers.test.ts).
        ...(state.haveObject ? {} : { transferId }),
        ...(baseRevision === null ? { baseRevision: null } : { baseRevision }),
      },
    ]);
    this.journal.db.prepare('DELETE FROM transfers WHERE path = ?').run(p);
    this.lastUpload = { path: p, mode: 'whole', bytes: state.haveObject ? 0 : size };
    const sig = await this.signatureOf(abs, blockSize);
    this.finishPut(opId, p, sha, r, sig);
  }

  // ------------------------------------------------------------------ feed

  private connectFeed(): void {
    if (this.stopped) return;
    const cursor = Number(this.journal.getMeta('cursor') || 0);
    this.feed = this.options.client.openFeed(
      cursor,
      (m) => {
        if (m.type === 'error' && (m.error.code === 'DEVICE_REVOKED' || m.error.code === 'UNAUTHORIZED')) {
          this.halt(m.error.code);
          return;
        }
        if (m.type === 'changes' || m.type === 'reset') {
          // A burst of remote changes (another device dropping thousands of files) becomes
          // one pull of many changes, downloaded in bundles, not one pass per change.
          this.remoteDirty = true;
          if (this.status.get().state === 'idle') this.status.update({ state: 'syncing' });
          if (!this.feedTimer) {
            this.feedTimer = setTimeout(() => {
              this.feedTimer = undefined;
              this.kick();
            }, this.options.feedDebounceMs ?? 250);
          }
        }
      },
      () => {
        this.feed = undefined;
        if (!this.stopped && !this.removed) this.scheduleRetry();
      },
    );
  }

  // ------------------------------------------------------------------ lifecycle

  getStatus(): FolderStatus {
    return this.status.get();
  }

  /** Let the current pass finish its write, then stop everything. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.feedTimer) clearTimeout(this.feedTimer);
    this.feed?.dispose();
    this.store.dispose();
    while (this.running) await this.running.catch(() => undefined);
    this.journal.setMeta('running', '0');
    this.journal.close();
    this.status.dispose();
  }

  dispose(): void {
    void this.stop();
  }

  // ------------------------------------------------------------------ local names

  /** Where the remote path `p` is on this disk; throws UnsafeLocalPathError (local-path.ts). */
  private at(p: string, allowRoot = false): Promise<string> {
    return this.paths.resolve(p, allowRoot);
  }

  /**
   * Run one remote change's local effect; a path that cannot be placed inside the folder
   * (or passes through a symbolic link) is refused with a warning and nothing is touched,
   * and the rest of the pass goes on. The entry stays on the server.
   */
  private async guarded(p: string, fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (e) {
      if (!(e instanceof UnsafeLocalPathError)) throw e;
      this.status.warn(`not written: ${JSON.stringify(p)}: ${e.message}`);
      this.status.activity({ kind: 'error', path: p, detail: e.message });
    }
  }

  /** Record (journal + status) that `p` is stored under an encoded local name, if it is. */
  private noteLocalName(p: string): void {
    const mapped = this.paths.map(p);
    const last = mapped.names.length - 1;
    const enc = mapped.encoded.find((e) => e.index === last);
    if (!enc) return;
    this.journal.recordLocalName(p, mapped.names[last] as string, enc.reason);
    this.showLocalNames();
  }

  private forgetLocalNames(p: string): void {
    this.journal.forgetLocalNamesUnder(p);
    this.showLocalNames();
  }

  /** The status lists every entry stored under another local name, with the reason in words. */
  private showLocalNames(): void {
    const rows = this.journal.localNames();
    if (rows.length === 0 && (this.status.get().storedAs ?? []).length === 0) return;
    this.status.update({
      storedAs: rows.slice(0, 200).map((r) => ({
        path: r.path,
        localName: r.localName,
        notice: describeEncoding(
          r.path.slice(r.path.lastIndexOf('/') + 1),
          r.localName,
          r.reason as Parameters<typeof describeEncoding>[2],
          this.paths.rules,
        ),
      })),
    });
  }

  /** A journal entry whose name differs from `p` only by case. */
  private caseClash(p: string): boolean {
    const key = caseFoldKey(p);
    const parent = p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '';
    return this.journal.filesUnder(parent).some((r) => r.path !== p && caseFoldKey(r.path) === key);
  }
}

/** Does the filesystem under `dir` fold case? (A probe file looked up by another case.) */
async function probeCaseInsensitive(dir: string): Promise<boolean> {
  // The temp-file prefix keeps the probe invisible to the watcher and the scanner.
  const probe = nodePath.join(dir, `${PARTIAL_PREFIX}CaseProbe`);
  await fsp.writeFile(probe, '');
  try {
    await fsp.access(nodePath.join(dir, `${PARTIAL_PREFIX}caseprobe`));
    return true;
  } catch {
    return false;
  } finally {
    await fsp.rm(probe, { force: true });
  }
}

/** A download of something the server no longer has yields nothing; other errors stand. */
function unlessGone(e: unknown): undefined {
  if (e instanceof RemoteError && e.status === 404) return undefined;
  throw e;
}

function describe(op: Op): string {
  return op.kind === 'move' ? op.to : op.path;
}

/** Compress bundles of text-like files; already-compressed formats are sent as they are. */
function shouldCompress(paths: readonly string[]): boolean {
  const packed =
    /\.(zip|gz|tgz|bz2|xz|zst|7z|rar|jpe?g|png|gif|webp|heic|mp[34]|m4a|mov|avi|mkv|pdf|docx|xlsx|pptx)$/i;
  const compressible = paths.filter((p) => !packed.test(p)).length;
  return compressible * 2 >= paths.length;
}

export { toDisposable };
