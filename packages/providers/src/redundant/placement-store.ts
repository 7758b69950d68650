/**
 * The placement store of the redundant tier (issue #17) as an interface: the namespace the
 * tier presents, each object's layout and where its replicas or fragments are, the outage log
 * of what a down backend missed, and which backends were seen down. Two implementations:
 * SQLite (store.ts, a file of the tier's own — the embedded default, one process) and
 * PostgreSQL (in @weft/proxy-server, store/placement-postgres.ts — several proxy instances
 * over one tier, issue #18). The tier takes the store it is given, so this package needs no
 * PostgreSQL client: the proxy, which already holds one, brings it.
 *
 * Rules every implementation keeps (the shared suite, testing/placement-store-suite.ts):
 * each namespace change (mkdirs, commitFile, remove, transfer) is one transaction, checked
 * against the state inside it; an object's refs count the entries that point at it; the
 * outage log is read in `seq` order per backend. Writes marked `fenced` are the background
 * jobs' (replay, scrub, replacement): on a shared store they commit only while this process
 * holds the controller lease (the store's fence check runs inside the same transaction).
 */
import { randomBytes } from 'node:crypto';
import { AlreadyExistsError, NotFoundError, PreconditionFailedError } from '../errors.ts';
import type { Entry } from '../provider.ts';

export interface ObjectRow {
  readonly id: string;
  readonly size: number;
  readonly sha256: string;
  readonly layout: 'replicated' | 'striped';
  readonly k: number;
  readonly m: number;
  readonly shard_bytes: number;
  readonly shard_sha: Buffer | null;
  readonly refs: number;
}

export interface LocationRow {
  readonly object_id: string;
  readonly slot: number;
  readonly backend: string;
  readonly blob_sha256: string;
  readonly state: 'ok' | 'owed' | 'bad';
}

/** One location with its object's layout (PlacementStore.holdings). */
export interface HoldingRow {
  readonly object_id: string;
  readonly layout: ObjectRow['layout'];
  readonly k: number;
  readonly backend: string;
  readonly state: LocationRow['state'];
}

export interface LogRow {
  readonly seq: number;
  readonly backend: string;
  readonly op: 'put' | 'delete';
  readonly object_id: string;
  readonly slot: number;
  readonly blob_key: string;
  readonly at_ms: number;
}

export interface NewObject {
  readonly row: Omit<ObjectRow, 'refs'>;
  readonly locations: readonly Omit<LocationRow, 'object_id'>[];
}

export interface PutConditions {
  readonly ifNotExists?: boolean;
  readonly ifRevision?: string;
}

/** A blob a down backend is owed by a commit: logged ('put') in the commit's transaction. */
export interface OwedBlob {
  readonly backend: string;
  readonly slot: number;
  readonly blobKey: string;
}

/** A background job's write: refused (FencedError) on a shared store unless this process is the controller. */
export interface WriteOptions {
  readonly fenced?: boolean;
}

export interface PlacementStore {
  /** Whether other processes share this store (PostgreSQL): then only the controller runs background jobs. */
  readonly shared: boolean;

  // ---- namespace ----
  entry(path: string): Promise<Entry | undefined>;
  objectOf(path: string): Promise<string | undefined>;
  /** Children of `dir` (or everything below with `recursive`), by path. NotFound when `dir` is no folder. */
  list(dir: string, recursive: boolean): Promise<Entry[]>;
  /** Create `path` and its missing parents as folders. AlreadyExists where a file is in the way. */
  mkdirs(path: string, modifiedMs: number): Promise<void>;
  /**
   * Point `path` at a newly stored object (inserted with refs 1), checking the write's
   * conditions in the same transaction, and log a 'put' for every blob in `owed`. Returns the
   * new entry and the objects no entry references any more (to delete from the backends).
   */
  commitFile(
    path: string,
    obj: NewObject,
    cond: PutConditions,
    modifiedMs: number,
    owed?: readonly OwedBlob[],
  ): Promise<{ entry: Entry; released: ObjectRow[] }>;
  /** Check a put's conditions without changing anything (before uploading). */
  checkPut(path: string, cond: PutConditions): Promise<void>;
  /** Remove a file or a folder with its content; returns the objects left unreferenced. */
  remove(path: string, ifRevision?: string): Promise<ObjectRow[]>;
  /** Move (or copy) `from` — a file or a folder with its content — to `to`. */
  transfer(
    from: string,
    to: string,
    overwrite: boolean,
    mode: 'move' | 'copy',
  ): Promise<{ entry: Entry; released: ObjectRow[] }>;

