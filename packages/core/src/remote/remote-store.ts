/**
 * What the client engine needs from the server holding its files: the proxy API of
 * docs/formats/api.md seen as calls. `ProxyClient` implements it over HTTP and WebSocket;
 * `MemoryRemoteStore` (packages/core/test/support) implements it in memory so that engine
 * tests run several devices against one store without a server.
 *
 * Errors: a refused call throws `RemoteError` with the server's code (NOT_FOUND, CONFLICT,
 * PATH_CLASH, …) and a server that cannot be reached throws `OfflineError`; both live in
 * proxy-client.ts and every implementation uses them.
 */
import type {
  BlockAck,
  BundleDeferredReason,
  BundleUploadResponse,
  ChangesResponse,
  DecodedBundle,
  DecodedDeltaContainer,
  EntryInfo,
  FeedServerMessage,
  FileOp,
  ListResponse,
  MerkleNode,
  OpResult,
  TransferState,
  UsageResponse,
} from '@weft/wire';
import type { Disposable } from '../lifecycle.ts';

/** Where a paged listing goes on: the first page has neither `after` nor `seq`. */
export interface ListPageRequest {
  readonly limit: number;
  readonly after?: string;
  readonly seq?: number;
}

/** What a remote said of its own time on one request (wire/server-timing.ts). */
export interface RequestTiming {
  /** Milliseconds the server spent from the whole request body to its answer; unset: unknown. */
  serverMs?: number;
}

export interface RemoteStore {
  /** Every entry under `path` ('' = the root), recursively or one level. */
  list(path?: string, recursive?: boolean): Promise<ListResponse>;
  /**
   * One page of the recursive listing of `path` (issue #16): at most `page.limit` entries
   * after `page.after`, in byte order of path; pass the first page's `seq` with every later
   * page, and the answer's `next` as `after` while it has one (docs/formats/api.md). Absent:
   * this store lists whole only.
   */
  listPage?(path: string, page: ListPageRequest): Promise<ListResponse>;
  /** One entry, or undefined when nothing is at `path`. */
  stat(path: string): Promise<EntryInfo | undefined>;
  /** A file's bytes (streaming) with the version they are; NOT_FOUND when it is gone. */
  download(
    path: string,
    range?: { offset: number; length?: number },
    signal?: AbortSignal,
  ): Promise<{ body: AsyncIterable<Uint8Array>; revision: string; sha256: string; size: number }>;
  /** Namespace operations (mkdir, delete, move, put…), each answered in order. */
  ops(ops: readonly FileOp[]): Promise<OpResult[]>;
  /**
   * Upload an encoded bundle of small files (docs/formats/bundle.md); one result per entry.
   * The bytes are the caller's again once the call settles (the agent reuses its buffers):
   * nothing of them may be kept. When given, `timing.serverMs` is set to the server's own time
   * on the request where the server says it (the proxy's Server-Timing header), so that the
   * caller can tell the link's time from the server's.
   */
  uploadBundle(bundle: Uint8Array, timing?: RequestTiming): Promise<BundleUploadResponse['results']>;
  /** Download small files in one bundle; each path comes back either as an entry or deferred. */
  downloadBundle(
    paths: readonly string[],
    compress?: boolean,
  ): Promise<{ bundle: DecodedBundle; deferred: { path: string; reason: BundleDeferredReason }[] }>;
  /** Start (or find again) a large upload. */
  createTransfer(req: {
    path: string;
    size: number;
    sha256: string;
    mtimeMs: number;
    baseRevision?: string | null;
  }): Promise<TransferState>;
  /** A large upload's state, or undefined when the server no longer has it. */
  getTransfer(id: string): Promise<TransferState | undefined>;
  /** One encoded transfer block (docs/formats/transfer-block.md). */
  putBlock(id: string, frame: Uint8Array): Promise<BlockAck>;
  /**
   * Where to send a new transfer's blocks when the server steers it (`state.preferred`,
   * issue #18): that instance's URL only when it is one this store already knows as up and
   * not the one it is on; else undefined (a URL from an answer alone is never trusted).
   * Absent: one server.
   */
  steeredUrl?(state: TransferState): string | undefined;
  /** One transfer block sent to the instance at `url` only (never moved to another). */
  putBlockAt?(url: string, id: string, frame: Uint8Array): Promise<BlockAck>;
  /** Replace a file by patching its `baseRevision` with an encoded delta container. */
  /** `own`: contents sent to `path` whose answer never came (CommitOp.own). */
  uploadDelta(
    path: string,
    baseRevision: string,
    mtimeMs: number,
    container: Uint8Array,
    own?: readonly string[],
  ): Promise<OpResult>;
  /** A delta from the version with `baseSha256` (described by its signature) to the current one. */
  downloadDelta(path: string, baseSha256: string, signatureBytes: Uint8Array): Promise<DecodedDeltaContainer>;
  /**
   * Server-side diff: a delta from the version with `baseSha256` to the current one, made by
   * the server from its own copy of that version — no signature sent. RemoteError
   * DELTA_BASE_UNKNOWN when it holds none for this user. Absent: this store cannot.
   */
  serverDelta?(path: string, baseSha256: string): Promise<DecodedDeltaContainer>;
  /** The rsync signature of a file's current version, named by sha256 and revision. */
  signature(path: string): Promise<{ bytes: Uint8Array; sha256: string; revision: string }>;
  /** One page of the change feed after `cursor`. */
  changes(cursor: number, limit?: number): Promise<ChangesResponse>;
  /** Merkle nodes of the namespace for the given folder paths (consistency check). */
  merkle(paths: readonly string[]): Promise<MerkleNode[]>;
  /**
   * The user's storage: bytes used and the quota (null: unlimited). Optional: a store
   * without quotas (the in-memory one) leaves it out, and no usage is shown.
   */
  usage?(): Promise<UsageResponse>;
  /**
   * The live feed from `cursor`: `onMessage` gets each message, `onClose` fires once when it
   * ends for any reason. Dispose to close.
   */
  openFeed(
    cursor: number,
    onMessage: (m: FeedServerMessage) => void,
    onClose: (reason: string) => void,
  ): Disposable;
}
