/**
 * An in-memory proxy: the server side of docs/formats/api.md as far as the client engine
 * sees it, with no HTTP, no disk and no clock of its own — so that engine tests run several
 * devices against one store in one process (test/support/fake-cloud.ts).
 *
 * `MemoryServer` holds one namespace per user (entries, the change feed, large content
 * held); `MemoryServer.connect(user, deviceName)` gives one device's `RemoteStore`. What the
 * engine depends on mirrors the real server (packages/proxy-server/src/server.ts and
 * store/hybrid.ts), rule for rule:
 *   - revisions are `r<seq>`, one seq per change record; a moved entry keeps its revision;
 *   - conditional writes: a stale base keeps both (the client's version goes to a
 *     conflicted copy named after the writing device), the same content already current is
 *     a no-op, a stale delete is dropped (`delete-modified`), a move ignores its base;
 *   - a write creates missing parent folders (each its own change, before the file); a file
 *     where a folder is (or the other way round) is ALREADY_EXISTS;
 *   - bundles are planned whole, then recorded folders first, then files, in entry order;
 *     entries of large size go through the single-file path afterwards;
 *   - large content (size ≥ smallFileBytes) is held per user: transfers (ranges acked,
 *     `haveObject`), commit with or without a transfer (OBJECT_UNKNOWN unless held),
 *     signatures (large files only), deltas both ways with the real rsync-wasm engine;
 *   - the feed pages changes 500 at a time after a `hello`; a cursor past the namespace gets
 *     `reset`; names are case-sensitive (the server on Linux applies no case rule).
 * Not modelled: quotas, shares, devices and enrolment, back-pressure, the two storage tiers'
 * crash recovery. The contract test (e2e/test/remote-store-contract.test.ts) runs the same
 * checks against this and a real proxy so the two cannot drift.
 *
 * Test controls: `offline` (every call and feed fails with OfflineError), `failNext` (one
 * call fails as told, before or after its work), `refuseNextOp` (one operation of an `ops`
 * request is refused with a code), `beforeCall` (something happens on the
 * server between two calls), `calls` and `sentOps` (what was asked, for assertions).
 *
 * The content calls (commits, bundles, transfers, deltas, signatures, Merkle nodes) are
 * worked in memory-content.ts; this file holds the door, its test controls and the feed.
 */
import type {
  BlockAck,
  BundleDeferredReason,
  BundleUploadResponse,
  ChangesResponse,
  DecodedBundle,
  DecodedDeltaContainer,
  EntryInfo,
  ErrorCode,
  FeedServerMessage,
  FileOp,
  ListResponse,
  MerkleNode,
  OpResult,
  TransferState,
} from '@weft/wire';
import { decodeBundle, isWireFormatError } from '@weft/wire';
import { type Disposable, toDisposable } from '../lifecycle.ts';
import {
  MemoryServerState,
  type Namespace,
  type Writer,
  checkNewPath,
  checkPath,
  fail,
} from './memory-server.ts';
import {
  applyDelta,
  bundleOf,
  commitContent,
  deltaFor,
  merkleNode,
  openTransfer,
  receiveBlock,
  signatureOf,
  since,
  transferStateOf,
} from './memory-content.ts';
import { OfflineError, RemoteError } from './proxy-client.ts';
import type { ListPageRequest, RemoteStore, RequestTiming } from './remote-store.ts';

export type { MemoryServerOptions } from './memory-server.ts';

/** The in-memory proxy: its state and rules (memory-server.ts), and a door per device. */
export class MemoryServer extends MemoryServerState {
  private devices = 0;

  /** A device of `user` (the namespace is created on first use). */
  connect(user: string, deviceName: string): MemoryRemoteStore {
    this.devices += 1;
    return new MemoryRemoteStore(this, user, { deviceId: `d${this.devices}`, deviceName });
  }
}

const FEED_PAGE = 500;

