/**
 * The sync engine for one folder: the pass loop. One pass at a time (sync/pass.ts: pull,
 * scan, push) so local and remote changes never race; start and stop are here, what a failed
 * pass means in sync/pass-failure.ts (retry: sync/retry.ts), pause and the mass-delete
 * question in sync/pause.ts. Where the rest is:
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
import { DisposableStore, type Disposable } from './lifecycle.ts';
import { sweepPartials } from './local-fs.ts';
import { privateDir } from './private-file.ts';
import { SelectiveSync } from './selective-sync.ts';
import { selectiveRemote } from './selective-remote.ts';
import { StorageWatch } from './storage-usage.ts';
import type { FolderStatus, StatusModel } from './status.ts';
import { SyncContext, statusKeptIn } from './sync/context.ts';
import { ScanStopped, probeCaseInsensitive } from './sync/discovery/local.ts';
import { type ConsistencyOutcome, type PassState, initialPassState, runPass } from './sync/pass.ts';
import { passFailed, showRemoved } from './sync/pass-failure.ts';
import { PauseGate } from './sync/pause.ts';
import { RemoteLink } from './sync/remote-link.ts';
import { FolderWatcher } from './watcher.ts';

export type { EngineOptions } from './engine-options.ts';
export { DEVICE_REMOVED_MESSAGE, DEVICE_UNKNOWN_MESSAGE } from './engine-options.ts';

/** The longest setTimeout wait (2^31 − 1 ms, ~24.8 days). */
const MAX_TIMER_MS = 2_147_483_647;

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
  private readonly state: PassState = initialPassState();
  /** Paused by the person, or waiting for a mass-delete answer (sync/pause.ts). */
  private readonly gate: PauseGate;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private idleWaiters: (() => void)[] = [];
  private lastError: unknown;

  constructor(private readonly options: EngineOptions) {
    const journal = new Journal(nodePath.join(options.stateDir, 'journal.db'));
    this.journal = journal;
    this.status = statusKeptIn(journal, options.folder);
    // Discovery sees the server without the folders left out here (selective-remote.ts).
    const client = selectiveRemote(options.client, () => this.selective);
    this.ctx = SyncContext.forFolder({ ...options, client }, journal, this.status, {
      markDirty: (scope) => this.markDirty(scope),
      pullAgain: () => {
        this.state.remoteDirty = true;
        this.again = true;
      },
      // Forget the feed position: the next pull lists the whole folder and compares.
      reconcileEverything: () => {
        this.journal.setMeta('cursor', '');
        this.state.remoteDirty = true;
        this.again = true;
      },
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
      onRemoved: () => showRemoved(this.status, this.link),
      stopped: () => this.stopped,
    });
    this.gate = new PauseGate(this.state, options.now ?? Date.now);
    // The person's pause stands over the states a pass writes (a pass on its way when the
    // pause came goes on to its end; test/pause-during-pass.test.ts).
    this.status.holdState(() => (this.gate.byPerson ? 'paused' : undefined));
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
        await runPass(this.ctx, this.state, {
          options: this.options,
          storage: this.storage,
          selective: this.selective,
          paused: () => this.gate.paused,
          stopped: () => this.stopped,
          again: () => this.again,
        });
        // A pass that ran on while the feed reported the revocation does not undo its state.
        if (this.link.removed) return showRemoved(this.status, this.link);
        this.lastError = undefined;
        this.link.succeeded();
      } catch (e) {
        if (e instanceof ScanStopped && this.stopped) return; // stop() asked for it
        this.lastError = e;
        // Removed, full, offline or an error: sync/pass-failure.ts says what comes next.
        const next = passFailed(e, {
          status: this.status,
          storage: this.storage,
          link: this.link,
          pending: () => this.journal.pendingCount(),
        });
        if (next === 'stop') return this.stillPaused();
        this.again = true;
      }
      this.stillPaused();
    } while (this.again && !this.stopped);
  }

  /**
   * Paused while a pass was on its way: the states a pass writes are held back while the
   * pause lasts (StatusModel.holdState); one it is not held from (an error) is put back to
   * "paused" at the pass's end — the person's pause stands (test/pause-during-pass.test.ts).
   */
  private stillPaused(): void {
    if (this.gate.byPerson && this.status.get().state !== 'paused') this.status.update({ state: 'paused' });
  }

  /** True once the server has refused this device's token (sync/remote-link.ts). */
  get isRemoved(): boolean {
    return this.link.removed;
  }

  /** The error that stopped the last pass, if any. */
  get error(): unknown {
    return this.lastError;
  }

  pause(untilMs = Number.MAX_SAFE_INTEGER): void {
    if (this.link.removed) return;
    this.gate.pause(untilMs);
    this.status.update({ state: 'paused', pausedUntilMs: untilMs });
    this.armPauseEnd(untilMs);
  }

  resume(): void {
    if (this.link.removed) return;
    this.clearPauseEnd();
    this.gate.resume();
    this.status.update({ state: 'idle', pausedUntilMs: undefined });
    this.kick();
  }

  /** Ends a pause for a while when its time is up (PauseGate only stops holding passes back). */
  private pauseEnd: NodeJS.Timeout | undefined;

  /**
   * "Pause for 1 hour" ends by itself: at `untilMs` the status leaves "paused" and a pass
   * sends what waited — nothing else may come to start one (pause-expiry.test.ts). A pause
   * until resumed sets no timer; a wait past setTimeout's limit (~24.8 days) is re-armed.
   */
  private armPauseEnd(untilMs: number, leastMs = 0): void {
    this.clearPauseEnd();
    if (untilMs >= Number.MAX_SAFE_INTEGER) return;
    const now = this.options.now ?? Date.now;
    const wait = Math.min(Math.max(leastMs, untilMs - now()), MAX_TIMER_MS);
    this.pauseEnd = setTimeout(() => {
      this.pauseEnd = undefined;
      if (this.stopped || this.link.removed) return;
      if (this.gate.byPerson) {
        this.armPauseEnd(untilMs, 1000); // not yet: a wait longer than one timer, or a clock behind
        return;
      }
      if (this.status.get().state === 'paused')
        this.status.update({ state: 'idle', pausedUntilMs: undefined });
      this.kick();
    }, wait);
    this.pauseEnd.unref();
  }

  private clearPauseEnd(): void {
    if (this.pauseEnd) clearTimeout(this.pauseEnd);
    this.pauseEnd = undefined;
  }

  /** The person's answer to a mass delete: send the deletes, or bring the files back. */
  async resolveMassDelete(answer: 'delete' | 'restore'): Promise<void> {
    if (!this.gate.answerMassDelete(this.ctx, answer)) return;
    this.status.update({ state: 'idle', error: undefined });
    this.kick();
  }

  /** The outcome of the last consistency check (for tests and the status UI). */
  get lastCheck(): ConsistencyOutcome | undefined {
    return this.state.lastCheck;
  }

  /** The block-size history of a file (for tests and the status UI). */
  blockSizeHistory(p: string): BlockSizeHistory {
    return this.ctx.history(p);
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
    this.clearPauseEnd();
    this.link.dispose();
    this.store.dispose();
    while (this.running) await this.running.catch(() => undefined);
    this.journal.setMeta('running', '0');
    this.journal.close();
    this.status.dispose();
    await this.journal.closed();
  }

  dispose(): void {
    void this.stop();
  }
}
