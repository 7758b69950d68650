/**
 * The mirror engine (DESIGN §5, CoCloud §III-A): keeps the member replicas of one share —
 * each a folder in some provider (Dropbox, Drive, OneDrive, Weft storage, …) — identical.
 *
 * One step = ingest, then drain:
 * - **Ingest**: each replica's change feed is read from its persisted cursor (a `reset`, a
 *   first start or a provider without a feed means a full re-listing, diffed against what
 *   the engine last saw there). Changes the engine caused itself are recognised by
 *   revision (and, after a restart, by content hash at processing time) and dropped; the
 *   rest are snapshotted (stat, read, stat: content and revision agree) and appended to the
 *   share's one ordered log, with the cursor, in one transaction. A delete followed by
 *   upserts of the same revisions/hashes becomes a move.
 * - **Drain**: log entries are applied in order to every other replica: entries on the same
 *   path strictly one after another (stop-and-wait), unrelated paths in parallel (the
 *   providers' wrappers bound calls per provider); folder deletes and moves are barriers.
 *   Every write is conditional on the revision the engine last knew on that replica
 *   (`ifRevision`, or `ifNotExists`); when it fails and the replica's content is neither the
 *   known one nor the incoming one, someone edited concurrently: their version stays in
 *   place and the incoming one is written as a conflicted copy, which is itself appended
 *   to the log and so reaches every replica. Edits win over concurrent deletes.
 *
 * The parts (discovery → bookkeeping → propagation, as in the client engine):
 * - ingest.ts (discovery, with move-detect.ts, pure) reads feeds into the log;
 * - drain.ts applies the log in order: books.ts records each entry at its origin and
 *   decides whether it propagates, propagate/*.ts apply it to each target;
 * - replica-view.ts is what the engine saw on each replica, outage-log.ts which replicas
 *   are unavailable, parking.ts removes folders safely, anti-entropy.ts verifies and
 *   reconciles, seed.ts seeds joining members. This file composes them and runs the loop.
 * Every time read comes from one injected clock (clock.ts).
 *
 * Guarantee (tested): when activity stops, every replica holds the same tree and every
 * version written anywhere is present, in place or as a conflicted copy.
 */
import type Database from 'better-sqlite3';
import { pino, type Logger } from 'pino';
import { type Provider, type WrapConfig, isTransient, normalizePath, wrapProvider } from '@weft/providers';
import { Backoff } from '@weft/providers/backoff';
import { relistAgainstBooks } from './anti-entropy.ts';
import { type Clock, systemClock, systemTimer, type Timer } from './clock.ts';
import {
  type ChangeWaiter,
  type EngineContext,
  type MirrorStats,
  type Replica,
  zeroMirrorStats,
} from './context.ts';
import { drain } from './drain.ts';
import { MirrorConfigError, NotQuiescentError } from './errors.ts';
import { ingest } from './ingest.ts';
import { OutageLog, type ReplicaStatus } from './outage-log.ts';
import { Parking } from './parking.ts';
import { ReplicaView, seenFromBooks } from './replica-view.ts';
import { seedJoiners } from './seed.ts';
import { type MirrorBooks, type ShareStore, SqliteShareStore } from './store.ts';

export type { ChangeWaiter, MirrorStats } from './context.ts';
export { zeroMirrorStats } from './context.ts';
export type { ReplicaStatus } from './outage-log.ts';

export interface ReplicaConfig {
  /** Stable id of this replica within the share (persisted state is keyed by it). */
  readonly id: string;
  /** The member who keeps it; names conflicted copies of their versions. */
  readonly member: string;
  /** The provider account (unwrapped: the engine composes retry/pacing/concurrency). */
  readonly provider: Provider;
  /** Folder in the provider that is the share's root ('' = the provider root). */
  readonly root: string;
  /** Wrapper configuration, e.g. WRAP_DEFAULTS.dropbox. Default: retries only. */
  readonly wrap?: WrapConfig;
  /**
   * A push or long-poll notification of changes after a feed cursor (Dropbox
   * `list_folder/longpoll`, the proxy's own namespace feed). With it, start() reads this
   * replica's feed only when told something changed instead of at every poll.
   */
  readonly waitForChanges?: ChangeWaiter;
  /**
   * Re-list this replica at the first round of each engine instead of resuming its feed:
   * for feeds that name removed and moved items by id only and map ids to paths through the
   * client's in-memory index (Google Drive changes, Graph delta) — a new process has an
   * empty index and would drop deletes and moves made while it was down, or before its
   * index learnt those items. The re-listing (diffed against what the engine knew) finds
   * them and fills the index. The feed resumes from a cursor taken before the listing.
   */
  readonly relistOnStart?: boolean;
}

