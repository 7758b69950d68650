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
 * Guarantee (tested): when activity stops, every replica holds the same tree and every
 * version written anywhere is present, in place or as a conflicted copy.
 */
import { createHash, randomBytes } from 'node:crypto';
import type Database from 'better-sqlite3';
import { pino, type Logger } from 'pino';
import { conflictedCopyPath } from '@weft/wire';
import {
  type Entry,
  type Provider,
  type WrapConfig,
  caseFoldKey,
  collect,
  hasChangeFeed,
  hasServerSideMove,
  isProviderError,
  normalizePath,
  wrapProvider,
} from '@weft/providers';
import type { LoggedOp, Op } from './ops.ts';
import { type KnownEntry, type Outage, type OutageCause, ShareStore } from './store.ts';

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

/**
 * Resolve when something changed after `cursor` (changes: true) or a timeout passed
 * (changes: false); `backoffMs` is a pause the service asks for before the next call.
 * Rejects when `signal` aborts.
 */
export type ChangeWaiter = (
  cursor: string,
  signal: AbortSignal,
) => Promise<{ readonly changes: boolean; readonly backoffMs?: number }>;

export interface MirrorEngineOptions {
  readonly shareId: string;
  readonly replicas: readonly ReplicaConfig[];
  /** An open database (see openDatabase in store.ts); shared by the shares of a process. */
  readonly db: Database.Database;
  readonly logger?: Logger;
  /** Clock for log entries and conflicted-copy names. */
  readonly now?: () => number;
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
   * How often an unavailable replica is tried again: at the next round after the first
   * failure, then `first` after the second, doubling with each failed try up to `max`.
   * Defaults 2,000 ms and 600,000 ms (10 min).
   */
  readonly probeBackoffMs?: { readonly first?: number; readonly max?: number };
}

/** One replica's state, as shown to its member and to the share's owner. */
export interface ReplicaStatus {
  readonly id: string;
  readonly member: string;
  /** 'unavailable': it cannot take writes (or be read); its outage log waits for it. */
  readonly state: 'available' | 'unavailable';
  /** Why (only when unavailable): full, unauthorised, or failing (5xx, network, other). */
  readonly cause?: OutageCause;
  /** When it became unavailable (ms since the epoch). */
  readonly sinceMs?: number;
  /** When it is tried again (ms since the epoch). */
  readonly nextProbeMs?: number;
  /** The last error's message. */
  readonly error?: string;
  /** Log entries not yet applied to it (its outage log while unavailable). */
  readonly waiting: number;
}

export interface MirrorStats {
  /** Log entries appended from feeds (including re-listings). */
  ingested: number;
  /** Feed changes recognised as our own writes (echoes) and dropped. */
  echoes: number;
  /** Writes, removes, moves and mkdirs performed on replicas. */
  applied: number;
  /** Conflicted copies written. */
  conflicts: number;
  /** Moves done as server-side moves on a target. */
  nativeMoves: number;
  /** Full re-listings (first start, feed reset, provider without a feed). */
  relistings: number;
  /** Target applications that failed and will be retried next step. */
  failures: number;
  /** Log entries found by a verification re-listing (changes the feeds had not reported). */
  verifyFound: number;
  /** Entries a replica's cloud refused for their name (InvalidPath): not applied there. */
  refused: number;
}

interface Replica {
  readonly id: string;
  readonly member: string;
  readonly provider: Provider;
  readonly root: string;
  readonly waitForChanges?: ChangeWaiter;
  readonly relistOnStart?: boolean;
}

/** What the engine last saw or caused on a replica; `hash` is the provider's own hash. */
interface Seen extends KnownEntry {
  readonly hash?: string;
}

interface Snapshot {
  readonly kind: 'file' | 'dir';
  readonly revision: string;
  readonly sha256: string;
  readonly hash?: string;
  readonly data?: Uint8Array;
}

/** A folder set aside under a hidden name (`parked`) to be removed from `full` on `replica`. */
interface Parked {
  readonly replica: Replica;
  readonly rel: string;
  /** Where it is put back if a save arrived; undefined: left by an engine that stopped. */
  readonly full: string | undefined;
  readonly parked: string;
  /** Date.now() when it was set aside. */
  readonly at: number;
}

type SyntheticChange = { type: 'upsert'; path: string; entry: Entry } | { type: 'delete'; path: string };

/** Why a failed call makes its replica unavailable. */
function outageCause(e: unknown): OutageCause {
  const code = errorCode(e);
  if (code === 'QuotaExceeded') return 'full';
  if (code === 'Auth') return 'unauthorised';
  return 'failing';
}

/** Every ancestor of `key` and `key` itself ('a/b/c' → 'a', 'a/b', 'a/b/c'). */
function* prefixes(key: string): Iterable<string> {
  for (let i = key.indexOf('/'); i >= 0; i = key.indexOf('/', i + 1)) yield key.slice(0, i);
  yield key;
}

/** Whether an entry covering `keys` (case-folded) touches what `set` holds; a barrier also what is below. */
function overlaps(set: ReadonlySet<string> | undefined, keys: readonly string[], barrier: boolean): boolean {
  if (!set || set.size === 0) return false;
  for (const k of keys) {
    for (const p of prefixes(k)) if (set.has(p)) return true;
    if (barrier) for (const s of set) if (isUnder(s, k)) return true;
  }
  return false;
}
/** A folder being removed is first renamed to this prefix + random hex (removeEmptyFolder). */
const PARKED_PREFIX = '.weft-removing-';

/**
 * The hidden name a folder named `name` is set aside under: the prefix, random hex, and
 * the name itself when short enough (so an engine that stopped before settling it can
 * still put back a save that landed in it).
 */
function parkedName(name: string): string {
  const tag = `${PARKED_PREFIX}${randomBytes(6).toString('hex')}`;
  return Buffer.byteLength(name) <= 200 ? `${tag}-${name}` : tag;
}

/** The original name kept in a hidden name (parkedName), if any. */
function parkedOriginalName(hidden: string): string | undefined {
  if (!hidden.startsWith(PARKED_PREFIX)) return undefined;
  const m = /^[0-9a-f]{12}-(.+)$/su.exec(hidden.slice(PARKED_PREFIX.length));
  return m?.[1];
}

/** A folder the engine set aside for removal (its hidden name; not below another). */
function isParkedFolder(rel: string): boolean {
  const segs = rel.split('/');
  return segs.findIndex((s) => s.startsWith(PARKED_PREFIX)) === segs.length - 1;
}

/** Inside a folder the engine is removing: not part of the share, never ingested. */
function isParked(rel: string): boolean {
  return rel.split('/').some((s) => s.startsWith(PARKED_PREFIX));
}
const OURS_KEPT = 16;

