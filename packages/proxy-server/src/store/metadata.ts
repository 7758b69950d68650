/**
 * The metadata store: users, devices, the namespace index, the change feed, object
 * reference counts and transfers. One interface, two implementations: SQLite (better-sqlite3,
 * WAL; sqlite.ts), the embedded default, and PostgreSQL (postgres.ts), which several proxy
 * processes can share. Every method is async; a method that must be atomic (a check and the
 * write it guards) is one method, run as one transaction by each implementation, never a
 * read and a write with an await between them in the caller.
 */
import type { EntryInfo, ChangeRecord } from '@weft/wire';
import type { VersionStore } from './version-index.ts';

export interface EntryRow extends EntryInfo {
  readonly fsRevision: string;
}

/** An index row as clients see it (without the tier revision). */
export function publicEntry(e: EntryRow): EntryInfo {
  const { fsRevision: _fs, ...rest } = e;
  return rest;
}

export interface DeviceRow {
  readonly id: string;
  readonly userId: string;
  readonly name: string;
}

/** A device as listed to its user. */
export interface DeviceInfoRow extends DeviceRow {
  readonly createdMs: number;
  /** Last authenticated request or feed connection (null: never since enrolment). */
  readonly lastSeenMs: number | null;
}

/** What a token names: a live device, a revoked one, or nothing. */
export type TokenLookup =
  | { readonly state: 'active'; readonly device: DeviceRow }
  | { readonly state: 'revoked'; readonly device: DeviceRow }
  | { readonly state: 'unknown' };

/** Why an invite could not be used (nothing was changed). */
export type InviteRefusal = 'unknown' | 'used' | 'expired' | 'other-user';

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
  | {
      type: 'upsert';
      entry: Omit<EntryRow, 'revision'> & { revision?: string };
      /**
       * The caller looked the path up while holding the scheduler's slot for it and found no
       * row (a bundle's new files): the store need not look again before inserting. SQLite,
       * written by this process only, trusts it; PostgreSQL, which other processes write too,
       * looks anyway under its namespace lock.
       */
      absent?: true;
    }
  | { type: 'delete'; path: string }
  | { type: 'move'; from: string; path: string };

export interface MetadataStore {
  // users and devices
  ensureUser(userId: string, nowMs: number): Promise<void>;
  listUsers(): Promise<string[]>;
  addDevice(device: DeviceRow, tokenSha256: string, nowMs: number): Promise<void>;
  /** The live (not revoked) device a token belongs to. */
  deviceByTokenHash(tokenSha256: string): Promise<DeviceRow | undefined>;
  /** The device a token belongs to, revoked ones included. */
  lookupToken(tokenSha256: string): Promise<TokenLookup>;
  /** A user's live devices, oldest first. */
  listDevices(userId: string): Promise<DeviceInfoRow[]>;
  /** Record a sign of life (callers throttle it). */
  touchDevice(deviceId: string, nowMs: number): Promise<void>;
  /**
   * Revoke one of `userId`'s live devices; false when there is none with that id for this
   * user (another user's device included: the same answer as an unknown one).
   */
  revokeDevice(userId: string, deviceId: string, nowMs: number): Promise<boolean>;
  addInvite(inviteSha256: string, userId: string, nowMs: number, expiresMs: number): Promise<void>;
  /**
   * Use an invite for `userId`, atomically: it is marked used only when it is known, unused,
   * unexpired and made for that user; otherwise nothing changes and the refusal says why.
   */
  consumeInvite(
    inviteSha256: string,
    userId: string,
    nowMs: number,
  ): Promise<{ ok: true } | { ok: false; reason: InviteRefusal }>;