/** One device's view of a MemoryServer: the RemoteStore the engine is given. */
export class MemoryRemoteStore implements RemoteStore {
  /** While true, every call and every feed fails as if the server were down. */
  private down = false;
  private readonly feeds = new Set<() => void>();
  private failures: { method: string; error: Error; after: number }[] = [];
  /** Calls made, by method name. */
  readonly calls = new Map<string, number>();
  /** Every namespace operation this device sent (POST /v1/ops), in order. */
  readonly sentOps: FileOp[] = [];
  /** Runs before each call reaches the server (a test makes other things happen first). */
  beforeCall: ((method: string) => Promise<void>) | undefined;
  /**
   * Whether uploadBundle tells its own time (what `beforeCall` held it included), as the
   * proxy's Server-Timing header does; false: a server that does not say.
   */
  reportsServerTime = true;

  constructor(
    readonly server: MemoryServerState,
    readonly user: string,
    private readonly writer: Writer,
  ) {}

  get offline(): boolean {
    return this.down;
  }

  /** Take this device off the network (open feeds close) or bring it back. */
  set offline(down: boolean) {
    this.down = down;
    if (down) for (const close of [...this.feeds]) close();
  }

  /**
   * A call of `method` fails with `error` (once): the next one, or the one after `after`
   * more. With `afterApply` the server does the call's work first and the answer is lost
   * (a connection cut after the write: the client cannot know it happened).
   */
  failNext(method: keyof RemoteStore, error: Error, after = 0, afterApply = false): void {
    if (!afterApply) {
      this.failures.push({ method, error, after });
      return;
    }
    const self = this as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const original = self[method];
    if (!original) throw new Error(`no method ${method}`);
    let left = after;
    self[method] = async (...args: unknown[]): Promise<unknown> => {
      const answer = await original.apply(this, args);
      if (left-- > 0) return answer;
      delete self[method]; // the prototype's method again
      throw error;
    };
  }

  /**
   * The next call of `method` fails with `error` at once and its work is held back: the
   * server does it when the test calls the returned function — a request of a process killed
   * with it on the wire, which the server goes on with after a new process started (issue #16:
   * a dead agent's commit landed after the restarted agent's pull).
   */
  holdNext(method: keyof RemoteStore, error: Error): () => Promise<void> {
    const self = this as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const original = self[method];
    if (!original) throw new Error(`no method ${method}`);
    let held: unknown[] | undefined;
    self[method] = async (...args: unknown[]): Promise<unknown> => {
      delete self[method]; // the prototype's method again
      held = args;
      throw error;
    };
    return async () => {
      if (!held) throw new Error(`no call of ${method} was held`);
      const args = held;
      held = undefined;
      const down = this.down;
      this.down = false; // the server does the work whatever the device's network does now
      try {
        await original.apply(this, args);
      } finally {
        this.down = down;
      }
    };
  }

  /**
   * The next namespace operation `match` picks is refused with `code` (once), as the server
   * refuses one operation of a request for a reason of its own; the others are applied.
   */
  refuseNextOp(match: (op: FileOp) => boolean, code: ErrorCode, message = 'refused by the test'): void {
    this.refusals.push({ match, code, message });
  }

  private refusals: { match: (op: FileOp) => boolean; code: ErrorCode; message: string }[] = [];

  private get ns(): Namespace {
    return this.server.ns(this.user);
  }

  /** Every call: a turn of the event loop (as a request is), then the network's answer. */
  private async enter(method: string, bodyBytes = 0): Promise<Namespace> {
    const rate = this.server.uploadBytesPerSecond;
    if (rate && bodyBytes > 0) await new Promise<void>((r) => setTimeout(r, (bodyBytes / rate) * 1000));
    else await new Promise<void>((r) => setImmediate(r));
    this.calls.set(method, (this.calls.get(method) ?? 0) + 1);
    await this.beforeCall?.(method);
    if (this.down) throw new OfflineError('cannot reach the memory server: offline');
    const i = this.failures.findIndex((f) => f.method === method);
    const f = this.failures[i];
    if (f && f.after-- === 0) {
      this.failures.splice(i, 1);
      throw f.error;
    }
    return this.ns;
  }

  async list(path = '', recursive = true): Promise<ListResponse> {
    const n = await this.enter('list');
    checkPath(path, true);
    if (path !== '') {
      const d = n.entries.get(path);
      if (!d) fail('NOT_FOUND', 'not found');
      if (d.kind !== 'dir') fail('NOT_A_FOLDER', 'not a folder');
    }
    return { entries: n.list(path, recursive), seq: n.seq };
  }

