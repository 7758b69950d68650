/**
 * The sync engine for one folder: the pass loop. One pass at a time (sync/pass.ts: pull,
 * scan, push) so local and remote changes never race; start, stop, retry (sync/retry.ts),
 * pause and the removed/full states are decided here. Where the rest is:
 * docs/client-engine.md, "Where the code is" — discovery (sync/discovery/*), decision
 * (decisions.ts over docs/sync-decisions.md), propagation (sync/push.ts, sync/propagate/*,
 * sync/refusals.ts). Safety: every local write is temp + fsync + rename; what is replaced
 * or deleted goes to the trash; a mass delete waits for the person; a conflict keeps both.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { type BlockSizeHistory } from './adaptive.ts';
import type { EngineOptions } from './engine-options.ts';
import { Journal } from './journal/journal.ts';
import { DisposableStore, type Disposable, toDisposable } from './lifecycle.ts';
import { sweepPartials } from './local-fs.ts';
import { OfflineError, RemoteError } from './remote/proxy-client.ts';
import { privateDir } from './private-file.ts';
import { SelectiveSync } from './selective-sync.ts';
import { selectiveRemote } from './selective-remote.ts';
import { StorageWatch, isQuotaExceeded } from './storage-usage.ts';
import { type ActivityItem, type FolderStatus, StatusModel } from './status.ts';
import { SyncContext } from './sync/context.ts';
import { ScanStopped, probeCaseInsensitive, restoreMassDelete } from './sync/discovery/local.ts';
import { type ConsistencyOutcome, type PassState, runPass } from './sync/pass.ts';
import { RemoteLink } from './sync/remote-link.ts';
import { FolderWatcher } from './watcher.ts';

export type { EngineOptions } from './engine-options.ts';
export { DEVICE_REMOVED_MESSAGE, DEVICE_UNKNOWN_MESSAGE } from './engine-options.ts';

export class Engine implements Disposable {
  readonly status: StatusModel;
  readonly journal: Journal;
  /** Weft storage usage, and whether it is full (uploads wait then; storage-usage.ts). */
  readonly storage: StorageWatch;
  private readonly store = new DisposableStore();
  /** What discovery and the propagators share (sync/context.ts). */
  private readonly ctx: SyncContext;
  /** Selective sync: the folders this device leaves out (selective-sync.ts). */
  readonly selective: SelectiveSync;
  private watcher: FolderWatcher | undefined;
  /** The live feed, the retry after a failed pass, the device's removal (sync/remote-link.ts). */
  private readonly link: RemoteLink;
  /** What the loop keeps between passes (sync/pass.ts). */
  private readonly state: PassState = {
    pendingScope: new Set<string>(['']),
    remoteDirty: true,
    checkPending: false,
    offlineSince: undefined,
    lastCheck: undefined,
    massDeletePending: false,
  };
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private pausedUntil = 0;
  private idleWaiters: (() => void)[] = [];
  private lastError: unknown;

  constructor(private readonly options: EngineOptions) {
    const journal = new Journal(nodePath.join(options.stateDir, 'journal.db'));
    this.journal = journal;
    // Recent activity lives in the journal: it survives a restart.
    this.status = new StatusModel(options.folder, {
      recent: journal.recentActivity() as ActivityItem[],
      onActivity: (item) => {
        if (journal.isOpen) journal.addActivity(item);
      },
    });
    // Discovery sees the server without the folders left out here (selective-remote.ts).
    const client = selectiveRemote(options.client, () => this.selective);
    this.ctx = SyncContext.forFolder({ ...options, client }, journal, this.status, {
      markDirty: (scope) => this.markDirty(scope),
      pullAgain: () => {
        this.state.remoteDirty = true;
        this.again = true;
      },
      reconcileEverything: () => this.reconcileEverything(),
    });
    this.ctx.showLocalNames();
    this.selective = new SelectiveSync(this.ctx, options.client, options.settleMs ?? 1000);
    this.storage = new StorageWatch({
      usage: options.client.usage?.bind(options.client),
      status: this.status,
      onRoom: () => this.kick(),
      ...(options.storageTimings ? { timings: options.storageTimings } : {}),
    });
    this.store.add(this.storage);
    this.link = new RemoteLink(options, {
      cursor: () => Number(this.journal.getMeta('cursor') || 0),
      onAnnounced: () => {
        this.state.remoteDirty = true;
        if (this.status.get().state === 'idle') this.status.update({ state: 'syncing' });
      },
      onWake: (retry) => {
        if (retry) this.state.remoteDirty = true;
        this.kick();
      },
      onRemoved: () => this.showRemoved(),
      stopped: () => this.stopped,
    });
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

  /** How the last large upload travelled (for tests and benchmarks). */
  get lastUpload(): { path: string; mode: 'delta' | 'whole'; bytes: number } | undefined {
    return this.ctx.lastUpload;
  }

  /** Start watching and syncing. */
  async start(): Promise<void> {
    // A journal still marked running was not stopped cleanly (a crash, kill -9, power
    // loss): feed events may have been lost in between, so check against the server.
    if (this.journal.getMeta('running') === '1' && this.journal.getMeta('cursor'))
      this.state.checkPending = true;
    this.journal.setMeta('running', '1');
    if (this.options.watch ?? true) {
      const w = new FolderWatcher(this.options.folder, { toRemote: (l) => this.ctx.paths.remotePath(l) });
      this.watcher = w;
      this.store.add(w);
      this.store.add(w.onDirty((scope) => this.markDirty(scope)));
      await w.start();
    }
    this.link.connect();
    this.storage.start();
    this.kick();
  }

  /** Change the ignore patterns at once (Settings): a full local pass follows. */
  setIgnorePatterns(patterns: readonly string[]): void {
    this.ctx.ignore.setExtraPatterns(patterns);
    this.markDirty(['']);
  }

  /**
   * Selective sync (Settings): leave out exactly these folders, at once. Their pending local
   * changes are uploaded first, then their local copy goes; folders no longer left out are
   * downloaded. Throws SelectionError for bad input (nothing changed).
   */
  setExcludedFolders(paths: readonly unknown[]): void {
    const touched = this.selective.set(paths);
    this.state.remoteDirty = true;
    this.markDirty(touched);
  }

  /** The ignore patterns from Settings in force. */
  ignorePatterns(): readonly string[] {
    return this.ctx.ignore.extraPatterns();
  }

  /** Ask for a pass covering these local subtrees. */
  markDirty(scope: readonly string[]): void {
    for (const s of scope) this.state.pendingScope.add(s);
    this.kick();
  }

  /** Run passes until nothing is left to do (or we are offline/paused). */
  async syncNow(): Promise<void> {
    this.state.pendingScope.add('');
    this.state.remoteDirty = true;
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
    if (this.stopped || this.link.removed) return;
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
        if (this.link.removed) return this.showRemoved();
        this.lastError = undefined;
        this.link.succeeded();
      } catch (e) {
        if (e instanceof ScanStopped && this.stopped) return; // stop() asked for it
        this.lastError = e;
        if (e instanceof RemoteError && e.status === 401) {
          this.link.halt(e.code);
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
          this.link.retryLater();
          return;
        }
        this.status.update({ state: 'error', error: (e as Error).message });
        this.link.retryLater();
        return;
      }
    } while (this.again && !this.stopped);
  }

  private showRemoved(): void {
    this.status.update({ state: 'removed', error: this.link.message, transfers: [] });
  }

  private showFull(): void {
    this.status.update({
      state: 'full',
      error: this.storage.message(this.journal.pendingOps().length),
      transfers: this.status.get().transfers.filter((t) => t.direction === 'down'),
    });
  }

  /** True once the server has refused this device's token (sync/remote-link.ts). */
  get isRemoved(): boolean {
    return this.link.removed;
  }

  /** The error that stopped the last pass, if any. */
  get error(): unknown {
    return this.lastError;
  }

  // ------------------------------------------------------------------ pause / guard

  pause(untilMs = Number.MAX_SAFE_INTEGER): void {
    if (this.link.removed) return;
    this.pausedUntil = untilMs;
    this.status.update({ state: 'paused', pausedUntilMs: untilMs });
  }

  resume(): void {
    if (this.link.removed) return;
    this.pausedUntil = 0;
    this.status.update({ state: 'idle', pausedUntilMs: undefined });
    this.kick();
  }

  private get paused(): boolean {
    if (this.pausedUntil > 0 && (this.options.now ?? Date.now)() >= this.pausedUntil) this.pausedUntil = 0;
    return this.pausedUntil > 0 || this.state.massDeletePending;
  }

  /** The person's answer to a mass delete: send the deletes, or bring the files back. */
  async resolveMassDelete(answer: 'delete' | 'restore'): Promise<void> {
    if (!this.state.massDeletePending) return;
    if (answer === 'restore') {
      restoreMassDelete(this.ctx);
    }
    this.state.massDeletePending = false;
    this.status.update({ state: 'idle', error: undefined });
    this.state.remoteDirty = true;
    this.kick();
  }

  // ------------------------------------------------------------------ one pass

  private async pass(): Promise<void> {
    await runPass(this.ctx, this.state, {
      options: this.options,
      storage: this.storage,
      selective: this.selective,
      paused: () => this.paused,
      stopped: () => this.stopped,
      again: () => this.again,
    });
  }

  /** The outcome of the last consistency check (for tests and the status UI). */
  get lastCheck(): ConsistencyOutcome | undefined {
    return this.state.lastCheck;
  }

  /** The block-size history of a file (for tests and the status UI). */
  blockSizeHistory(p: string): BlockSizeHistory {
    return this.ctx.history(p);
  }

  /** Forget the feed position: the next pull lists the whole folder and compares. */
  private reconcileEverything(): void {
    this.journal.setMeta('cursor', '');
    this.state.remoteDirty = true;
    this.again = true;
  }

  /**
   * Compare the journal's synced view with the server's namespace by Merkle hashes and
   * repair every entry where they differ as a remote change (download, delete, or keep
   * both on a conflict). Entries with local operations still queued are left to those.
   */
  async checkConsistency(): Promise<{ paths: string[]; roundTrips: number; repaired: number }> {
    // Run inside a pass, never beside one: it reads and writes the same journal rows.
    this.state.checkPending = true;
    this.state.remoteDirty = true;
    this.state.lastCheck = undefined;
    await this.syncNow();
    return this.lastCheck ?? { paths: [], roundTrips: 0, repaired: 0 };
  }

  // ------------------------------------------------------------------ lifecycle

  getStatus(): FolderStatus {
    return this.status.get();
  }

  /** Let the current pass finish its write, then stop everything. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.link.dispose();
    this.store.dispose();
    while (this.running) await this.running.catch(() => undefined);
    this.journal.setMeta('running', '0');
    this.journal.close();
    this.status.dispose();
  }

  dispose(): void {
    void this.stop();
  }
}

export { toDisposable };
