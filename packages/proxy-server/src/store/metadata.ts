/**
 * The metadata store: users, devices, the namespace index, the change feed, object
 * reference counts and transfers. One interface; SQLite (better-sqlite3, WAL) implements
 * it today, PostgreSQL later. Methods are synchronous because SQLite is; a PostgreSQL
 * implementation will sit behind the same calls made async at that point.
 */
import type { EntryInfo, ChangeRecord } from '@weft/wire';

export interface EntryRow extends EntryInfo {
  readonly fsRevision: string;
}

export interface DeviceRow {
  readonly id: string;
  readonly userId: string;
  readonly name: string;
}

export interface TransferRow {
  readonly id: string;
  readonly userId: string;
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
  readonly mtimeMs: number;
  readonly createdMs: number;
}

export interface ObjectRow {
  readonly sha256: string;
  readonly size: number;
  readonly refcount: number;
  readonly unreferencedSinceMs: number | null;
}

/** A change to record: the store assigns the seq and, for upserts, the revision. */
export type ChangeInput =
  | { type: 'upsert'; entry: Omit<EntryRow, 'revision'> & { revision?: string } }
  | { type: 'delete'; path: string }
  | { type: 'move'; from: string; path: string };

export interface MetadataStore {
  // users and devices
  ensureUser(userId: string, nowMs: number): void;
  listUsers(): string[];
  addDevice(device: DeviceRow, tokenSha256: string, nowMs: number): void;
  deviceByTokenHash(tokenSha256: string): DeviceRow | undefined;
  addInvite(inviteSha256: string, userId: string, nowMs: number): void;
  /** Marks the invite used; returns its user, or undefined if unknown or used. */
  consumeInvite(inviteSha256: string, nowMs: number): string | undefined;

  // namespace index
  currentSeq(userId: string): number;
  getEntry(userId: string, path: string): EntryRow | undefined;
  /** Direct children of `dir` ('' = root), or everything below it when recursive; path order. */
  listEntries(userId: string, dir: string, recursive: boolean): EntryRow[];
  /**
   * Record changes atomically: entries updated, object refcounts adjusted, one change
   * record each with the next seq. Returns the records (with seq and revisions).
   */
  applyChanges(
    userId: string,
    changes: ChangeInput[],
    device: string | undefined,
    nowMs: number,
  ): ChangeRecord[];
  /** Record a new tier revision for an entry without a change (a rename changed its ctime). */
  setFsRevision(userId: string, path: string, fsRevision: string): void;
  changesSince(userId: string, cursor: number, limit: number): ChangeRecord[];

  // objects
  /**
   * Size of large content this user has held (and the object tier still keeps). Deduplication is
   * global, but only content the caller already holds may be linked or used as a delta
   * base without sending it — otherwise a client could probe other users' files.
   */
  userLargeContent(userId: string, sha256: string): number | undefined;
  getObject(sha256: string): ObjectRow | undefined;
  /** Insert an object row (refcount 0, unreferenced now) if absent. */
  addObject(sha256: string, size: number, nowMs: number): void;
  /** Objects unreferenced since before `cutoffMs`. */
  collectableObjects(cutoffMs: number): ObjectRow[];
  deleteObject(sha256: string): void;
  /** Recompute every refcount from the index (after a crash). */
  recomputeRefcounts(nowMs: number): void;

  // transfers
  addTransfer(t: TransferRow): void;
  getTransfer(id: string): TransferRow | undefined;
  addTransferRange(id: string, offset: number, length: number): void;
  transferRanges(id: string): { offset: number; length: number }[];
  deleteTransfer(id: string): void;
  transfersOlderThan(cutoffMs: number): TransferRow[];

  close(): void;
}