function sha256Hex(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

function isUnder(path: string, dir: string): boolean {
  return dir === '' || path === dir || path.startsWith(dir + '/');
}

function rebase(path: string, from: string, to: string): string {
  return path === from ? to : to + path.slice(from.length);
}

function errorCode(e: unknown): string | undefined {
  return isProviderError(e) ? e.code : undefined;
}

/** All counters at zero. */
export function zeroMirrorStats(): MirrorStats {
  return {
    ingested: 0,
    echoes: 0,
    applied: 0,
    conflicts: 0,
    nativeMoves: 0,
    relistings: 0,
    failures: 0,
    verifyFound: 0,
    refused: 0,
  };
}

export class MirrorEngine {
  readonly shareId: string;
  readonly stats: MirrorStats = zeroMirrorStats();
  private readonly replicas: readonly Replica[];
  private readonly byId = new Map<string, Replica>();
  private readonly store: ShareStore;
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly concurrency: number;
  private readonly pollIntervalMs: number;
  private readonly pageSize: number;
  private readonly verifyIntervalMs: number;
  private readonly parkSettleMs: number;
  private readonly drainBudgetMs: number;
  /** Folders set aside for removal (removeEmptyFolder), settled by settleParked(). */
  private parked: Parked[] = [];
  private lastVerify = 0;
  /** (replica, path, version) the reconciliation already logged (see reconcile). */
  private readonly reconciled = new Set<string>();
  private readonly onProgress: MirrorEngineOptions['onProgress'];
  private readonly onRound: MirrorEngineOptions['onRound'];
  /** Per replica: path → what the engine last saw or caused there (in memory). */
  private readonly seen = new Map<string, Map<string, Seen>>();
  /** Per replica: path → revisions our own writes produced (recent ones). */
  private readonly ours = new Map<string, Map<string, string[]>>();
  /** Unavailable replicas (persisted in the store; see failed() and recovered()). */
  private readonly outages = new Map<string, Outage>();
  /** Unavailable replicas tried again in this round (their probe was due). */
  private readonly probing = new Set<string>();
  /** Replicas a call failed on in this round: not tried again before the next. */
  private readonly failedThisRound = new Set<string>();
  private readonly probeFirstMs: number;
  private readonly probeMaxMs: number;
  /** Moves whose origin content matches the share's: a native move on a target is safe. */
  private readonly nativeOk = new Set<number>();
  /** The share's version of a file entry's path before the entry (a target holding it is not in conflict). */
  private readonly previousHead = new Map<number, string>();
  /**
   * Per move entry: files the engine wrote on the origin at the moved path after the move
   * was read, with the content that moved (a duplicate of it): removed there (applyOp).
   */
  private readonly movedDuplicates = new Map<number, (KnownEntry & { path: string })[]>();
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
  /** Log entries appended to seed members who joined an existing share (see seedJoiners). */
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
      if (ids.has(r.id)) throw new Error(`duplicate replica id ${r.id}`);
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
    for (const r of this.replicas) this.byId.set(r.id, r);
    this.store = new ShareStore(options.db, options.shareId);
    this.log = (options.logger ?? pino({ level: 'silent' })).child({ share: options.shareId });
    this.now = options.now ?? Date.now;
    this.concurrency = options.concurrency ?? 16;
    this.pollIntervalMs = options.pollIntervalMs ?? 2000;
    this.pageSize = options.pageSize ?? 500;
    this.verifyIntervalMs = options.verifyIntervalMs ?? 3_600_000;
    this.parkSettleMs = options.parkSettleMs ?? 5000;
    this.drainBudgetMs = options.drainBudgetMs ?? 10_000;
    this.onProgress = options.onProgress;
    this.onRound = options.onRound;
    this.probeFirstMs = options.probeBackoffMs?.first ?? 2000;
    this.probeMaxMs = options.probeBackoffMs?.max ?? 600_000;
  }

  // ---------------------------------------------------------------- lifecycle

  private async init(): Promise<void> {
    if (this.initialized) return;
    for (const r of this.replicas) {
      const o = this.store.outage(r.id);
      if (o) this.outages.set(r.id, o);
    }
    for (const r of this.replicas) {
      if (r.root !== '' && !this.outages.has(r.id)) {
        // An unavailable replica's root is made when it is back (a write like any other).
        try {
          await r.provider.mkdir(r.root);
        } catch (e) {
          this.failed(r, e, 'creating its folder');
        }
      }
      this.seen.set(r.id, this.seenAtStart(r));
      this.ours.set(r.id, new Map());
    }
    await this.seedJoiners();
    this.initialized = true;
  }

  /**
   * What the engine has seen on `r`, rebuilt from the database (a new engine, or a
   * verification): the books, plus what the feed of `r` reported in log entries not yet
   * applied at their origin — the books take those in only when they are applied, in log
   * order. Without them, a re-listing would not know those paths, and a move or delete of
   * them made meanwhile would go unreported (the old path came back everywhere).
   */
  private seenAtStart(r: Replica): Map<string, Seen> {
    const seen = new Map<string, Seen>(this.store.knownUnder(r.id, '').map((k) => [k.path, k]));
    const dir: Seen = { kind: 'dir', revision: '', sha256: '' };
    for (const e of this.store.pending(0, false)) {
      if (e.origin !== r.id || e.doneTargets.includes(r.id)) continue;
      const op = e.op;
      if (op.type === 'file') seen.set(op.path, { kind: 'file', revision: op.revision, sha256: op.sha256 });
      else if (op.type === 'dir') seen.set(op.path, dir);
      else if (op.type === 'delete') {
        for (const k of [...seen.keys()]) if (isUnder(k, op.path)) seen.delete(k);
      } else {
        const moved = [...seen].filter(([k]) => isUnder(k, op.from));
        for (const [k] of moved) seen.delete(k);
        for (const [k, v] of moved) {
          if (v.kind !== 'dir') continue;
          seen.set(rebase(k, op.from, op.to), v);
        }
        for (const [rel, rev] of Object.entries(op.revisions))
          seen.set(rel === '' ? op.to : `${op.to}/${rel}`, { kind: 'file', ...rev });
        if (op.kind === 'dir') seen.set(op.to, dir);
      }
    }
    return seen;
  }

  /**
   * A member who joins a share that already ran (no cursor, nothing known, while others
   * have cursors) receives the share's current tree: one log entry per folder and file of
   * the head, its content read from a replica that holds exactly that version, applied to
   * the joiner only (every other replica is marked done). Files already in the joiner's
   * folder come in through its first re-listing, later in the log: the same content is
   * left alone; different content stays in place and the share's version becomes a
   * conflicted copy, which reaches everyone — merged, conflicts kept.
   */
  private async seedJoiners(): Promise<void> {
    if (!this.replicas.some((r) => this.store.cursor(r.id) !== undefined)) return;
    const joiners = this.replicas.filter(
      (r) => this.store.cursor(r.id) === undefined && this.store.knownUnder(r.id, '').length === 0,
    );
    if (joiners.length === 0) return;
    const head = this.store.headUnder('');
    const content = new Map<string, { origin: Replica; revision: string; data: Uint8Array }>();
    for (const h of head) {
      if (h.kind !== 'file') continue;
      for (const r of this.replicas) {
        if (joiners.includes(r) || this.store.known(r.id, h.path)?.sha256 !== h.sha256) continue;
        if (this.outages.has(r.id)) continue;
        let snap: Snapshot | undefined;
        try {
          snap = await this.snapshot(r, h.path, true);
        } catch (e) {
          this.failed(r, e, 'reading');
          continue;
        }
        // Changed there since: that change is in its feed and reaches the joiner anyway.
        if (!snap?.data || snap.sha256 !== h.sha256) continue;
        content.set(h.path, { origin: r, revision: snap.revision, data: snap.data });
        break;
      }
    }
    const someone = this.replicas.find((r) => !joiners.includes(r));
    if (!someone) return;
    const now = this.now();
    this.store.transaction(() => {
      for (const j of joiners) {
        const others = this.replicas.filter((r) => r !== j).map((r) => r.id);
        for (const h of head) {
          if (h.kind === 'dir') {
            this.store.append(someone.id, { type: 'dir', path: h.path }, undefined, now, others);
            this.seeded += 1;
            continue;
          }
          const c = content.get(h.path);
          if (!c) continue;
          const op: Op = {
            type: 'file',
            path: h.path,
            revision: c.revision,
            sha256: h.sha256,
            size: c.data.byteLength,
          };
          this.store.append(c.origin.id, op, c.data, now, others);
          this.seeded += 1;
        }
      }
    });
    this.log.info({ joiners: joiners.map((j) => j.id), entries: this.seeded }, 'seeding joining members');
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
    this.failedThisRound.clear();
    this.probing.clear();
    await this.init();
    const t = Date.now();
    for (const [id, o] of this.outages) if (o.nextProbeMs <= t) this.probing.add(id);
    let n = 0;
    for (const r of this.replicas) {
      if (this.stopping) return n;
      // An unavailable replica is read again only when it is tried again (its probe).
      if (this.outages.has(r.id) && !this.probing.has(r.id)) continue;
      if (this.failedThisRound.has(r.id)) continue;
      if (gated && r.waitForChanges && this.store.cursor(r.id) !== undefined && !this.dirty.has(r.id))
        continue;
      this.dirty.delete(r.id);
      try {
        n += await this.ingest(r);
      } catch (e) {
        if (this.stopping) throw e;
        this.dirty.add(r.id);
        this.failed(r, e, 'reading');
        continue;
      }
      this.ingestRounds.set(r.id, (this.ingestRounds.get(r.id) ?? 0) + 1);
    }
    this.initialBacklog ??= this.store.pendingCount();
    n += await this.drain();
    for (const id of this.probing) if (!this.failedThisRound.has(id)) this.recovered(id);
    n += await this.settleParked(false);
    return n;
  }

  /** Whether the engine writes to replica `id` in this round. */
  private writable(id: string): boolean {
    return !this.failedThisRound.has(id) && (!this.outages.has(id) || this.probing.has(id));
  }

  /**
   * A call on `r` failed: it is unavailable (or stays so), tried again after a backoff; what
   * is pending for it waits, in order, in its outage log, and the others go on.
   */
  private failed(r: Replica, e: unknown, doing: string): void {
    this.failedThisRound.add(r.id);
    this.stats.failures += 1;
    const t = Date.now();
    const prev = this.outages.get(r.id);
    const failures = (prev?.failures ?? 0) + 1;
    // The first failure is tried again at the next round (a blip); then first, 2·first, … max.
    const delay =
      failures === 1 ? 0 : Math.min(this.probeMaxMs, this.probeFirstMs * 2 ** Math.min(failures - 2, 30));
    const o: Outage = {
      cause: outageCause(e),
      sinceMs: prev?.sinceMs ?? t,
      failures,
      nextProbeMs: t + delay,
      error: e instanceof Error ? e.message : String(e),
    };
    this.outages.set(r.id, o);
    this.store.setOutage(r.id, o);
    const fields = { replica: r.id, member: r.member, cause: o.cause, doing, retryInMs: delay, err: e };
    if (!prev) this.log.warn(fields, 'replica unavailable: what is pending for it waits in its outage log');
    else this.log.debug(fields, 'replica still unavailable');
  }

  /** A probe of an unavailable replica went through: its outage log replays (in order). */
  private recovered(id: string): void {
    const o = this.outages.get(id);
    if (!o) return;
    this.outages.delete(id);
    this.store.setOutage(id, undefined);
    this.log.info(
      { replica: id, cause: o.cause, downMs: Date.now() - o.sinceMs, waiting: this.store.pendingFor(id) },
      'replica available again: its outage log is replayed in order',
    );
  }

  /** Every replica's state: available or not (why, since when), and how much waits for it. */
  replicaStatus(): ReplicaStatus[] {
    return this.replicas.map((r) => {
      const o = this.initialized ? this.outages.get(r.id) : this.store.outage(r.id);
      const waiting = this.store.pendingFor(r.id);
      if (!o) return { id: r.id, member: r.member, state: 'available', waiting };
      return {
        id: r.id,
        member: r.member,
        state: 'unavailable',
        cause: o.cause,
        sinceMs: o.sinceMs,
        nextProbeMs: o.nextProbeMs,
        error: o.error,
        waiting,
      };
    });
  }

  /** Sleep `ms` or until `signal` aborts (resolves either way). */
  private pause(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      const done = (): void => {
        clearTimeout(t);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const t = setTimeout(done, ms);
      signal.addEventListener('abort', done);
    });
  }

  /**
   * A watched replica's loop: wait for the service to report changes after the persisted
   * cursor, mark the replica dirty and wake the main loop, then wait until its feed has been
   * read once more before asking again (else a long-poll answers "changes" at once).
   */
  private async watch(r: Replica, wait: ChangeWaiter, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const cursor = this.store.cursor(r.id);
      if (cursor === undefined) {
        await this.pause(this.pollIntervalMs, signal);
        continue;
      }
      let backoff = 0;
      try {
        const res = await wait(cursor, signal);
        backoff = res.backoffMs ?? 0;
        if (!res.changes) {
          if (backoff > 0) await this.pause(backoff, signal);
          continue;
        }
      } catch (e) {
        if (signal.aborted) return;
        this.log.warn({ replica: r.id, err: e }, 'change notification failed: reading the feed');
        backoff = this.pollIntervalMs;
      }
      const round = this.ingestRounds.get(r.id) ?? 0;
      this.dirty.add(r.id);
      this.wake?.();
      while (!signal.aborted && (this.ingestRounds.get(r.id) ?? 0) === round) {
        await this.pause(Math.min(this.pollIntervalMs, 250), signal);
      }
      if (backoff > 0) await this.pause(backoff, signal);
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
      if (n === 0 && this.outages.size > 0) {
        // Waiting for an unavailable replica: until its next try (at most a second a round).
        const next = Math.min(...[...this.outages.values()].map((o) => o.nextProbeMs));
        await new Promise((resolve) => setTimeout(resolve, Math.min(1000, Math.max(0, next - Date.now()))));
      }
      if (n !== 0 || this.store.pendingCount() !== 0) continue;
      // Activity has stopped (the caller's promise): nothing is on its way any more.
      if ((await this.settleParked(true)) !== 0) continue;
      if ((await this.verify()) === 0 && this.store.pendingCount() === 0 && this.parked.length === 0) return;
    }
    throw new Error(`share ${this.shareId}: not quiescent after ${maxRounds} rounds`);
  }

  /**
   * Re-list every replica against the books (the persisted `known` rows, which is what a
   * restarted engine starts from, not this engine's in-memory view), then apply what that
   * found. Returns log entries appended plus applied. Feed cursors are left where they are:
   * a change both listed here and read later from a feed is recognised as seen.
   */
  async verify(): Promise<number> {
    await this.init();
    this.lastVerify = Date.now();
    let found = 0;
    for (const r of this.replicas) {
      const books = this.seenAtStart(r); // the books (plus entries pending at r: none in quiesce)
      const mine = this.seenOf(r);
      const show = (e: Seen | undefined): string =>
        e ? (e.kind === 'dir' ? 'dir' : e.sha256.slice(0, 8)) : '-';
      const differing = [...new Set([...books.keys(), ...mine.keys()])].filter(
        (k) => show(books.get(k)) !== show(mine.get(k)),
      );
      if (differing.length > 0)
        this.log.warn(
          {
            replica: r.id,
            paths: differing
              .slice(0, 20)
              .map((k) => `${k}: books ${show(books.get(k))}, seen ${show(mine.get(k))}`),
          },
          'books and in-memory view differ: re-listing against the books',
        );
      this.seen.set(r.id, books);
      found += await this.relist(r, undefined, false);
    }
    if (found === 0) found += await this.reconcile();
    this.stats.verifyFound += found;
    if (found > 0) this.log.warn({ entries: found }, 'verification found changes the feeds had not reported');
    return found + (await this.drain());
  }

  /**
   * With the books true to every replica and nothing pending, every replica should hold the
   * share's head. Where one does not, nothing is dropped: a file a replica holds that the
   * head does not (or with other content) is logged from that replica, as if its feed had
   * reported it (a different head version becomes a conflicted copy, as usual); a head file
   * or folder a replica lacks is sent to that replica alone. Each (replica, path, version)
   * is tried once per engine, so a name a cloud refuses cannot loop. Returns entries appended.
   */
  private async reconcile(): Promise<number> {
    const head = new Map(this.store.headUnder('').map((h) => [h.path, h] as const));
    const books = new Map(
      this.replicas.map(
        (r) => [r.id, new Map(this.store.knownUnder(r.id, '').map((k) => [k.path, k]))] as const,
      ),
    );
    const paths = [...new Set([...head.keys(), ...[...books.values()].flatMap((b) => [...b.keys()])])].sort();
    const now = this.now();
    let n = 0;
    const once = (r: Replica, path: string, version: string): boolean => {
      const key = `${r.id}\u0000${path}\u0000${version}`;
      if (this.reconciled.has(key)) return false;
      this.reconciled.add(key);
      return true;
    };
    // A replica with entries still pending for it (unavailable: its outage log) is behind
    // by design: its books are not compared (that outage log brings it up to date).
    const current = this.replicas.filter((r) => !this.outages.has(r.id) && this.store.pendingFor(r.id) === 0);
    for (const path of paths) {
      const h = head.get(path);
      if (h && !this.replicas.some((r) => books.get(r.id)?.has(path))) {
        this.store.setHead(path, undefined); // held nowhere: not the share's any more
        continue;
      }
      /** Replicas holding a version the share had at this path before its head: behind. */
      const stale: Replica[] = [];
      for (const r of current) {
        const k = books.get(r.id)?.get(path);
        if (!k || (h && h.kind === k.kind && (k.kind === 'dir' || h.sha256 === k.sha256))) continue;
        if (h?.kind === 'file' && k.kind === 'file' && this.store.wasHead(path, k.sha256)) {
          // An older version of the share's file, never a new one: it gets the head (a
          // write conditional on what it holds), it is not written over the head.
          if (once(r, path, h.sha256)) stale.push(r);
          continue;
        }
        if (k.kind === 'dir') {
          if (h || !once(r, path, 'dir')) continue;
          this.store.append(r.id, { type: 'dir', path }, undefined, now);
          this.log.warn(
            { replica: r.id, path },
            'reconcile: a folder only this replica holds is logged from it',
          );
          n += 1;
          continue;
        }
        if (!once(r, path, k.sha256)) continue;
        if (!(await this.logCurrent(r, path, k.sha256, now))) continue; // changed: its feed tells
        this.log.warn(
          { replica: r.id, path },
          'reconcile: a version only this replica holds is logged from it',
        );
        n += 1;
      }
      if (!h) continue;
      const lacking = current
        .filter((r) => !books.get(r.id)?.has(path) && once(r, path, h.sha256 || 'dir'))
        .concat(stale);
      if (lacking.length === 0) continue;
      const others = this.replicas.filter((r) => !lacking.includes(r)).map((r) => r.id);
      if (h.kind === 'dir') {
        const from = this.replicas.find((r) => !lacking.includes(r)) ?? lacking[0];
        if (!from) continue;
        this.store.append(from.id, { type: 'dir', path }, undefined, now, others);
        this.log.warn(
          { replicas: lacking.map((l) => l.id), path },
          'reconcile: sending the share folder to replicas without it',
        );
        n += 1;
        continue;
      }
      for (const r of this.replicas) {
        if (lacking.includes(r) || books.get(r.id)?.get(path)?.sha256 !== h.sha256) continue;
        if (!(await this.logCurrent(r, path, h.sha256, now, others))) continue;
        this.log.warn(
          { replicas: lacking.map((l) => l.id), path },
          'reconcile: sending the share version to replicas without it',
        );
        n += 1;
        break;
      }
    }
    return n;
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
          // With nothing pending: the books are then all that a restart would start from.
          if (
            this.verifyIntervalMs > 0 &&
            Date.now() - this.lastVerify >= this.verifyIntervalMs &&
            this.store.pendingCount() === 0
          ) {
            if (this.lastVerify === 0) this.lastVerify = Date.now();
            else await this.verify();
          }
          this.onRound?.({ pending: this.store.pendingCount() });
        } catch (e) {
          this.log.error({ err: e }, 'mirror step failed');
          this.onRound?.({ pending: this.store.pendingCount(), error: e });
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
    await this.settleParked(true).catch((e: unknown) =>
      this.log.warn({ err: e }, 'folders set aside for removal: left as they are'),
    );
  }

  /** The first round has run (state loaded, joining members' seeding entries appended). */
  get ready(): boolean {
    return this.initialized;
  }

  /** Log entries not yet applied everywhere. */
  pendingCount(): number {
    return this.store.pendingCount();
  }

  // ---------------------------------------------------------------- paths

  private full(r: Replica, rel: string): string {
    if (r.root === '') return rel;
    return rel === '' ? r.root : `${r.root}/${rel}`;
  }

  private relative(r: Replica, path: string): string | undefined {
    if (r.root === '') return path;
    const fold = !r.provider.features.caseSensitive;
    const a = fold ? caseFoldKey(path) : path;
    const root = fold ? caseFoldKey(r.root) : r.root;
    if (a === root) return '';
    if (a.startsWith(root + '/')) return path.slice(r.root.length + 1);
    return undefined;
  }

  // ---------------------------------------------------------------- ingest

  private seenOf(r: Replica): Map<string, Seen> {
    const m = this.seen.get(r.id);
    if (!m) throw new Error(`unknown replica ${r.id}`);
    return m;
  }

  private setSeen(r: Replica, path: string, s: Seen | undefined): void {
    const m = this.seenOf(r);
    if (s === undefined) m.delete(path);
    else m.set(path, s);
  }

  private dropSeenUnder(r: Replica, path: string): void {
    const m = this.seenOf(r);
    for (const k of [...m.keys()]) if (isUnder(k, path)) m.delete(k);
  }

  private addOurs(r: Replica, path: string, revision: string): void {
    if (revision === '') return;
    const m = this.ours.get(r.id);
    if (!m) return;
    const list = m.get(path) ?? [];
    list.push(revision);
    if (list.length > OURS_KEPT) list.shift();
    m.set(path, list);
  }

  private isOurs(r: Replica, path: string, revision: string): boolean {
    return revision !== '' && (this.ours.get(r.id)?.get(path)?.includes(revision) ?? false);
  }

  /** Read one replica's feed (or re-list it) into the log. Returns entries appended. */
  private async ingest(r: Replica): Promise<number> {
    const p = r.provider;
    if (!hasChangeFeed(p)) return this.relist(r, undefined);
    const cursor = this.store.cursor(r.id);
    const first = !this.ingestRounds.has(r.id);
    if (cursor === undefined || (first && r.relistOnStart)) return this.relist(r, await p.latestCursor());
    const changes: SyntheticChange[] = [];
    let c = cursor;
    for (;;) {
      const page = await p.changes(c, { limit: this.pageSize });
      if (page.reset) {
        this.log.warn({ replica: r.id }, 'change feed reset: re-listing');
        return this.relist(r, page.cursor);
      }
      for (const ch of page.changes) {
        const rel = this.relative(r, ch.path);
        if (rel === undefined || rel === '' || isParked(rel)) continue;
        changes.push(
          ch.type === 'delete'
            ? { type: 'delete', path: rel }
            : { type: 'upsert', path: rel, entry: ch.entry },
        );
      }
      c = page.cursor;
      if (!page.hasMore) break;
    }
    return this.ingestBatch(r, changes, c);
  }

  /** Full listing diffed against what we saw: deletes of what vanished, upserts of the rest. */
  private async relist(r: Replica, cursor: string | undefined, deletes = true): Promise<number> {
    this.log.trace({ replica: r.id }, 're-listing');
    this.stats.relistings += 1;
    const entries: Entry[] = [];
    for await (const e of r.provider.list(r.root, { recursive: true })) entries.push(e);
    const present = new Set<string>();
    const changes: SyntheticChange[] = [];
    const upserts: SyntheticChange[] = [];
    for (const e of entries) {
      const rel = this.relative(r, e.path);
      if (rel !== undefined && e.kind === 'dir' && isParkedFolder(rel)) this.adoptParked(r, rel, e.path);
      if (rel === undefined || rel === '' || isParked(rel)) continue;
      present.add(rel);
      upserts.push({ type: 'upsert', path: rel, entry: { ...e, path: rel } });
    }
    const gone = [...this.seenOf(r).keys()].filter((k) => !present.has(k)).sort();
    if (!deletes) {
      // A verification: what the books held and the listing does not is taken out of the
      // books, not deleted elsewhere — a wrong book must not delete the share's last copy;
      // reconcile() sends the share's version back if the replica should hold it.
      if (gone.length > 0)
        this.log.warn(
          { replica: r.id, paths: gone.slice(0, 20) },
          'verification: not on the replica, out of the books',
        );
      for (const g of gone) {
        this.store.setKnown(r.id, g, undefined);
        this.seenOf(r).delete(g);
      }
      gone.length = 0;
    }
    for (const g of gone) {
      const last = changes.at(-1);
      if (last && isUnder(g, last.path)) continue;
      changes.push({ type: 'delete', path: g });
    }
    upserts.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    // A verification trusts the books only: a file there that the books lack is logged even
    // if this engine wrote that revision (its own write, moved out of the books since).
    return this.ingestBatch(r, [...changes, ...upserts], cursor, deletes);
  }

  private sameAsSeen(s: Seen | undefined, e: Entry): boolean {
    if (!s || s.kind !== e.kind) return false;
    if (e.kind === 'dir') return true;
    if (s.revision !== '' && s.revision === e.revision) return true;
    return s.hash !== undefined && e.hash !== undefined && s.hash === e.hash.value;
  }

  /** Moves in a batch: a delete of something seen, then upserts carrying its revisions. */
  private detectMoves(
    r: Replica,
    changes: SyntheticChange[],
  ): Map<number, { to: string; kind: 'file' | 'dir'; consumed: Set<number> }> {
    const found = new Map<number, { to: string; kind: 'file' | 'dir'; consumed: Set<number> }>();
    const seen = this.seenOf(r);
    const taken = new Set<number>();
    for (let i = 0; i < changes.length; i++) {
      const d = changes[i];
      if (d?.type !== 'delete') continue;
      const s = seen.get(d.path);
      if (!s) continue;
      if (s.kind === 'file') {
        // Feeds that report the latest state of each item (Dropbox, Drive, Graph) may list
        // the new path before the old one's delete: look at the whole batch.
        for (let j = 0; j < changes.length; j++) {
          const u = changes[j];
          if (u?.type !== 'upsert' || taken.has(j) || u.entry.kind !== 'file' || seen.has(u.path)) continue;
          if (this.sameAsSeen(s, u.entry)) {
            taken.add(j);
            found.set(i, { to: u.path, kind: 'file', consumed: new Set([j]) });
            break;
          }
        }
        continue;
      }
      const files = [...seen.entries()].filter(
        ([k, v]) => v.kind === 'file' && isUnder(k, d.path) && k !== d.path,
      );
      if (files.length === 0) continue;
      for (let j = 0; j < changes.length; j++) {
        const u = changes[j];
        if (u?.type !== 'upsert' || taken.has(j) || u.entry.kind !== 'dir' || seen.has(u.path)) continue;
        const to = u.path;
        const consumed = new Set<number>([j]);
        let all = true;
        for (const [k, v] of files) {
          const target = rebase(k, d.path, to);
          const idx = changes.findIndex(
            (c, n) =>
              n !== i &&
              !taken.has(n) &&
              c.type === 'upsert' &&
              c.path === target &&
              this.sameAsSeen(v, c.entry),
          );
          if (idx < 0) {
            all = false;
            break;
          }
          consumed.add(idx);
        }
        if (!all) continue;
        // Sub-folders of the moved folder that were seen come along too.
        for (const [k, v] of seen) {
          if (v.kind !== 'dir' || !isUnder(k, d.path) || k === d.path) continue;
          const target = rebase(k, d.path, to);
          const idx = changes.findIndex((c, n) => n !== i && c.type === 'upsert' && c.path === target);
          if (idx >= 0) consumed.add(idx);
        }
        for (const n of consumed) taken.add(n);
        found.set(i, { to, kind: 'dir', consumed });
        break;
      }
    }
    return found;
  }

  private async ingestBatch(
    r: Replica,
    batch: SyntheticChange[],
    cursor: string | undefined,
    trustOurs = true,
  ): Promise<number> {
    // A folder's delete implies its content's: Dropbox lists the children's deletes first.
    const deleted = batch.filter((c) => c.type === 'delete').map((c) => c.path);
    const changes = batch.filter(
      (c) => c.type !== 'delete' || !deleted.some((d) => d !== c.path && isUnder(c.path, d)),
    );
    const moves = this.detectMoves(r, changes);
    const consumed = new Set<number>();
    for (const m of moves.values()) for (const n of m.consumed) consumed.add(n);
    const appends: { op: Op; data?: Uint8Array }[] = [];
    for (let i = 0; i < changes.length; i++) {
      if (consumed.has(i)) continue;
      const ch = changes[i];
      if (!ch) continue;
      const move = moves.get(i);
      if (move) {
        const a = await this.ingestMove(r, ch.path, move.to, move.kind);
        if (a) appends.push(a);
        else {
          // Moved and gone again since (or changed kind): what remains is a delete.
          const files = this.seenFiles(r, ch.path);
          this.dropSeenUnder(r, ch.path);
          appends.push({ op: { type: 'delete', path: ch.path, files } });
        }
        continue;
      }
      if (ch.type === 'delete') {
        if (![...this.seenOf(r).keys()].some((k) => isUnder(k, ch.path))) {
          this.stats.echoes += 1;
          continue;
        }
        const was = this.seenOf(r).get(ch.path);
        const now = await this.snapshot(r, ch.path, false);
        if (now !== undefined && (was === undefined || now.kind === was.kind || now.kind === 'dir')) {
          // There again (or never gone: only things inside were). A file's new content
          // follows as an upsert; what was inside a folder and is not now: deletes.
          for (const gone of await this.vanishedUnder(r, ch.path)) appends.push(gone);
          continue;
        }
        const files = this.seenFiles(r, ch.path);
        this.dropSeenUnder(r, ch.path);
        appends.push({ op: { type: 'delete', path: ch.path, files } });
        continue;
      }
      const s = this.seenOf(r).get(ch.path);
      if (
        this.sameAsSeen(s, ch.entry) ||
        (trustOurs && ch.entry.kind === 'file' && this.isOurs(r, ch.path, ch.entry.revision))
      ) {
        this.stats.echoes += 1;
        continue;
      }
      const snap = await this.snapshot(r, ch.path, true);
      if (!snap) continue; // gone again: its delete follows
      if (snap.kind === 'dir') {
        if (s?.kind === 'dir') continue;
        this.setSeen(r, ch.path, { kind: 'dir', revision: '', sha256: '' });
        appends.push({ op: { type: 'dir', path: ch.path } });
        continue;
      }
      if (s?.kind === 'file' && s.revision === snap.revision) {
        this.stats.echoes += 1;
        continue;
      }
      if (trustOurs && this.isOurs(r, ch.path, snap.revision)) {
        this.stats.echoes += 1;
        continue;
      }
      this.setSeen(r, ch.path, {
        kind: 'file',
        revision: snap.revision,
        sha256: snap.sha256,
        hash: snap.hash,
      });
      appends.push({
        op: {
          type: 'file',
          path: ch.path,
          revision: snap.revision,
          sha256: snap.sha256,
          size: snap.data?.byteLength ?? 0,
        },
        data: snap.data,
      });
    }
    const now = this.now();
    this.store.transaction(() => {
      for (const a of appends) this.store.append(r.id, a.op, a.data, now);
      if (cursor !== undefined) this.store.setCursor(r.id, cursor);
    });
    this.stats.ingested += appends.length;
    for (const a of appends) this.log.trace({ replica: r.id, op: a.op }, 'ingested');
    if (appends.length > 0) this.log.debug({ replica: r.id, entries: appends.length }, 'ingested');
    return appends.length;
  }

  /** What was seen at or below `path` (relative to it; '' = `path` itself) → SHA-256 or 'dir'. */
  private seenFiles(r: Replica, path: string): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [k, v] of this.seenOf(r)) {
      if (isUnder(k, path))
        out[k === path ? '' : k.slice(path.length + 1)] = v.kind === 'dir' ? 'dir' : v.sha256;
    }
    return out;
  }

  /** Deletes of what we saw below `dir` that is no longer there (top-most only). */
  private async vanishedUnder(r: Replica, dir: string): Promise<{ op: Op }[]> {
    const present = new Set<string>();
    try {
      const st = await r.provider.stat(this.full(r, dir));
      if (st.kind === 'dir') {
        for await (const e of r.provider.list(this.full(r, dir), { recursive: true })) {
          const rel = this.relative(r, e.path);
          if (rel !== undefined && !isParked(rel)) present.add(rel);
        }
      }
    } catch (e) {
      if (errorCode(e) !== 'NotFound') throw e;
    }
    const out: { op: Op }[] = [];
    let last: string | undefined;
    for (const k of [...this.seenOf(r).keys()].filter((k) => isUnder(k, dir) && k !== dir).sort()) {
      if (present.has(k) || (last !== undefined && isUnder(k, last))) continue;
      last = k;
      const files = this.seenFiles(r, k);
      this.dropSeenUnder(r, k);
      out.push({ op: { type: 'delete', path: k, files } });
    }
    return out;
  }

  private async ingestMove(
    r: Replica,
    from: string,
    to: string,
    kind: 'file' | 'dir',
  ): Promise<{ op: Op; data?: Uint8Array } | undefined> {
    const revisions: Record<string, { revision: string; sha256: string }> = {};
    const seen = this.seenOf(r);
    const files = this.seenFiles(r, from);
    let data: Uint8Array | undefined;
    if (kind === 'file') {
      const snap = await this.snapshot(r, to, true);
      if (!snap || snap.kind !== 'file') return undefined;
      revisions[''] = { revision: snap.revision, sha256: snap.sha256 };
      data = snap.data;
      seen.delete(from);
      seen.set(to, { kind: 'file', revision: snap.revision, sha256: snap.sha256, hash: snap.hash });
    } else {
      const entries = new Map<string, Entry>();
      try {
        for await (const e of r.provider.list(this.full(r, to), { recursive: true })) {
          const rel = this.relative(r, e.path);
          if (rel !== undefined && !isParked(rel)) entries.set(rel, e);
        }
      } catch (e) {
        if (errorCode(e) === 'NotFound') return undefined;
        throw e;
      }
      for (const [k, v] of [...seen.entries()]) {
        if (!isUnder(k, from)) continue;
        seen.delete(k);
        const target = rebase(k, from, to);
        const now = entries.get(target);
        if (!now || now.kind !== v.kind) continue;
        // Edited after the move: not "moved unchanged"; its own upsert in the batch follows.
        if (v.kind === 'file' && !this.sameAsSeen(v, now)) continue;
        if (v.kind === 'file') {
          revisions[target.slice(to.length + 1)] = { revision: now.revision, sha256: v.sha256 };
          seen.set(target, { kind: 'file', revision: now.revision, sha256: v.sha256, hash: now.hash?.value });
        } else seen.set(target, v);
      }
      seen.set(to, { kind: 'dir', revision: '', sha256: '' });
    }
    return { op: { type: 'move', from, to, kind, revisions, files }, data };
  }

  /**
   * The entry at `rel` on a replica with (when `withContent`) its content, read so that
   * content and revision belong together. undefined when nothing is there.
   */
  private async snapshot(r: Replica, rel: string, withContent: boolean): Promise<Snapshot | undefined> {
    const path = this.full(r, rel);
    for (let attempt = 0; ; attempt++) {
      try {
        const a = await r.provider.stat(path);
        if (a.kind === 'dir') return { kind: 'dir', revision: '', sha256: '' };
        if (!withContent) return { kind: 'file', revision: a.revision, sha256: '', hash: a.hash?.value };
        const data = await collect(await r.provider.read(path));
        const b = await r.provider.stat(path);
        if (b.revision === a.revision || attempt >= 3) {
          return { kind: 'file', revision: b.revision, sha256: sha256Hex(data), hash: b.hash?.value, data };
        }
      } catch (e) {
        if (errorCode(e) === 'NotFound') return undefined;
        throw e;
      }
    }
  }

  // ---------------------------------------------------------------- drain

  private isBarrier(op: Op): boolean {
    if (op.type === 'move') return true;
    if (op.type === 'delete') return this.store.head(op.path)?.kind !== 'file';
    return false;
  }

  /**
   * Apply pending log entries (and those they append, e.g. conflicted copies) until none is
   * left, stop() is called, or drainBudgetMs has passed (the rest stays pending for the
   * next round).
   *
   * Order per replica: an entry is applied to a replica only after every earlier entry on
   * the same path (or a folder around it; for folder moves and deletes, anything inside)
   * has been applied there. A replica that cannot take writes (unavailable, or a call on it
   * failed in this round) is left out; what is pending for it is its outage log, replayed
   * in this order when it is back, and the other replicas go on. An entry whose origin still
   * has earlier entries pending on its path (a change the member made on a version the
   * share had since replaced) waits whole, with every later entry on that path: applying
   * it first would write an older version over a newer one.
   */
  private async drain(): Promise<number> {
    let applied = 0;
    let after = 0;
    let started = 0;
    const since = Date.now();
    const enough = (): boolean =>
      this.stopping || (started >= this.concurrency && Date.now() - since >= this.drainBudgetMs);
    /** Per replica: paths (case-folded) of entries still pending there. */
    const behind = new Map<string, Set<string>>();
    /** Paths of entries that wait whole (not applied at their origin). */
    const waiting = new Set<string>();
    const hold = (ids: readonly string[], keys: readonly string[]): void => {
      for (const id of ids) {
        let set = behind.get(id);
        if (!set) behind.set(id, (set = new Set()));
        for (const k of keys) set.add(k);
      }
    };
    for (;;) {
      const ops = this.store.pending(after, false);
      if (ops.length === 0) return applied;
      after = ops.at(-1)?.seq ?? after;
      const total = applied + ops.length;
      const report = (): void => this.onProgress?.({ applied, pending: Math.max(0, total - applied) });
      const tails = new Map<string, Promise<void>>();
      const inflight = new Set<Promise<void>>();
      let cut = false;
      for (const op of ops) {
        if (enough()) {
          cut = true;
          break;
        }
        started += 1;
        const barrier = this.isBarrier(op.op);
        const keys = (op.op.type === 'move' ? [op.op.from, op.op.to] : [op.op.path]).map(caseFoldKey);
        const run = async (): Promise<void> => {
          const whole = overlaps(waiting, keys, barrier);
          let res: Awaited<ReturnType<MirrorEngine['applyOp']>>;
          try {
            res = await this.applyOp(op, (id, origin) => {
              if (whole || overlaps(behind.get(id), keys, barrier)) return false;
              return origin || this.writable(id);
            });
          } catch (e) {
            // Not a replica's failure (those are handled inside): the entry waits whole.
            this.log.error({ err: e, seq: op.seq }, 'applying a log entry failed');
            res = { waiting: this.replicas.map((r) => r.id), deferred: true, progressed: false };
          }
          hold(res.waiting, keys);
          if (res.deferred) for (const k of keys) waiting.add(k);
          if (res.progressed) {
            applied += 1;
            report();
          }
        };
        if (barrier) {
          await Promise.allSettled([...inflight]);
          await run();
          tails.clear();
          continue;
        }
        const key = keys[0] ?? '';
        const prev = tails.get(key) ?? Promise.resolve();
        const next = prev.then(run);
        const tracked = next.catch((e: unknown) => {
          this.log.error({ err: e, seq: op.seq }, 'log entry: unexpected failure');
        });
        tails.set(key, tracked);
        inflight.add(tracked);
        void tracked.finally(() => inflight.delete(tracked));
        if (inflight.size >= this.concurrency) await Promise.race(inflight);
      }
      await Promise.allSettled([...inflight]);
      if (cut) return applied;
    }
  }

  private member(id: string): string {
    return this.byId.get(id)?.member ?? id;
  }

  /**
   * Apply one log entry where `can` allows (`origin`: its origin's bookkeeping; else a
   * target's write): the origin's bookkeeping, then the other replicas. A target whose call
   * fails is marked unavailable (failed()); a name its cloud refuses (InvalidPath) is not
   * applied there. Returns the replicas it is still pending for, whether it waits whole
   * (not applied at its origin), and whether anything happened.
   */
  private async applyOp(
    logged: LoggedOp,
    can: (replica: string, origin: boolean) => boolean,
  ): Promise<{ waiting: string[]; deferred: boolean; progressed: boolean }> {
    const done = new Set(logged.doneTargets);
    const notDone = (): string[] => this.replicas.filter((r) => !done.has(r.id)).map((r) => r.id);
    let progressed = false;
    if (!done.has(logged.origin)) {
      if (!can(logged.origin, true)) return { waiting: notDone(), deferred: true, progressed };
      const propagate = this.applyAtOrigin(logged);
      this.log.trace({ seq: logged.seq, replica: logged.origin, propagate }, 'applied at origin');
      if (propagate === 'origin-too') {
        // The engine wrote into what the origin deleted after the delete was read from its
        // feed (an earlier entry re-created it there): the delete applies there as well,
        // to the versions the deleter had seen — else the origin alone keeps them.
        const origin = this.byId.get(logged.origin);
        try {
          if (origin && logged.op.type === 'delete')
            await this.applyDelete(origin, logged.op.path, logged.op.files);
          if (origin && logged.op.type === 'move') await this.removeDuplicates(origin, logged.seq);
        } catch (e) {
          if (origin) this.failed(origin, e, 'applying a delete or move at its origin');
          return { waiting: notDone(), deferred: true, progressed };
        }
      }
      done.add(logged.origin);
      progressed = true;
      if (!propagate) {
        this.store.markDone(logged.seq);
        return { waiting: [], deferred: false, progressed };
      }
      this.store.markTargetDone(logged.seq, [...done]);
    }
    const targets = this.replicas.filter((r) => !done.has(r.id) && can(r.id, false));
    let entry = logged;
    if (targets.length > 0 && !entry.data && (entry.op.type === 'file' || entry.op.type === 'move'))
      entry = { ...entry, data: this.store.data(entry.seq) };
    const results = await Promise.allSettled(
      targets.map(async (t) => {
        await this.applyTo(t, entry);
        this.log.trace({ seq: logged.seq, replica: t.id, op: logged.op }, 'applied');
      }),
    );
    for (const [i, x] of results.entries()) {
      const t = targets[i];
      if (!t) continue;
      if (x.status === 'fulfilled') {
        done.add(t.id);
        progressed = true;
        continue;
      }
      const reason: unknown = x.reason;
      if (errorCode(reason) === 'InvalidPath') {
        // The name is not allowed on that cloud: nothing was written; the others have it.
        this.stats.refused += 1;
        this.log.error(
          { seq: logged.seq, replica: t.id, err: reason },
          'the cloud refuses this name: not applied on this replica',
        );
        done.add(t.id);
        progressed = true;
        continue;
      }
      // Once per outage at warn level (failed()); each try of an unavailable replica: debug.
      if (this.outages.has(t.id))
        this.log.debug({ seq: logged.seq, replica: t.id, err: reason }, 'apply failed');
      else this.log.warn({ seq: logged.seq, replica: t.id, err: reason }, 'apply failed');
      this.failed(t, reason, 'writing');
    }
    if (this.replicas.every((r) => done.has(r.id))) {
      this.store.markDone(logged.seq);
      this.previousHead.delete(logged.seq);
      this.nativeOk.delete(logged.seq);
      return { waiting: [], deferred: false, progressed };
    }
    if (progressed) this.store.markTargetDone(logged.seq, [...done]);
    return { waiting: notDone(), deferred: false, progressed };
  }

  /**
   * Record the origin's new state and the share head. false: nothing to propagate;
   * 'origin-too': a delete that must also be applied at the origin, or a move that left
   * duplicates there to remove (see applyOp).
   */
  private applyAtOrigin(logged: LoggedOp): boolean | 'origin-too' {
    const { op, origin } = logged;
    return this.store.transaction(() => {
      switch (op.type) {
        case 'file': {
          // A state of the origin the engine has since replaced (a conditional write or
          // remove made after this entry was read from the feed): not propagated.
          if (this.store.touchedAt(origin, op.path) >= logged.seq) return false;
          const head = this.store.head(op.path);
          if (head?.kind === 'file') this.previousHead.set(logged.seq, head.sha256);
          this.store.setKnown(origin, op.path, { kind: 'file', revision: op.revision, sha256: op.sha256 });
          if (head?.kind === 'file' && head.sha256 === op.sha256) return false;
          this.store.setHead(op.path, { kind: 'file', sha256: op.sha256 });
          return true;
        }
        case 'dir': {
          if (this.store.touchedAt(origin, op.path) >= logged.seq) return false;
          const head = this.store.head(op.path);
          this.store.setKnown(origin, op.path, { kind: 'dir', revision: '', sha256: '' });
          if (head?.kind === 'dir') return false;
          this.store.setHead(op.path, { kind: 'dir', sha256: '' });
          return true;
        }
        case 'delete': {
          // Propagated even when the head has nothing there: a replica may still hold a
          // version kept by an earlier conflict (an edit that won over a move or delete).
          if (this.store.touchedUnderSince(origin, op.path, logged.seq)) {
            this.forgetDeleted(origin, op.path, op.files, true, false);
            return 'origin-too';
          }
          this.forgetDeleted(origin, op.path, op.files, true);
          return true;
        }
        case 'move': {
          // Only what the origin moved (op.files) moves in our books; a version the engine
          // wrote there after the move was read from the feed stays where it is.
          const listed = (path: string, kind: 'file' | 'dir', sha: string): boolean =>
            !op.files ||
            op.files[path === op.from ? '' : path.slice(op.from.length + 1)] ===
              (kind === 'dir' ? 'dir' : sha);
          const all = this.store.knownUnder(origin, op.from);
          // A file the engine wrote there after the move was read is not what the member
          // moved, even with the same content (another member's copy of it): it stays in
          // the books where it is and, being a duplicate of what moved, is removed there.
          const duplicates = all.filter(
            (k) =>
              k.kind === 'file' &&
              this.store.touchedAt(origin, k.path) >= logged.seq &&
              listed(k.path, 'file', k.sha256),
          );
          const keptKnown = all
            .filter((k) => !listed(k.path, k.kind, k.sha256) || duplicates.includes(k))
            .map((k) => k.path);
          const known = all.filter((k) => !keptKnown.some((f) => isUnder(f, k.path)));
          for (const k of known) this.store.setKnown(origin, k.path, undefined);
          for (const k of known) {
            const to = rebase(k.path, op.from, op.to);
            const rel = op.kind === 'file' ? '' : to.slice(op.to.length + 1);
            const rev = op.revisions[rel];
            if (k.kind === 'file' && !rev) continue;
            this.store.setKnown(origin, to, rev ? { kind: 'file', ...rev } : k);
          }
          this.store.setKnown(
            origin,
            op.to,
            op.kind === 'file'
              ? {
                  kind: 'file',
                  revision: op.revisions['']?.revision ?? '',
                  sha256: op.revisions['']?.sha256 ?? '',
                }
              : { kind: 'dir', revision: '', sha256: '' },
          );
          const allHead = this.store.headUnder(op.from);
          const keptHead = allHead.filter((h) => !listed(h.path, h.kind, h.sha256)).map((h) => h.path);
          const head = allHead.filter((h) => !keptHead.some((f) => isUnder(f, h.path)));
          const headFiles = allHead.filter((h) => h.kind === 'file');
          const moved = Object.keys(op.revisions);
          if (
            headFiles.length === moved.length &&
            headFiles.every((h) => {
              const rel = op.kind === 'file' ? '' : h.path.slice(op.from.length + 1);
              return op.revisions[rel]?.sha256 === h.sha256;
            })
          ) {
            this.nativeOk.add(logged.seq);
          }
          for (const h of head) this.store.setHead(h.path, undefined);
          for (const h of head) this.store.setHead(rebase(h.path, op.from, op.to), h);
          if (op.kind === 'dir') this.store.setHead(op.to, { kind: 'dir', sha256: '' });
          // What the origin holds at the destination is what the move propagates: the
          // share's version there, and the origin's known state, whatever we knew before.
          for (const [rel, rev] of Object.entries(op.revisions)) {
            const to = rel === '' ? op.to : `${op.to}/${rel}`;
            this.store.setHead(to, { kind: 'file', sha256: rev.sha256 });
            this.store.setKnown(origin, to, { kind: 'file', revision: rev.revision, sha256: rev.sha256 });
          }
          if (duplicates.length === 0) return true;
          this.movedDuplicates.set(logged.seq, duplicates);
          return 'origin-too';
        }
      }
    });
  }

  private async applyTo(t: Replica, logged: LoggedOp): Promise<void> {
    const { op } = logged;
    switch (op.type) {
      case 'file':
        if (!logged.data) throw new Error(`log entry ${logged.seq} has no content`);
        return this.applyFile(t, op.path, op.sha256, logged.data, logged);
      case 'dir':
        return this.applyDir(t, op.path);
      case 'delete':
        return this.applyDelete(t, op.path, op.files);
      case 'move':
        return this.applyMove(t, op, logged);
    }
  }

  private recordWrite(t: Replica, path: string, e: Entry, sha256: string): void {
    const k: KnownEntry = { kind: 'file', revision: e.revision, sha256 };
    this.store.setKnown(t.id, path, k);
    this.store.touch(t.id, path);
    this.setSeen(t, path, { ...k, hash: e.hash?.value });
    this.addOurs(t, path, e.revision);
    this.stats.applied += 1;
  }

  private async applyFile(
    t: Replica,
    path: string,
    sha256: string,
    data: Uint8Array,
    logged: LoggedOp,
  ): Promise<void> {
    let base = this.store.known(t.id, path);
    const full = this.full(t, path);
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        if (base?.kind === 'dir') break; // a folder where the file goes: conflict
        const e = await t.provider.write(
          full,
          data,
          base
            ? { ifRevision: base.revision, sha256, size: data.byteLength }
            : { ifNotExists: true, sha256, size: data.byteLength },
        );
        this.recordWrite(t, path, e, sha256);
        return;
      } catch (e) {
        const code = errorCode(e);
        if (code !== 'PreconditionFailed' && code !== 'NotFound' && code !== 'AlreadyExists') throw e;
      }
      const cur = await this.snapshot(t, path, true);
      if (!cur) {
        base = undefined; // deleted concurrently: the edit wins
        continue;
      }
      if (cur.kind === 'dir') break;
      if (cur.sha256 === sha256) {
        // Already there (a write whose answer was lost, or the same edit made twice).
        this.store.setKnown(t.id, path, { kind: 'file', revision: cur.revision, sha256 });
        this.setSeen(t, path, { kind: 'file', revision: cur.revision, sha256, hash: cur.hash });
        return;
      }
      if (!base && cur.sha256 === this.previousHead.get(logged.seq)) {
        // The target holds the share's previous version though we had lost track of it
        // (e.g. it moved there on the target itself): not a concurrent edit.
        base = { kind: 'file', revision: cur.revision, sha256: cur.sha256 };
        continue;
      }
      if (base && cur.sha256 === base.sha256) {
        base = { ...base, revision: cur.revision }; // only the revision moved (e.g. a move changed the eTag)
        continue;
      }
      break; // a concurrent edit: theirs stays, ours becomes a conflicted copy
    }
    await this.writeConflictCopy(t, path, sha256, data, logged);
  }

  /** The copy's name for this entry: the same on every target, never another entry's. */
  private copyName(path: string, logged: LoggedOp, skip: ReadonlySet<string>): string {
    const mine = this.store.copiesOf(logged.seq).filter((c) => !skip.has(c));
    const dir = path.includes('/') ? path.slice(0, path.lastIndexOf('/') + 1) : '';
    const existing = mine.find((c) => c.startsWith(dir) && !c.slice(dir.length).includes('/'));
    if (existing) return existing;
    return this.store.transaction(() => {
      const copy = conflictedCopyPath(
        path,
        new Date(logged.createdMs),
        this.member(logged.origin),
        (c) => skip.has(c) || this.store.head(c) !== undefined || !this.store.reserveCopy(logged.seq, c),
      );
      return copy;
    });
  }

  private async writeConflictCopy(
    t: Replica,
    path: string,
    sha256: string,
    data: Uint8Array,
    logged: LoggedOp,
  ): Promise<void> {
    const skip = new Set<string>();
    for (;;) {
      const copy = this.copyName(path, logged, skip);
      try {
        const e = await t.provider.write(this.full(t, copy), data, {
          ifNotExists: true,
          sha256,
          size: data.byteLength,
        });
        // Seen and ours (no echo), but not yet `known`: the copy's own log entry records
        // it at its origin, so nothing is conditioned on it before the share has it.
        this.setSeen(t, copy, { kind: 'file', revision: e.revision, sha256, hash: e.hash?.value });
        this.addOurs(t, copy, e.revision);
        this.stats.applied += 1;
        this.stats.conflicts += 1;
        // The copy is a new file of the share: it goes to every replica through the log.
        this.store.append(
          t.id,
          { type: 'file', path: copy, revision: e.revision, sha256, size: data.byteLength },
          data,
          logged.createdMs,
        );
        this.log.info({ replica: t.id, path, copy }, 'concurrent edit: conflicted copy');
        return;
      } catch (e) {
        if (errorCode(e) !== 'AlreadyExists') throw e;
        const cur = await this.snapshot(t, copy, true);
        if (cur?.kind === 'file' && cur.sha256 === sha256) {
          this.setSeen(t, copy, { kind: 'file', revision: cur.revision, sha256, hash: cur.hash });
          return;
        }
        skip.add(copy);
        if (skip.size > 50) throw e;
      }
    }
  }

  private async applyDir(t: Replica, path: string): Promise<void> {
    try {
      await t.provider.mkdir(this.full(t, path));
    } catch (e) {
      if (errorCode(e) !== 'AlreadyExists') throw e;
      this.log.warn({ replica: t.id, path }, 'a file is where a folder goes; left as it is');
      return;
    }
    const k: KnownEntry = { kind: 'dir', revision: '', sha256: '' };
    this.store.setKnown(t.id, path, k);
    this.setSeen(t, path, k);
    this.stats.applied += 1;
  }

  /** Remove a file, if it is still the version we knew there (else the edit wins and stays). */
  private async removeKnownFile(t: Replica, path: string, known: KnownEntry): Promise<boolean> {
    let revision = known.revision;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await t.provider.remove(this.full(t, path), { ifRevision: revision });
        this.store.touch(t.id, path);
        this.stats.applied += 1;
        return true;
      } catch (e) {
        const code = errorCode(e);
        if (code === 'NotFound') return true;
        if (code !== 'PreconditionFailed') throw e;
      }
      const cur = await this.snapshot(t, path, true);
      if (!cur) return true;
      if (cur.kind !== 'file' || cur.sha256 !== known.sha256) return false;
      revision = cur.revision;
    }
    return false;
  }

  /** The duplicates a move entry left on its origin (see movedDuplicates): removed if unchanged. */
  private async removeDuplicates(origin: Replica, seq: number): Promise<void> {
    for (const d of this.movedDuplicates.get(seq) ?? []) {
      if (!(await this.removeKnownFile(origin, d.path, d))) continue; // changed since: it stays
      this.store.setKnown(origin.id, d.path, undefined);
      this.setSeen(origin, d.path, undefined);
    }
    this.movedDuplicates.delete(seq);
  }

  /**
   * Forget `path` on a replica after a delete: the files listed in `files` (all, without a
   * list) and folders left without known files; with `head`, the share's head likewise.
   */
  private forgetDeleted(
    replica: string,
    path: string,
    files: Readonly<Record<string, string>> | undefined,
    head: boolean,
    replicaToo = true,
  ): void {
    const listed = (p: string, sha: string): boolean => {
      if (!files) return true;
      return files[p === path ? '' : p.slice(path.length + 1)] === sha;
    };
    const forget = (
      entries: { path: string; kind: 'file' | 'dir'; sha256: string }[],
      drop: (p: string) => void,
    ) => {
      const kept = entries
        .filter((k) => !listed(k.path, k.kind === 'dir' ? 'dir' : k.sha256))
        .map((k) => k.path);
      for (const k of entries) if (!kept.some((f) => isUnder(f, k.path))) drop(k.path);
    };
    if (replicaToo)
      forget(this.store.knownUnder(replica, path), (p) => this.store.setKnown(replica, p, undefined));
    if (head) forget(this.store.headUnder(path), (p) => this.store.setHead(p, undefined));
  }

  private async applyDelete(
    t: Replica,
    path: string,
    files?: Readonly<Record<string, string>>,
  ): Promise<void> {
    const known = this.store.knownUnder(t.id, path);
    const root = known.find((k) => k.path === path);
    if (known.length === 0) return;
    const deletable = (k: KnownEntry & { path: string }): boolean =>
      k.kind === 'file' &&
      (!files || files[k.path === path ? '' : k.path.slice(path.length + 1)] === k.sha256);
    const removed = new Set<string>();
    if (root?.kind === 'file') {
      if (deletable(root) && (await this.removeKnownFile(t, path, root))) removed.add(path);
    } else {
      // A folder: remove the versions the deleter had, keep anything else (a concurrent
      // edit or new file there reaches the others through the log), then empty folders.
      const entries: Entry[] = [];
      try {
        for await (const e of t.provider.list(this.full(t, path), { recursive: true })) {
          const rel = this.relative(t, e.path);
          if (rel !== undefined && !isParked(rel)) entries.push(e);
        }
      } catch (e) {
        if (errorCode(e) !== 'NotFound') throw e;
      }
      const knownByPath = new Map(known.map((k) => [k.path, k]));
      const kept = new Set<string>();
      // What we knew there and is there no more (moved or deleted by the replica's owner):
      // out of the books, or a restart's re-listing reports it gone again.
      const present = new Set(entries.map((e) => this.relative(t, e.path)));
      for (const k of known) if (k.path !== path && !present.has(k.path)) removed.add(k.path);
      for (const e of entries) {
        const rel = this.relative(t, e.path);
        if (rel === undefined || e.kind !== 'file') continue;
        const k = knownByPath.get(rel);
        if (k && deletable(k) && (await this.removeKnownFile(t, rel, k))) removed.add(rel);
        else kept.add(rel);
      }
      const dirs = entries
        .filter((e) => e.kind === 'dir')
        .map((e) => this.relative(t, e.path))
        .filter((p): p is string => p !== undefined)
        .concat(entries.length > 0 || root ? [path] : [])
        .sort((a, b) => b.length - a.length);
      for (const d of dirs) {
        if ([...kept].some((k) => isUnder(k, d))) continue;
        if (files && files[d === path ? '' : d.slice(path.length + 1)] !== 'dir') {
          kept.add(d); // a folder the deleter had not seen
          continue;
        }
        if (!(await this.removeEmptyFolder(t, d))) {
          kept.add(d); // a save landed in it meanwhile: it stays, and reaches the others
          continue;
        }
        removed.add(d);
      }
    }
    for (const k of known) {
      if (!removed.has(k.path)) continue;
      this.store.setKnown(t.id, k.path, undefined);
      this.setSeen(t, k.path, undefined);
    }
  }

  /**
   * Log the file `r` holds at `path` from `r` (to `done` excluded), if it is still the version
   * with `sha256`. false: gone or changed since (its feed reports that).
   */
  private async logCurrent(
    r: Replica,
    path: string,
    sha256: string,
    now: number,
    done: string[] = [],
  ): Promise<boolean> {
    const snap = await this.snapshot(r, path, true);
    if (snap?.kind !== 'file' || snap.sha256 !== sha256 || !snap.data) return false;
    const op: Op = { type: 'file', path, revision: snap.revision, sha256, size: snap.data.byteLength };
    this.store.append(r.id, op, snap.data, now, done);
    return true;
  }

  /**
   * Remove a folder the engine emptied, without losing a save that lands in it at that
   * instant: the clouds delete a folder with whatever is in it, and none can refuse a
   * non-empty one. Where the provider moves folders, the folder is renamed to a hidden name
   * beside it (one server-side move: a save racing it lands either at the old path,
   * untouched, or inside the hidden folder), and settleParked() removes it later, once a
   * save already on its way would have landed, or puts back what arrived. Elsewhere: list,
   * then remove. false: it was not empty (it stays).
   */
  private async removeEmptyFolder(t: Replica, rel: string): Promise<boolean> {
    const full = this.full(t, rel);
    const done = (): true => {
      this.store.touch(t.id, rel);
      this.stats.applied += 1;
      return true;
    };
    try {
      if (!(await this.isEmptyFolder(t, full))) return false;
      const p = t.provider;
      if (!hasServerSideMove(p) || p.features.move !== 'files-and-folders') {
        await p.remove(full);
        return done();
      }
      const slash = full.lastIndexOf('/');
      const parked = `${full.slice(0, slash + 1)}${parkedName(full.slice(slash + 1))}`;
      await p.move(full, parked);
      this.parked.push({ replica: t, rel, full, parked, at: Date.now() });
      return done();
    } catch (e) {
      if (errorCode(e) === 'NotFound') return true;
      throw e;
    }
  }

  /**
   * A hidden folder an engine set aside and did not settle (it stopped): removed if empty,
   * else put back under the name it had (kept in the hidden name).
   */
  private adoptParked(r: Replica, rel: string, full: string): void {
    if (this.parked.some((x) => x.replica === r && x.parked === full)) return;
    const slash = full.lastIndexOf('/');
    const name = parkedOriginalName(full.slice(slash + 1));
    const back = name === undefined ? undefined : `${full.slice(0, slash + 1)}${name}`;
    const relBack = back === undefined ? rel : (this.relative(r, back) ?? rel);
    this.parked.push({ replica: r, rel: relBack, full: back, parked: full, at: Date.now() });
  }

  private async isEmptyFolder(t: Replica, path: string): Promise<boolean> {
    for await (const e of t.provider.list(path)) {
      void e;
      return false;
    }
    return true;
  }

  /**
   * Remove the folders set aside at least parkSettleMs ago (`all`: every one) that are
   * still empty; put back what arrived in the others (it is then in the feed, a new change
   * at the old path, and reaches everyone). Returns how many were settled.
   */
  private async settleParked(all: boolean): Promise<number> {
    const due = this.parked.filter((x) => all || Date.now() - x.at >= this.parkSettleMs);
    let n = 0;
    for (const x of due) {
      await this.settleOne(x);
      this.parked = this.parked.filter((y) => y !== x);
      n += 1;
    }
    return n;
  }

  private async settleOne(x: Parked): Promise<void> {
    const p = x.replica.provider;
    if (!hasServerSideMove(p)) return;
    try {
      if (await this.isEmptyFolder(x.replica, x.parked)) {
        await p.remove(x.parked);
        return;
      }
      if (x.full === undefined) {
        this.log.warn(
          { replica: x.replica.id, path: x.rel },
          'a folder set aside for removal by an earlier run holds files: left where it is',
        );
        return;
      }
      // Someone saved into it after it was set aside: put it all back.
      try {
        await p.move(x.parked, x.full);
      } catch (e) {
        if (errorCode(e) !== 'AlreadyExists') throw e;
        // The old path was taken again meanwhile: move what is inside back one by one.
        const inside: string[] = [];
        for await (const e2 of p.list(x.parked)) inside.push(e2.path);
        for (const i of inside) await p.move(i, `${x.full}/${i.slice(x.parked.length + 1)}`);
        await p.remove(x.parked);
      }
      this.log.info(
        { replica: x.replica.id, path: x.rel },
        'a folder being removed received a save: put back',
      );
    } catch (e) {
      if (errorCode(e) !== 'NotFound') throw e; // else someone removed it meanwhile
    }
  }

  private async applyMove(t: Replica, op: Extract<Op, { type: 'move' }>, logged: LoggedOp): Promise<void> {
    const known = this.store.known(t.id, op.from);
    const canMove =
      hasServerSideMove(t.provider) &&
      (op.kind === 'file' || t.provider.features.move === 'files-and-folders');
    if (
      known &&
      known.kind === op.kind &&
      canMove &&
      this.nativeOk.has(logged.seq) &&
      hasServerSideMove(t.provider)
    ) {
      const ok = await this.matchesKnown(t, op.from, op.kind, op.files);
      if (ok) {
        try {
          const under = this.store.knownUnder(t.id, op.from);
          const e = await t.provider.move(this.full(t, op.from), this.full(t, op.to));
          this.stats.applied += 1;
          this.stats.nativeMoves += 1;
          this.store.transaction(() => {
            this.store.dropKnownUnder(t.id, op.from);
            for (const k of under) this.store.setKnown(t.id, rebase(k.path, op.from, op.to), k);
            if (op.kind === 'file') {
              this.store.setKnown(t.id, op.to, { kind: 'file', revision: e.revision, sha256: known.sha256 });
            }
          });
          this.dropSeenUnder(t, op.from);
          for (const k of under) {
            const to = rebase(k.path, op.from, op.to);
            const rev = to === op.to && op.kind === 'file' ? e.revision : k.revision;
            this.setSeen(t, to, { ...k, revision: rev });
            if (k.kind === 'file') this.addOurs(t, to, rev);
          }
          return;
        } catch (e) {
          const code = errorCode(e);
          if (code !== 'NotFound' && code !== 'AlreadyExists') throw e;
        }
      }
    }
    // No server-side move, or the source changed under us: upload at `to`, delete `from`.
    if (op.kind === 'file') {
      const rev = op.revisions[''];
      if (logged.data && rev) await this.applyFile(t, op.to, rev.sha256, logged.data, logged);
    } else {
      await this.copyFromOrigin(t, op.to, logged);
    }
    await this.applyDelete(t, op.from, op.files);
  }

  /**
   * The replica holds exactly what the origin moved under `path` (op.files), each file at
   * the revision we know: nothing edited, added or removed there, so a native move is safe.
   */
  private async matchesKnown(
    t: Replica,
    path: string,
    kind: 'file' | 'dir',
    files: Readonly<Record<string, string>> | undefined,
  ): Promise<boolean> {
    const known = new Map(this.store.knownUnder(t.id, path).map((k) => [k.path, k]));
    const expect = (rel: string, entryKind: 'file' | 'dir', revision: string): boolean => {
      const k = known.get(rel);
      if (!k || k.kind !== entryKind) return false;
      const key = rel === path ? '' : rel.slice(path.length + 1);
      if (entryKind === 'dir') return !files || files[key] === 'dir';
      return k.revision === revision && (!files || files[key] === k.sha256);
    };
    if (kind === 'file') {
      const cur = await this.snapshot(t, path, false);
      return cur?.kind === 'file' && expect(path, 'file', cur.revision);
    }
    let count = 0;
    try {
      for await (const e of t.provider.list(this.full(t, path), { recursive: true })) {
        const rel = this.relative(t, e.path);
        if (rel === undefined || !expect(rel, e.kind, e.revision)) return false;
        count += 1;
      }
    } catch (e) {
      if (errorCode(e) === 'NotFound') return false;
      throw e;
    }
    return !files || count === Object.keys(files).length - 1;
  }

  /** Fallback of a folder move: the moved folder's files, read from the origin. */
  private async copyFromOrigin(t: Replica, dir: string, logged: LoggedOp): Promise<void> {
    const origin = this.byId.get(logged.origin);
    if (!origin) return;
    await this.applyDir(t, dir);
    const entries: Entry[] = [];
    try {
      for await (const e of origin.provider.list(this.full(origin, dir), { recursive: true })) {
        const rel = this.relative(origin, e.path);
        if (rel !== undefined && !isParked(rel)) entries.push(e);
      }
    } catch (e) {
      if (errorCode(e) === 'NotFound') return;
      throw e;
    }
    for (const e of entries) {
      const rel = this.relative(origin, e.path);
      if (rel === undefined) continue;
      if (e.kind === 'dir') {
        await this.applyDir(t, rel);
        continue;
      }
      const snap = await this.snapshot(origin, rel, true);
      if (!snap?.data) continue;
      await this.applyFile(t, rel, snap.sha256, snap.data, logged);
    }
  }
}
