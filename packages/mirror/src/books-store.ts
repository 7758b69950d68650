/**
 * The mirror engine's books, as an asynchronous interface: one `ShareStore` per share, made
 * by a `MirrorBooks` (one database for any number of shares). Two implementations:
 * - SQLite (store.ts, `SqliteMirrorBooks`): the embedded default, one process;
 * - PostgreSQL (the proxy's shares/mirror-books-postgres.ts): several proxy instances share
 *   the books, and every write is fenced by the controller lease — a deposed controller's
 *   late write is refused (the implementation throws), never applied.
 * Both pass the one conformance suite (packages/proxy-server/test/mirror-books.test.ts).
 *
 * Semantics every implementation keeps: each call is atomic; `transaction(fn)` runs `fn`
 * against a store whose calls all commit together or not at all, isolated from the other
 * calls on the same books; seqs grow in append order; listings are sorted by path in
 * code-point (binary) order.
 */
import type { LoggedOp, Op } from './ops.ts';

export interface KnownEntry {
  readonly kind: 'file' | 'dir';
  readonly revision: string;
  /** SHA-256 hex of the content; '' for folders. */
  readonly sha256: string;
}

/** Why a replica cannot take writes (see sql/006_replica_outage.sql). */
export type OutageCause = 'full' | 'unauthorised' | 'failing';

/** A replica that is unavailable: its outage log waits for it. */
export interface Outage {
  readonly cause: OutageCause;
  /** When it became unavailable (ms since the epoch). */
  readonly sinceMs: number;
  /** Failed attempts since. */
  readonly failures: number;
  /** When it is tried again. */
  readonly nextProbeMs: number;
  /** The last error's message. */
  readonly error: string;
}

/** A replica's outage row as both stores read it. */
export interface OutageRow {
  readonly cause: OutageCause;
  readonly since_ms: number;
  readonly failures: number;
  readonly next_probe_ms: number;
  readonly error: string;
}

/** An outage row as the engine takes it. */
export function outageOf(r: OutageRow): Outage {
  return {
    cause: r.cause,
    sinceMs: r.since_ms,
    failures: r.failures,
    nextProbeMs: r.next_probe_ms,
    error: r.error,
  };
}

/** A head entry with its path. */
export interface HeadEntry {
  readonly path: string;
  readonly kind: 'file' | 'dir';
  readonly sha256: string;
}

/** One log row as kept (diagnosis: ShareService.logEntries). */
export interface LogRecord {
  readonly seq: number;
  readonly origin: string;
  readonly op: string;
  readonly doneTargets: string;
  readonly done: boolean;
}

/** A log row as both stores read it (SQLite's `log`, PostgreSQL's `mirror_log`: the same columns). */
export interface LogRow {
  readonly seq: number;
  readonly origin: string;
  /** The op, JSON. */
  readonly op: string;
  /** The content; null when none, or left out of the query. */
  readonly data: Buffer | null;
  /** The replicas the op is done on, a JSON array. */
  readonly done_targets: string;
  readonly created_ms: number;
}

/** A log row as the engine takes it. */
export function loggedOp(r: LogRow): LoggedOp {
  return {
    seq: r.seq,
    origin: r.origin,
    op: JSON.parse(r.op) as Op,
    data: r.data ?? undefined,
    doneTargets: JSON.parse(r.done_targets) as string[],
    createdMs: r.created_ms,
  };
}

/** A log row as the diagnosis lists it; `done` as SQLite (0 or 1) or PostgreSQL (a boolean) gives it. */
export function logRecord(
  r: Pick<LogRow, 'seq' | 'origin' | 'op' | 'done_targets'> & { readonly done: boolean | number },
): LogRecord {
  return {
    seq: r.seq,
    origin: r.origin,
    op: r.op,
    doneTargets: r.done_targets,
    done: r.done !== 0 && r.done !== false,
  };
}