  // ---- objects and locations ----
  object(id: string): Promise<ObjectRow | undefined>;
  locations(id: string): Promise<LocationRow[]>;
  /** Ids of objects with any location on `backend`, or every object when omitted, by id. */
  objectIds(backend?: string): Promise<string[]>;
  /**
   * Locations with their object's layout and k, grouped by object (slot order), for the
   * objects after `afterId` (by id), at most `objects` of them: one page of the status pass.
   */
  holdings(afterId: string, objects: number): Promise<HoldingRow[]>;
  /** Per backend: the replicas and fragments placed on it, and how many of them are `bad`. */
  backendCounts(): Promise<Map<string, { blobs: number; bad: number }>>;
  /** Change a location's state and/or backend (nothing when the location is gone). */
  setLocation(
    id: string,
    slot: number,
    change: { state?: LocationRow['state']; backend?: string },
    options?: WriteOptions,
  ): Promise<void>;
  /** Forget an object whose entries are all gone (its blobs already deleted or logged). */
  forgetObject(id: string): Promise<void>;
  /** Objects with refs 0 still recorded (a crash between commit and blob deletion). */
  unreferenced(): Promise<ObjectRow[]>;

  // ---- outage log and backend state ----
  logAppend(
    backend: string,
    op: LogRow['op'],
    objectId: string,
    slot: number,
    blobKey: string,
  ): Promise<void>;
  /** A backend's pending entries, oldest (lowest seq) first. */
  logPending(backend: string, limit?: number): Promise<LogRow[]>;
  logCount(backend?: string): Promise<number>;
  logDone(seq: number, options?: WriteOptions): Promise<void>;
  /** Drop every pending entry of a backend (replacement: the rebuild covers them). */
  logClear(backend: string, options?: WriteOptions): Promise<void>;
  /** Move every pending log entry of one backend to another. */
  logRename(from: string, to: string): Promise<void>;
  downSince(backend: string): Promise<number | undefined>;
  /** Record a backend down since `since` (an earlier record is kept). */
  setDown(backend: string, since: number): Promise<void>;
  setUp(backend: string): Promise<void>;

  // ---- the background jobs' records ----
  /**
   * A background job's record by name (JSON text: the last scrub, the last orphan sweep, a
   * backend replacement's progress), kept beside the placement so that the next controller
   * continues from it; undefined when there is none.
   */
  jobRecord(name: string): Promise<string | undefined>;
  /** Keep (replace) a job's record; with `fenced`, refused unless this process is the controller. */
  setJobRecord(name: string, value: string, options?: WriteOptions): Promise<void>;
  /** Drop a job's record (nothing when there is none). */
  clearJobRecord(name: string, options?: WriteOptions): Promise<void>;
  /**
   * Run `work` under the controller's fence: on a shared store inside a transaction whose
   * lease check (FencedError when this process is not the controller) keeps the lease locked
   * against a takeover until `work` ends — for a background job's deletes on the backends,
   * which no database transaction covers. On the embedded store it just runs `work`.
   */
  whileFenced<T>(work: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export function newRevision(): string {
  return randomBytes(12).toString('hex');
}

/** The write conditions of a put against the entry now at `path`. */
export function checkPutAgainst(path: string, current: Entry | undefined, cond: PutConditions): void {
  if (current?.kind === 'dir') throw new AlreadyExistsError(`redundant: a folder is at ${path}`);
  if (cond.ifNotExists && current) throw new AlreadyExistsError(`redundant: ${path} exists`);
  if (cond.ifRevision !== undefined) {
    if (!current) throw new NotFoundError(`redundant: nothing at ${path}`);
    if (current.revision !== cond.ifRevision)
      throw new PreconditionFailedError(`redundant: ${path} is at another revision`, current.revision);
  }
}

/** An entry as both stores read it: its row joined to its object's sha256 (entrySelect). */
export interface EntryRow {
  readonly path: string;
  readonly kind: 'file' | 'dir';
  readonly size: number;
  readonly modified_ms: number;
  readonly revision: string;
  readonly object_id: string | null;
  readonly sha256: string | null;
}

/**
 * The entry SELECT (an EntryRow a row, entries aliased `e`) over the store's tables: `entries`
 * and `objects` in SQLite, `redundant_entries` and `redundant_objects` on PostgreSQL.
 */
export function entrySelect(entries: string, objects: string): string {
  return (
    'SELECT e.path, e.kind, e.size, e.modified_ms, e.revision, e.object_id, o.sha256 ' +
    `FROM ${entries} e LEFT JOIN ${objects} o ON o.id = e.object_id`
  );
}

/** An entry row as the Provider contract's Entry. */
export function toEntry(r: Omit<EntryRow, 'object_id'>): Entry {
  const base = { path: r.path, kind: r.kind, size: r.size, modifiedMs: r.modified_ms, revision: r.revision };
  return r.kind === 'file' && r.sha256 ? { ...base, hash: { algorithm: 'sha256', value: r.sha256 } } : base;
}
