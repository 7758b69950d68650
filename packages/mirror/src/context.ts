/**
 * What the parts of the mirror engine share: the replicas, the store, the clock, the
 * counters, the in-memory view of each replica, its outage log and the folders being
 * removed. engine.ts builds one per share; ingest, drain, books, propagate/*, parking and
 * anti-entropy take it as their first argument.
 */
import type { Logger } from 'pino';
import type { Entry, Provider } from '@weft/providers';
import type { Clock } from './clock.ts';
import type { KnownEntry, ShareStore } from './store.ts';
import type { ReplicaView } from './replica-view.ts';
import type { OutageLog } from './outage-log.ts';
import type { Parking } from './parking.ts';

/**
 * Resolve when something changed after `cursor` (changes: true) or a timeout passed
 * (changes: false); `backoffMs` is a pause the service asks for before the next call.
 * Rejects when `signal` aborts.
 */
export type ChangeWaiter = (
  cursor: string,
  signal: AbortSignal,
) => Promise<{ readonly changes: boolean; readonly backoffMs?: number }>;

/** One member's folder in one provider, as the engine uses it (provider wrapped). */
export interface Replica {
  readonly id: string;
  readonly member: string;
  readonly provider: Provider;
  readonly root: string;
  readonly waitForChanges?: ChangeWaiter;
  readonly relistOnStart?: boolean;
}

/** What the engine last saw or caused on a replica; `hash` is the provider's own hash. */
export interface Seen extends KnownEntry {
  readonly hash?: string;
}

/** An entry read so that its content and revision belong together (ReplicaView.snapshot). */
export interface Snapshot {
  readonly kind: 'file' | 'dir';
  readonly revision: string;
  readonly sha256: string;
  readonly hash?: string;
  readonly data?: Uint8Array;
}

/** A change on a replica, from its feed or a re-listing (paths relative to its root). */
export type SyntheticChange =
  { type: 'upsert'; path: string; entry: Entry } | { type: 'delete'; path: string };

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
  /** Full re-listings read as changes (first start, feed reset, provider without a feed). */
  relistings: number;
  /** Verifications run (anti-entropy: each re-lists every replica against the books). */
  verifications: number;
  /** Target applications that failed and will be retried next step. */
  failures: number;
  /** Log entries found by a verification re-listing (changes the feeds had not reported). */
  verifyFound: number;
  /** Entries a replica's cloud refused for their name (InvalidPath): not applied there. */
  refused: number;
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
    verifications: 0,
    failures: 0,
    verifyFound: 0,
    refused: 0,
  };
}

/**
 * Facts the bookkeeping (books.ts) records for the propagators about one log entry while
 * it is being applied, keyed by its seq; dropped when the entry is done.
 */
export interface EntryFacts {
  /** Moves whose origin content matches the share's: a native move on a target is safe. */
  readonly nativeOk: Set<number>;
  /** The share's version of a file entry's path before the entry (a target holding it is not in conflict). */
  readonly previousHead: Map<number, string>;
  /**
   * Per move entry: files the engine wrote on the origin at the moved path after the move
   * was read, with the content that moved (a duplicate of it): removed there (applyOp).
   */
  readonly movedDuplicates: Map<number, (KnownEntry & { path: string })[]>;
}

export interface EngineContext {
  readonly shareId: string;
  readonly replicas: readonly Replica[];
  readonly byId: ReadonlyMap<string, Replica>;
  readonly store: ShareStore;
  readonly log: Logger;
  /** The one clock: log entries, conflicted-copy names, budgets, backoffs (clock.ts). */
  readonly now: Clock;
  readonly stats: MirrorStats;
  readonly view: ReplicaView;
  readonly outages: OutageLog;
  readonly parking: Parking;
  readonly facts: EntryFacts;
  /** Log entries applied at once (unrelated paths). */
  readonly concurrency: number;
  /** Entries per feed page requested. */
  readonly pageSize: number;
  /** One drain stops starting entries after this long (see drain.ts). */
  readonly drainBudgetMs: number;
  readonly onProgress?: (p: { readonly applied: number; readonly pending: number }) => void;
  /** stop() was called: no new work is started. */
  stopping(): boolean;
}

/** The member name of a replica id (conflicted copies are named after it). */
export function memberOf(ctx: EngineContext, id: string): string {
  return ctx.byId.get(id)?.member ?? id;
}
