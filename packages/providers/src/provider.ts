/**
 * The storage provider contract. Every backend Weft stores files in — memory, a local
 * directory (the EFS tier), S3, Dropbox, Google Drive, OneDrive — implements this one
 * interface; everything above (engine, proxy, mirror engine) sees nothing else.
 *
 * Paths are provider paths (see paths.ts): relative to the provider root, `/`-separated,
 * NFC; '' is the root. Every method validates its paths first and throws InvalidPathError
 * without touching anything. Errors are only those in errors.ts.
 *
 * Folders: a write creates missing parent folders. `remove` of a folder removes it
 * with everything inside (as every cloud API does).
 */
import type { Features } from './features.ts';

/** A provider's content hash: the algorithm names how `value` was computed. */
export interface ContentHash {
  /** e.g. 'sha256', 'md5', 'dropbox-content-hash', 'quickxor'. */
  readonly algorithm: string;
  /** Lower-case hex, or the provider's own text form (base64 for quickxor). */
  readonly value: string;
}

export interface Entry {
  readonly path: string;
  readonly kind: 'file' | 'dir';
  /** Bytes; 0 for folders. */
  readonly size: number;
  /** Modification time, ms since the epoch. */
  readonly modifiedMs: number;
  /** Opaque token that changes whenever the content changes; '' for folders without one. */
  readonly revision: string;
  /** Present for files whenever the backend can give it cheaply (see features.hashInListing). */
  readonly hash?: ContentHash;
}

export interface ListOptions {
  /** Include everything below, not only direct children. */
  readonly recursive?: boolean;
  /** Entries per backend request, where the backend pages (a hint). */
  readonly pageSize?: number;
  readonly signal?: AbortSignal;
}

export interface ReadOptions {
  /** First byte to return (default 0). At or past the end: an empty stream. */
  readonly offset?: number;
  /** Bytes to return at most (default: to the end). */
  readonly length?: number;
  readonly signal?: AbortSignal;
}

/**
 * Content for a write. A Uint8Array or a factory can be re-sent, so the retry wrapper
 * may retry the write; a bare stream can be consumed once and is never retried.
 */
export type Body = Uint8Array | AsyncIterable<Uint8Array> | (() => AsyncIterable<Uint8Array>);

export interface WriteOptions {
  /** Length when known; a mismatch with the bytes actually received fails the write. */
  readonly size?: number;
  /** Fail with AlreadyExistsError when anything exists at the path. */
  readonly ifNotExists?: boolean;
  /** Fail with PreconditionFailedError unless the current revision is exactly this (NotFound if absent). */
  readonly ifRevision?: string;
  /**
   * The caller's SHA-256 (hex) of the body, when known. The provider checks the bytes it
   * received against it (a mismatch fails the write, nothing stored) and, where it keeps
   * metadata, records it so stat() can report it without reading the content.
   */
  readonly sha256?: string;
  /**
   * The caller keeps its own checksums of this body and checks what it reads back (the
   * redundant tier's fragments: every shard's SHA-256 is in its placement store). Without
   * `sha256`, the provider may then skip hashing the body for its own sake: the returned
   * entry may carry no hash, and S3 sends the payload unsigned (issue #17). With `sha256`,
   * or where a provider has nothing to skip, it changes nothing. Such a caller also hands
   * over the body's chunks: it does not reuse a chunk's memory once it has yielded it, so
   * a provider may keep a chunk after asking for the next (S3 streams the body to its
   * socket, which may still hold earlier chunks, without copying them).
   */
  readonly callerVerifies?: boolean;
  /** Modification time to record, where features.setModTime. */
  readonly modifiedMs?: number;
  readonly signal?: AbortSignal;
}

export interface RemoveOptions {
  /** Fail with PreconditionFailedError unless the current revision is exactly this. */
  readonly ifRevision?: string;
  readonly signal?: AbortSignal;
}

export interface TransferOptions {
  /** Replace an existing file at the destination (never a folder). Default false: AlreadyExists. */
  readonly overwrite?: boolean;
  readonly signal?: AbortSignal;
}

/**
 * One change in a feed. A created or modified entry is an 'upsert' carrying the new entry;
 * a 'delete' of a folder implies everything that was inside it; a move appears as a
 * delete of the old path followed by upserts at the new one.
 */
export type Change =
  | { readonly type: 'upsert'; readonly path: string; readonly entry: Entry }
  | { readonly type: 'delete'; readonly path: string };

export interface ChangePage {
  /** In the order they happened. */
  readonly changes: readonly Change[];
  /** Resume from here. Saving it and passing it later yields each later change exactly once. */
  readonly cursor: string;
  /** More changes are available right now; call again with `cursor`. */
  readonly hasMore: boolean;
  /**
   * The cursor given was too old or invalid: `changes` is empty and the caller must
   * re-list everything (Dropbox `reset`, Graph 410 resyncRequired) and continue from `cursor`.
   */
  readonly reset: boolean;
}

/** The page that tells the caller to re-list everything and continue from `cursor`. */
export function resetPage(cursor: string): ChangePage {
  return { changes: [], cursor, hasMore: false, reset: true };
}

export interface Provider {
  /** Short name for logs and errors, e.g. 'fs:/data', 's3:bucket/prefix'. */
  readonly name: string;
  readonly features: Features;

  /**
   * Entries of a folder ('' for the root), each exactly once, paginating as needed.
   * Throws NotFoundError if the folder does not exist (the root always exists).
   */
  list(dir: string, options?: ListOptions): AsyncIterable<Entry>;

  /** The entry at `path`. Throws NotFoundError. */
  stat(path: string, options?: { signal?: AbortSignal }): Promise<Entry>;

  /**
   * The content of a file, optionally a byte range. Throws NotFoundError (also for a
   * folder) before the stream is returned.
   */
  read(path: string, options?: ReadOptions): Promise<AsyncIterable<Uint8Array>>;

  /**
   * Store `body` at `path`, atomically: readers see the old content or the new one,
   * never a mix; a failed or aborted write leaves the previous state exactly as it was
   * (no partial file, no leftover upload). Returns the new entry.
   * Throws AlreadyExistsError (ifNotExists, or a folder is at `path`, or a file is where a
   * parent folder should be), PreconditionFailedError (ifRevision), QuotaExceededError.
   */
  write(path: string, body: Body, options?: WriteOptions): Promise<Entry>;

  /** Remove a file, or a folder with its content. Throws NotFoundError, PreconditionFailedError. */
  remove(path: string, options?: RemoveOptions): Promise<void>;

  /** Create a folder and its missing parents. Idempotent. Throws AlreadyExistsError if a file is there. */
  mkdir(path: string, options?: { signal?: AbortSignal }): Promise<void>;

  /** Server-side move (features.move). Throws NotFoundError, AlreadyExistsError. */
  move?(from: string, to: string, options?: TransferOptions): Promise<Entry>;

  /** Server-side copy (features.copy). Throws NotFoundError, AlreadyExistsError. */
  copy?(from: string, to: string, options?: TransferOptions): Promise<Entry>;

  /** A cursor at "now" for changes() (features.changeFeed). */
  latestCursor?(options?: { signal?: AbortSignal }): Promise<string>;

  /** Changes after `cursor`, in order (features.changeFeed). */
  changes?(cursor: string, options?: { signal?: AbortSignal; limit?: number }): Promise<ChangePage>;

  /** Release connections, timers and files. */
  close?(): Promise<void>;
}