  // namespace index
  currentSeq(userId: string): Promise<number>;
  getEntry(userId: string, path: string): Promise<EntryRow | undefined>;
  /** Direct children of `dir` ('' = root), or everything below it when recursive; path order. */
  listEntries(userId: string, dir: string, recursive: boolean): Promise<EntryRow[]>;
  /**
   * One page of everything below `dir`: at most `limit` entries whose path is after `after`
   * ('' = from the start), in byte order of path — a keyset page read through the primary
   * key, so its cost is the page's, not the namespace's (issue #16).
   */
  listEntriesPage(userId: string, dir: string, after: string, limit: number): Promise<EntryRow[]>;
  /**
   * Record changes atomically: entries updated, object refcounts adjusted, one change
   * record each with the next seq. Returns the records (with seq and revisions).
   */
  applyChanges(
    userId: string,
    changes: ChangeInput[],
    device: string | undefined,
    nowMs: number,
    /**
     * Keep every file version these changes replace with other content or delete (the caller
     * has put small versions' bytes aside first: HybridStore.keepContent).
     */
    keepVersions?: boolean,
  ): Promise<ChangeRecord[]>;
  /** Record a new tier revision for an entry without a change (a rename changed its ctime). */
  setFsRevision(userId: string, path: string, fsRevision: string): Promise<void>;
  changesSince(userId: string, cursor: number, limit: number): Promise<ChangeRecord[]>;
  /** Logical bytes the namespace holds: the sum of its files' sizes (quota usage). */
  usedBytes(userId: string): Promise<number>;

  /** Kept versions and deleted files (version-index.ts). */
  readonly versions: VersionStore;

  // objects
  /**
   * Size of large content this user has held (and the object tier still keeps). Deduplication is
   * global, but only content the caller already holds may be linked or used as a delta
   * base without sending it — otherwise a client could probe other users' files.
   */
  userLargeContent(userId: string, sha256: string): Promise<number | undefined>;
  getObject(sha256: string): Promise<ObjectRow | undefined>;
  /** Insert an object row (refcount 0, unreferenced now) if absent. */
  addObject(sha256: string, size: number, nowMs: number): Promise<void>;
  /** Objects unreferenced since before `cutoffMs`. */
  collectableObjects(cutoffMs: number): Promise<ObjectRow[]>;
  /**
   * Forget an object whose refcount is 0 (true), in one transaction; false, with nothing
   * changed, when something references it again. GC claims the row this way before it
   * removes the bytes, so a reference taken meanwhile keeps them.
   */
  deleteObject(sha256: string): Promise<boolean>;
  /** Recompute every refcount from the index (after a crash). */
  recomputeRefcounts(nowMs: number): Promise<void>;

  // transfers
  addTransfer(t: TransferRow): Promise<void>;
  getTransfer(id: string): Promise<TransferRow | undefined>;
  /**
   * Record an acknowledged range and the transfer's activity at `nowMs` (one transaction);
   * false, nothing recorded, when the transfer is gone (GC removed it).
   */
  addTransferRange(id: string, offset: number, length: number, nowMs: number): Promise<boolean>;
  transferRanges(id: string): Promise<{ offset: number; length: number }[]>;
  /** Record activity (a commit attempt) at `nowMs`; false when the transfer is gone. */
  touchTransfer(id: string, nowMs: number): Promise<boolean>;
  deleteTransfer(id: string): Promise<void>;
  /** Transfers with no activity (opened, a block, a commit attempt) since `cutoffMs`. */
  idleTransfers(cutoffMs: number): Promise<TransferRow[]>;
  /** Delete the transfer only if still idle since `cutoffMs` (activity since keeps it); true if deleted. */
  deleteIdleTransfer(id: string, cutoffMs: number): Promise<boolean>;
  /** Declared bytes of the user's open transfers, except those for `exceptPath`. */
  openTransferBytes(userId: string, exceptPath: string): Promise<number>;

  /**
   * Call `listener` with the namespace whenever any process sharing this store records
   * changes (PostgreSQL: LISTEN/NOTIFY, sent at commit); the returned function stops it.
   * SQLite has one writing process, whose own calls already say so: it never calls back.
   */
  watchChanges(listener: (userId: string) => void): Promise<() => Promise<void>>;

  close(): Promise<void>;
}