export interface MirrorEngineOptions {
  readonly shareId: string;
  readonly replicas: readonly ReplicaConfig[];
  /**
   * The books: an open SQLite database (see openDatabase in store.ts), shared by the shares
   * of a process, or any MirrorBooks (`books`, e.g. the proxy's PostgreSQL ones). One of the two.
   */
  readonly db?: Database.Database;
  readonly books?: MirrorBooks;
  readonly logger?: Logger;
  /**
   * The one clock (ms since the epoch) for everything the engine times: log entries,
   * conflicted-copy names, outages and their probes, the drain budget, folders set aside
   * for removal, the verification interval. Default: the system clock.
   */
  readonly now?: Clock;
  /** Log entries applied at once (unrelated paths). Default 16. */
  readonly concurrency?: number;
  /** Pause between steps in start(). Default 2,000 ms. */
  readonly pollIntervalMs?: number;
  /** Entries per feed page requested. Default 500. */
  readonly pageSize?: number;
  /**
   * While running, re-list every replica against the books this often (anti-entropy: a
   * feed may miss a change, and what a restarted engine would start from is checked).
   * Default 1 hour; 0 = never. quiesce() always ends with one.
   */
  readonly verifyIntervalMs?: number;
  /**
   * A folder the engine removes is first set aside under a hidden name and removed only
   * this long after, if still empty (else it is put back): a save already on its way into
   * it (a client that resolved the folder's id just before) lands there meanwhile. Default
   * 5,000 ms. quiesce() and stop() settle every set-aside folder at once.
   */
  readonly parkSettleMs?: number;
  /**
   * One round stops starting log entries after this long (at least `concurrency` are
   * started), so that a long backlog does not leave the feeds unread meanwhile; the next
   * round goes on from there. Default 10,000 ms.
   */
  readonly drainBudgetMs?: number;
  /**
   * Called after each log entry is applied everywhere (or kept for a retry): how many were
   * applied in this drain and how many remain — e.g. a joining member's seeding progress.
   */
  readonly onProgress?: (p: { readonly applied: number; readonly pending: number }) => void;
  /** Called after each round of start(): entries still pending, and the round's error if it failed. */
  readonly onRound?: (r: { readonly pending: number; readonly error?: unknown }) => void;
  /**
   * How often an unavailable replica is tried again (Weft's one retry policy,
   * `@weft/providers/backoff`): at the next round after the first failure, then up to
   * `first` after the second, the ceiling doubling with each failed try up to `max`; the
   * wait is drawn in [ceiling/2, ceiling) (`jitter` 'equal', the default) or is the ceiling
   * ('none'). A Retry-After the cloud sent (TransientError.retryAfterMs) replaces it, capped
   * at `max`. Defaults 2,000 ms and 600,000 ms (10 min).
   */
  readonly probeBackoffMs?: {
    readonly first?: number;
    readonly max?: number;
    readonly jitter?: 'equal' | 'full' | 'none';
  };
  /**
   * Verify (anti-entropy: every replica re-listed against the books, then compared with the
   * share) as soon as start()'s first backlog is drained, instead of only after
   * verifyIntervalMs. For an engine that takes over books another process may have left
   * half-done (a controller killed mid-write, a crash): whatever it left — a write made but
   * not recorded, a book row for a write that never landed, a feed change read but lost — is
   * found and converged then, not an hour later. Default false.
   */
  readonly verifyAtStart?: boolean;
  /** Uniform in [0, 1): the backoffs' jitter. Default Math.random (injected by tests). */
  readonly random?: () => number;
  /**
   * Where a watcher waits before asking again after its change notification failed (Weft's
   * one retry policy: from pollIntervalMs doubling to a minute, with jitter, a Retry-After
   * honoured) or after the service asked for a pause. Default setTimeout (injected by tests).
   */
  readonly timer?: Timer;
}

/** verifyAtStart: verifications at most, until one finds nothing (see MirrorEngine.verifyIfDue). */
const START_VERIFICATIONS = 5;