/** The state of one share in books shared by many. */
export interface ShareStore {
  readonly shareId: string;
  cursor(replica: string): Promise<string | undefined>;
  setCursor(replica: string, cursor: string): Promise<void>;
  known(replica: string, path: string): Promise<KnownEntry | undefined>;
  /** Known entries at or below `path` ('' = all), sorted by path. */
  knownUnder(replica: string, path: string): Promise<(KnownEntry & { path: string })[]>;
  setKnown(replica: string, path: string, entry: KnownEntry | undefined): Promise<void>;
  /** Forget everything known at or below `path` on `replica`. */
  dropKnownUnder(replica: string, path: string): Promise<void>;
  head(path: string): Promise<KnownEntry | undefined>;
  /** Head entries at or below `path` ('' = all), sorted by path. */
  headUnder(path: string): Promise<HeadEntry[]>;
  setHead(path: string, entry: { kind: 'file' | 'dir'; sha256: string } | undefined): Promise<void>;
  /**
   * Whether `sha256` has been the share's head at `path` (now or before) — as far as the
   * history kept: see pruneHeadHistory.
   */
  wasHead(path: string, sha256: string): Promise<boolean>;
  /**
   * Forget the past head versions no replica's books hold at their path any more; returns
   * how many. wasHead is asked only about a version a replica's books hold at a path
   * (anti-entropy: is that replica behind, or does it hold a new version?), so those, and
   * the heads, are all that is kept. A version forgotten and then seen again on a replica
   * (say restored from its own history) counts as a new one: logged from it, a conflicted
   * copy at worst — never written over. The engine prunes after each verification.
   */
  pruneHeadHistory(): Promise<number>;
  dropHeadUnder(path: string): Promise<void>;
  /** Append to the share's log; returns the entry's seq. */
  append(
    origin: string,
    op: Op,
    data: Uint8Array | undefined,
    nowMs: number,
    doneTargets?: string[],
  ): Promise<number>;
  /** How many entries are not yet applied everywhere (without loading them). */
  pendingCount(): Promise<number>;
  /** Entries not yet applied everywhere, after `afterSeq`; `withData` false: without content. */
  pending(afterSeq?: number, withData?: boolean): Promise<LoggedOp[]>;
  /** Entries not yet done for `replica` (its outage log while it is unavailable included). */
  pendingFor(replica: string): Promise<number>;
  /** The content of entry `seq` (undefined: none, or applied everywhere). */
  data(seq: number): Promise<Uint8Array | undefined>;
  /** The replica's outage (undefined: available). */
  outage(replica: string): Promise<Outage | undefined>;
  /** Record the replica as unavailable (`undefined`: available again). */
  setOutage(replica: string, outage: Outage | undefined): Promise<void>;
  markTargetDone(seq: number, targets: readonly string[]): Promise<void>;
  /** The op is applied everywhere: its content is no longer needed. */
  markDone(seq: number): Promise<void>;
  /** Record that the engine changed `path` on `replica` now (at the log's current end). */
  touch(replica: string, path: string): Promise<void>;
  /** The log's end when the engine last changed `path` on `replica` (0 = never). */
  touchedAt(replica: string, path: string): Promise<number>;
  /** Whether the engine changed `path` or anything below it on `replica` at or after log seq `seq`. */
  touchedUnderSince(replica: string, path: string, seq: number): Promise<boolean>;
  /** The conflicted-copy names reserved by log entry `seq`. */
  copiesOf(seq: number): Promise<string[]>;
  /** Reserve `copy` for entry `seq`; false when another entry has it. */
  reserveCopy(seq: number, copy: string): Promise<boolean>;
  /** The last seq appended to this share's log (0 when empty). */
  maxSeq(): Promise<number>;
  logLength(): Promise<number>;
  /** Every log row of the share, in order (diagnosis). */
  logRecords(): Promise<LogRecord[]>;
  /** Run `fn` in one transaction: its calls on `tx` commit together or not at all. */
  transaction<T>(fn: (tx: ShareStore) => Promise<T>): Promise<T>;
}

/** The books of any number of shares in one database. */
export interface MirrorBooks {
  /** The store of one share; an implementation may bind it to the caller's term (fencing). */
  share(shareId: string): ShareStore;
}

/** Whether `p` is `path` or below it ('' = everything). */
export function atOrUnder(p: string, path: string): boolean {
  return path === '' || p === path || p.startsWith(path + '/');
}