  /** As the proxy pages it (files.ts): a keyset after `after`, the first page's seq throughout. */
  async listPage(path: string, page: ListPageRequest): Promise<ListResponse> {
    // The first page checks the folder and takes the seq as a whole listing does.
    const whole = page.after === undefined ? await this.list(path, true) : undefined;
    const all = whole ?? { entries: (await this.enter('list')).list(path, true), seq: page.seq ?? 0 };
    const after = Buffer.from(page.after ?? '');
    const entries = all.entries
      .filter((e) => Buffer.compare(Buffer.from(e.path), after) > 0)
      .slice(0, page.limit);
    const last = entries.at(-1);
    return {
      entries,
      seq: all.seq,
      ...(entries.length === page.limit && last ? { next: last.path } : {}),
    };
  }

  async stat(path: string): Promise<EntryInfo | undefined> {
    const n = await this.enter('stat');
    checkPath(path);
    return n.entries.get(path);
  }

  async download(
    path: string,
    range?: { offset: number; length?: number },
  ): Promise<{ body: AsyncIterable<Uint8Array>; revision: string; sha256: string; size: number }> {
    const n = await this.enter('download');
    checkPath(path);
    const e = n.entries.get(path);
    if (!e) fail('NOT_FOUND', 'not found');
    if (e.kind !== 'file') fail('NOT_FOUND', 'not a file');
    const all = n.content.get(path) ?? new Uint8Array();
    const bytes = range
      ? all.subarray(range.offset, range.length === undefined ? undefined : range.offset + range.length)
      : all;
    return {
      body: (async function* () {
        yield bytes;
      })(),
      revision: e.revision,
      sha256: e.sha256 ?? '',
      size: bytes.byteLength,
    };
  }

  async ops(ops: readonly FileOp[]): Promise<OpResult[]> {
    const n = await this.enter('ops');
    this.sentOps.push(...ops);
    if (ops.length < 1 || ops.length > 1000) fail('BAD_REQUEST', 'between 1 and 1000 ops');
    for (const op of ops) {
      if (op.op === 'move' || op.op === 'copy') {
        checkPath(op.from);
        checkNewPath(op.to);
      } else if (op.op === 'delete') checkPath(op.path);
      else checkNewPath(op.path);
    }
    const s = this.server;
    const w = this.writer;
    return ops.map((op): OpResult => {
      try {
        const refusal = this.refusals.findIndex((r) => r.match(op));
        if (refusal >= 0) {
          const [r] = this.refusals.splice(refusal, 1);
          if (r) fail(r.code, r.message);
        }
        switch (op.op) {
          case 'mkdir':
            return s.mkdir(n, w, op.path);
          case 'delete':
            return s.remove(n, w, op.path, op.baseRevision, op.own);
          case 'move':
            return s.move(n, w, op.from, op.to);
          case 'copy':
            return s.copy(n, w, op.from, op.to);
          case 'commit':
            return commitContent(s, n, w, op);
        }
      } catch (e) {
        if (!(e instanceof RemoteError)) throw e;
        return {
          status: 'error',
          error: {
            code: e.code as ErrorCode,
            message: e.message,
            ...(e.details ? { details: e.details } : {}),
          },
        };
      }
    });
  }

  async uploadBundle(bundle: Uint8Array, timing?: RequestTiming): Promise<BundleUploadResponse['results']> {
    const started = performance.now();
    try {
      return await this.ingestBundle(bundle);
    } finally {
      if (timing && this.reportsServerTime) timing.serverMs = performance.now() - started;
    }
  }

  private async ingestBundle(bundle: Uint8Array): Promise<BundleUploadResponse['results']> {
    const n = await this.enter('uploadBundle', bundle.byteLength);
    let decoded: DecodedBundle;
    try {
      // A copy: the entries keep views of it, and the caller's buffer is used again (the
      // agent encodes its bundles into reused buffers; RemoteStore.uploadBundle).
      decoded = decodeBundle(bundle.slice());
    } catch (e) {
      if (isWireFormatError(e)) fail('INVALID_FORMAT', (e as Error).message);
      throw e;
    }
    for (const e of decoded.entries) checkNewPath(e.path);
    const results = this.server.writeFiles(n, this.writer, decoded.entries);
    return decoded.entries.map((e, i) => ({ path: e.path, result: results[i] as OpResult }));
  }