export class MirrorEngine {
  readonly shareId: string;
  readonly stats: MirrorStats = zeroMirrorStats();
  private readonly replicas: readonly Replica[];
  private readonly store: ShareStore;
  private readonly log: Logger;
  private readonly now: Clock;
  private readonly pollIntervalMs: number;
  private readonly random: () => number;
  private readonly timer: Timer;
  private readonly verifyIntervalMs: number;
  private readonly ctx: EngineContext;
  private readonly outages: OutageLog;
  private readonly parking: Parking;
  private lastVerify = 0;
  private readonly verifyAtStart: boolean;
  /**
   * verifyAtStart's verifications so far: one per round (nothing pending) until one finds
   * nothing — a re-listing that logs something does not reconcile in the same pass — at
   * most START_VERIFICATIONS, then the interval's.
   */
  private startVerifications = 0;
  private startVerified = false;
  /** (replica, path, version) the reconciliation already logged (see anti-entropy.ts). */
  private readonly reconciled = new Set<string>();
  private readonly onRound: MirrorEngineOptions['onRound'];
  private initialized = false;
  private running: Promise<void> | undefined;
  private stopping = false;
  private wake: (() => void) | undefined;
  /** Watched replicas (with a ChangeWaiter) told to have changes since their last ingest. */
  private readonly dirty = new Set<string>();
  /** Per replica: how many times its feed was read (watchers wait for the next read). */
  private readonly ingestRounds = new Map<string, number>();
  private watchAbort: AbortController | undefined;
  private watchers: Promise<void>[] = [];
  /** Log entries appended to seed members who joined an existing share (see seed.ts). */
  seeded = 0;
  /**
   * Entries pending after the first round's ingest (seeding a joiner, or the first start's
   * merge of every replica): the denominator of a joining member's progress.
   */
  initialBacklog: number | undefined;

  constructor(options: MirrorEngineOptions) {
    this.shareId = options.shareId;
    const ids = new Set<string>();
    this.replicas = options.replicas.map((r) => {
      if (ids.has(r.id)) throw new MirrorConfigError(`duplicate replica id ${r.id}`);
      ids.add(r.id);
      return {
        id: r.id,
        member: r.member,
        provider: wrapProvider(r.provider, r.wrap ?? { retry: { maxAttempts: 3 } }),
        root: r.root === '' ? '' : normalizePath(r.root),
        ...(r.waitForChanges ? { waitForChanges: r.waitForChanges } : {}),
        ...(r.relistOnStart ? { relistOnStart: true } : {}),
      };
    });
    if (options.books) this.store = options.books.share(options.shareId);
    else if (options.db) this.store = new SqliteShareStore(options.db, options.shareId);
    else throw new MirrorConfigError('a mirror engine needs its books (db or books)');
    this.log = (options.logger ?? pino({ level: 'silent' })).child({ share: options.shareId });
    this.now = options.now ?? systemClock;
    this.pollIntervalMs = options.pollIntervalMs ?? 2000;
    this.random = options.random ?? Math.random;
    this.timer = options.timer ?? systemTimer;
    this.verifyIntervalMs = options.verifyIntervalMs ?? 3_600_000;
    this.verifyAtStart = options.verifyAtStart ?? false;
    this.onRound = options.onRound;
    this.outages = new OutageLog({
      store: this.store,
      log: this.log,
      now: this.now,
      stats: this.stats,
      probe: {
        baseMs: options.probeBackoffMs?.first ?? 2000,
        capMs: options.probeBackoffMs?.max ?? 600_000,
        jitter: options.probeBackoffMs?.jitter ?? 'equal',
      },
      random: this.random,
    });
    this.parking = new Parking({
      store: this.store,
      log: this.log,
      now: this.now,
      stats: this.stats,
      settleMs: options.parkSettleMs ?? 5000,
    });
    this.ctx = {
      shareId: this.shareId,
      replicas: this.replicas,
      byId: new Map(this.replicas.map((r) => [r.id, r])),
      store: this.store,
      log: this.log,
      now: this.now,
      stats: this.stats,
      view: new ReplicaView(),
      outages: this.outages,
      parking: this.parking,
      facts: { nativeOk: new Set(), previousHead: new Map(), movedDuplicates: new Map() },
      concurrency: options.concurrency ?? 16,
      pageSize: options.pageSize ?? 500,
      drainBudgetMs: options.drainBudgetMs ?? 10_000,
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      stopping: () => this.stopping,
    };
  }

  // ---------------------------------------------------------------- lifecycle

  private async init(): Promise<void> {
    if (this.initialized) return;
    await this.outages.load(this.replicas);
    for (const r of this.replicas) {
      if (r.root !== '' && !this.outages.isDown(r.id)) {
        // An unavailable replica's root is made when it is back (a write like any other).
        try {
          await r.provider.mkdir(r.root);
        } catch (e) {
          await this.outages.failed(r, e, 'creating its folder');
        }
      }
      this.ctx.view.load(r, await seenFromBooks(this.store, r));
    }
    this.seeded += await seedJoiners(this.ctx);
    this.initialized = true;
  }

  /**
   * One round: read every replica's feed into the log, then apply the log. Returns how
   * many log entries were appended plus how many were applied (0 = nothing happened).
   */
  async step(): Promise<number> {
    return this.round(false);
  }

  /** One round; `gated`: watched replicas are read only when their watcher reported changes. */
  private async round(gated: boolean): Promise<number> {
    this.outages.beginRound();
    await this.init();
    let n = 0;
    for (const r of this.replicas) {
      if (this.stopping) return n;
      // An unavailable replica is read again only when it is tried again (its probe).
      if (!this.outages.readable(r.id)) continue;
      if (gated && r.waitForChanges && (await this.store.cursor(r.id)) !== undefined && !this.dirty.has(r.id))
        continue;
      this.dirty.delete(r.id);
      try {
        n += await ingest(this.ctx, r, !this.ingestRounds.has(r.id));
      } catch (e) {
        if (this.stopping) throw e;
        this.dirty.add(r.id);
        await this.outages.failed(r, e, 'reading');
        continue;
      }
      this.ingestRounds.set(r.id, (this.ingestRounds.get(r.id) ?? 0) + 1);
    }
    this.initialBacklog ??= await this.store.pendingCount();
    n += await drain(this.ctx);
    await this.outages.endRound();
    n += await this.parking.settle(false);
    return n;
  }

  /** Every replica's state: available or not (why, since when), and how much waits for it. */
  replicaStatus(): Promise<ReplicaStatus[]> {
    return this.outages.status(this.replicas, this.initialized);
  }