  async downloadBundle(
    paths: readonly string[],
    compress = true,
  ): Promise<{ bundle: DecodedBundle; deferred: { path: string; reason: BundleDeferredReason }[] }> {
    return bundleOf(await this.enter('downloadBundle'), paths, compress);
  }

  async createTransfer(req: {
    path: string;
    size: number;
    sha256: string;
    mtimeMs: number;
    baseRevision?: string | null;
  }): Promise<TransferState> {
    return openTransfer(await this.enter('createTransfer'), req);
  }

  async getTransfer(id: string): Promise<TransferState | undefined> {
    const n = await this.enter('getTransfer');
    const t = n.transfers.get(id);
    return t ? transferStateOf(n, t) : undefined;
  }

  async putBlock(id: string, frame: Uint8Array): Promise<BlockAck> {
    return receiveBlock(await this.enter('putBlock', frame.byteLength), id, frame);
  }

  async uploadDelta(
    path: string,
    baseRevision: string,
    mtimeMs: number,
    container: Uint8Array,
    own?: readonly string[],
  ): Promise<OpResult> {
    const n = await this.enter('uploadDelta', container.byteLength);
    return applyDelta(this.server, n, this.writer, path, baseRevision, mtimeMs, container, own);
  }

  async downloadDelta(
    path: string,
    baseSha256: string,
    signatureBytes: Uint8Array,
  ): Promise<DecodedDeltaContainer> {
    return deltaFor(await this.enter('downloadDelta'), path, baseSha256, signatureBytes);
  }

  async signature(path: string): Promise<{ bytes: Uint8Array; sha256: string; revision: string }> {
    return signatureOf(await this.enter('signature'), path);
  }

  async changes(cursor: number, limit = 1000): Promise<ChangesResponse> {
    const n = await this.enter('changes');
    if (!Number.isInteger(cursor) || cursor < 0) fail('BAD_REQUEST', 'cursor must be a non-negative integer');
    if (!Number.isInteger(limit) || limit < 1 || limit > 5000) fail('BAD_REQUEST', 'limit in 1..5000');
    if (cursor > n.seq) return { changes: [], cursor: n.seq, hasMore: false, reset: true };
    const changes = since(n, cursor, limit);
    const next = changes.at(-1)?.seq ?? cursor;
    return { changes, cursor: next, hasMore: next < n.seq, reset: false };
  }

  async merkle(paths: readonly string[]): Promise<MerkleNode[]> {
    const n = await this.enter('merkle');
    if (paths.length < 1 || paths.length > 1000) fail('BAD_REQUEST', 'between 1 and 1000 paths');
    for (const p of paths) checkPath(p, true);
    return paths.map((p) => merkleNode(n, p));
  }

  openFeed(
    cursor: number,
    onMessage: (m: FeedServerMessage) => void,
    onClose: (reason: string) => void,
  ): Disposable {
    let open = true;
    const n = this.ns;
    let sent = cursor;
    const close = (reason: string): void => {
      if (!open) return;
      open = false;
      n.listeners.delete(pump);
      this.feeds.delete(down);
      onClose(reason);
    };
    const down = (): void => close('offline');
    const pump = (): void => {
      setImmediate(() => {
        while (open) {
          const page = since(n, sent, FEED_PAGE);
          const last = page.at(-1);
          if (!last) return;
          sent = last.seq;
          onMessage({ type: 'changes', changes: page, cursor: last.seq });
        }
      });
    };
    setImmediate(() => {
      if (!open) return;
      if (this.down) return close('cannot reach the memory server: offline');
      this.feeds.add(down);
      n.listeners.add(pump);
      onMessage({ type: 'hello', user: this.user, seq: n.seq, cursor: Math.min(sent, n.seq) });
      if (sent > n.seq) {
        onMessage({ type: 'reset', cursor: n.seq });
        sent = n.seq;
      }
      pump();
    });
    return toDisposable(() => {
      open = false;
      n.listeners.delete(pump);
      this.feeds.delete(down);
    });
  }
}