  /** Sleep `ms` (on `timer`) or until `signal` aborts (resolves either way). */
  private pause(ms: number, signal: AbortSignal, timer: Timer = systemTimer): Promise<void> {
    return new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      const done = (): void => {
        cancel();
        signal.removeEventListener('abort', done);
        resolve();
      };
      const cancel = timer(done, ms);
      signal.addEventListener('abort', done);
    });
  }

  /**
   * A watched replica's loop: wait for the service to report changes after the persisted
   * cursor, mark the replica dirty and wake the main loop, then wait until its feed has been
   * read once more before asking again (else a long-poll answers "changes" at once).
   */
  private async watch(r: Replica, wait: ChangeWaiter, signal: AbortSignal): Promise<void> {
    const cap = Math.max(this.pollIntervalMs, 60_000);
    const retry = new Backoff({ baseMs: this.pollIntervalMs, capMs: cap, jitter: 'equal' }, this.random);
    while (!signal.aborted) {
      const cursor = await this.store.cursor(r.id);
      if (cursor === undefined) {
        await this.pause(this.pollIntervalMs, signal);
        continue;
      }
      let backoff = 0;
      try {
        const res = await wait(cursor, signal);
        retry.reset();
        backoff = res.backoffMs ?? 0;
        if (!res.changes) {
          if (backoff > 0) await this.pause(backoff, signal, this.timer);
          continue;
        }
      } catch (e) {
        if (signal.aborted) return;
        // Read the feed instead, then ask again after a wait on the one retry policy.
        backoff = retry.next(isTransient(e) ? e.retryAfterMs : undefined);
        this.log.warn(
          { replica: r.id, err: e, retryInMs: backoff },
          'change notification failed: reading the feed',
        );
      }
      const round = this.ingestRounds.get(r.id) ?? 0;
      this.dirty.add(r.id);
      this.wake?.();
      while (!signal.aborted && (this.ingestRounds.get(r.id) ?? 0) === round) {
        await this.pause(Math.min(this.pollIntervalMs, 250), signal);
      }
      if (backoff > 0) await this.pause(backoff, signal, this.timer);
    }
  }

  /**
   * Step until a round finds nothing new and nothing is pending, and a verification
   * (every replica re-listed against the persisted books) finds nothing either: the state
   * a restarted engine starts from is the replicas' real state.
   */
  async quiesce(maxRounds = 200): Promise<void> {
    for (let i = 0; i < maxRounds; i++) {
      const n = await this.step();
      const next = this.outages.nextProbeMs();
      if (n === 0 && next !== undefined) {
        // Waiting for an unavailable replica: until its next try (at most a second a round).
        await new Promise((resolve) => setTimeout(resolve, Math.min(1000, Math.max(0, next - this.now()))));
      }
      if (n !== 0 || (await this.store.pendingCount()) !== 0) continue;
      // Activity has stopped (the caller's promise): nothing is on its way any more.
      if ((await this.parking.settle(true)) !== 0) continue;
      if ((await this.verify()) === 0 && (await this.store.pendingCount()) === 0 && this.parking.count === 0)
        return;
    }
    throw new NotQuiescentError(`share ${this.shareId}: not quiescent after ${maxRounds} rounds`);
  }

  /**
   * Re-list every replica against the books (the persisted `known` rows, which is what a
   * restarted engine starts from, not this engine's in-memory view), then apply what that
   * found, and forget past head versions no replica holds any more. Returns log entries
   * appended plus applied (see anti-entropy.ts).
   */
  async verify(): Promise<number> {
    await this.init();
    this.lastVerify = this.now();
    this.stats.verifications += 1;
    const found = await relistAgainstBooks(this.ctx, this.reconciled);
    this.stats.verifyFound += found;
    if (found > 0) this.log.warn({ entries: found }, 'verification found changes the feeds had not reported');
    const applied = await drain(this.ctx);
    // The books are true to the replicas now: past head versions none of them holds are
    // never asked about again (books-store.ts pruneHeadHistory).
    const pruned = await this.store.pruneHeadHistory();
    if (pruned > 0) this.log.debug({ pruned }, 'past head versions no replica holds forgotten');
    return found + applied;
  }

  /**
   * start()'s verification, with nothing pending (the books are then all that a restart
   * would start from): at once the first time with verifyAtStart, else every
   * verifyIntervalMs (the first interval counted from the first round).
   */
  private async verifyIfDue(): Promise<void> {
    const atStart =
      this.verifyAtStart && !this.startVerified && this.startVerifications < START_VERIFICATIONS;
    if (!atStart && (this.verifyIntervalMs <= 0 || this.now() - this.lastVerify < this.verifyIntervalMs))
      return;
    if ((await this.store.pendingCount()) !== 0) return;
    if (atStart) {
      this.startVerifications += 1;
      if ((await this.verify()) === 0) this.startVerified = true;
    } else if (this.lastVerify === 0) this.lastVerify = this.now();
    else await this.verify();
  }

  /** Run steps until stop(); a step's error is logged and the next step retries. */
  start(): void {
    if (this.running) return;
    this.stopping = false;
    const abort = new AbortController();
    this.watchAbort = abort;
    this.watchers = this.replicas.flatMap((r) =>
      r.waitForChanges ? [this.watch(r, r.waitForChanges, abort.signal)] : [],
    );
    this.running = (async () => {
      while (!this.stopping) {
        try {
          await this.round(true);
          await this.verifyIfDue();
          this.onRound?.({ pending: await this.store.pendingCount() });
        } catch (e) {
          this.log.error({ err: e }, 'mirror step failed');
          const pending = await this.store.pendingCount().catch(() => 0);
          this.onRound?.({ pending, error: e });
        }
        if (this.stopping) break;
        if (this.dirty.size > 0) continue; // a watcher reported changes during the round
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, this.pollIntervalMs);
          this.wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        this.wake = undefined;
      }
    })();
  }

  /**
   * Finish the current step and stop. State is persisted: a new engine resumes. Folders set
   * aside for removal are settled now (a later engine does not know them).
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.watchAbort?.abort();
    this.wake?.();
    await this.running;
    await Promise.allSettled(this.watchers);
    this.watchers = [];
    this.running = undefined;
    await this.parking
      .settle(true)
      .catch((e: unknown) => this.log.warn({ err: e }, 'folders set aside for removal: left as they are'));
  }

  /** The first round has run (state loaded, joining members' seeding entries appended). */
  get ready(): boolean {
    return this.initialized;
  }

  /** verifyAtStart's verification has not yet found the replicas true to the books. */
  get startVerificationDue(): boolean {
    return this.verifyAtStart && !this.startVerified;
  }

  /** Log entries not yet applied everywhere. */
  pendingCount(): Promise<number> {
    return this.store.pendingCount();
  }
}
