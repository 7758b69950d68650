/**
 * Dropbox through the official `dropbox` SDK (API v2).
 *
 * - Provider path `a/b.txt` is Dropbox path `<root>/a/b.txt`; Dropbox is case-insensitive
 *   and case-preserving. Revisions are Dropbox `rev`s; the hash is Dropbox's content_hash.
 * - The SDK's requests go through our fetch, which points the api/content/notify hosts at
 *   `baseUrl` when one is configured (the emulator) and sets the current bearer token.
 * - Small writes are committed in batches with upload_session/finish_batch_v2, at most one
 *   batch in flight per account (Dropbox serialises writes per namespace; parallel commits
 *   fail with too_many_write_operations — rclone's experience). Large writes are upload
 *   sessions, chunk by chunk, resuming from the server's `correct_offset` after a drop.
 * - Conditional writes use WriteMode `update` with the rev and strict_conflict; conditional
 *   deletes use `parent_rev`. A lost race is PreconditionFailed.
 * - Downloads are plain requests to files/download (the SDK buffers whole files and cannot
 *   send Range), with the same auth and base URL.
 * - Change feed: list_folder/continue (recursive) on a cursor from get_latest_cursor, with
 *   `reset` mapped to the contract's reset; `waitForChanges` is list_folder/longpoll.
 */
import { parseRetryAfter } from '../backoff.ts';
import { createHash } from 'node:crypto';
import { Dropbox, DropboxResponseError } from 'dropbox';
import { z } from 'zod';
import { openBody, rechunk, throwIfAborted } from '../body.ts';
import {
  AlreadyExistsError,
  AuthError,
  InvalidArgumentError,
  InvalidPathError,
  NotFoundError,
  PreconditionFailedError,
  ProviderError,
  QuotaExceededError,
  TransientError,
} from '../errors.ts';
import type { Features } from '../features.ts';
import { caseFoldKey, isWithin, normalizeEntryPath, normalizePath } from '../paths.ts';
import type {
  Body,
  Change,
  ChangePage,
  Entry,
  ListOptions,
  Provider,
  ReadOptions,
  RemoveOptions,
  TransferOptions,
  WriteOptions,
} from '../provider.ts';
import { type AccessTokenSource, toTokenSource } from '../oauth/token-source.ts';

export interface DropboxProviderOptions {
  /** An access token, or a source that refreshes (see oauth/). */
  readonly token: string | AccessTokenSource;
  /** Folder in the account that is this provider's root, e.g. '/Apps/Weft' ('' = whole account). */
  readonly root?: string;
  /** Send every request here instead of https://{api,content,notify}.dropboxapi.com (the emulator). */
  readonly baseUrl?: string;
  /** fetch to use (default: the global one). */
  readonly fetch?: typeof fetch;
  /** Upload session chunk size; a multiple of 4 MiB. Default 8 MiB. */
  readonly chunkSize?: number;
  /** Batch commits of small files: entries per finish_batch_v2 (≤ 1000; 0 disables). Default 100. */
  readonly batchSize?: number;
  /** How long a batch waits for more files before it is sent. Default 15 ms. */
  readonly batchLingerMs?: number;
}

const MiB = 1024 * 1024;
const DROPBOX_BLOCK = 4 * MiB;
const CURSOR_PREFIX = 'dbx1:';
const API_HOSTS = /^https:\/\/(api|content|notify)\.dropboxapi\.com/;

const FileMeta = z.object({
  '.tag': z.literal('file'),
  name: z.string(),
  path_lower: z.string().optional(),
  path_display: z.string().optional(),
  id: z.string(),
  client_modified: z.string(),
  server_modified: z.string(),
  rev: z.string(),
  size: z.number(),
  content_hash: z.string().optional(),
});
const FolderMeta = z.object({
  '.tag': z.literal('folder'),
  name: z.string(),
  path_lower: z.string().optional(),
  path_display: z.string().optional(),
  id: z.string(),
});
const DeletedMeta = z.object({
  '.tag': z.literal('deleted'),
  name: z.string(),
  path_lower: z.string().optional(),
  path_display: z.string().optional(),
});
const Metadata = z.discriminatedUnion('.tag', [FileMeta, FolderMeta, DeletedMeta]);
type Metadata = z.infer<typeof Metadata>;
const ListResult = z.object({ entries: z.array(z.unknown()), cursor: z.string(), has_more: z.boolean() });
const ErrorBody = z
  .object({ error_summary: z.string().optional(), error: z.unknown().optional() })
  .passthrough();

/** Dropbox content_hash of a buffer (4 MiB blocks, SHA-256 of the block SHA-256s). */
class ContentHasher {
  private readonly overall = createHash('sha256');
  private block = createHash('sha256');
  private inBlock = 0;
  update(data: Uint8Array): void {
    for (let off = 0; off < data.byteLength;) {
      const take = Math.min(DROPBOX_BLOCK - this.inBlock, data.byteLength - off);
      this.block.update(data.subarray(off, off + take));
      this.inBlock += take;
      off += take;
      if (this.inBlock === DROPBOX_BLOCK) this.flushBlock();
    }
  }
  private flushBlock(): void {
    this.overall.update(this.block.digest());
    this.block = createHash('sha256');
    this.inBlock = 0;
  }
  hex(): string {
    if (this.inBlock > 0) this.flushBlock();
    return this.overall.digest('hex');
  }
}

/** The chain of tags in an error_summary, e.g. 'path/conflict/file/..' → ['path','conflict','file']. */
function summaryTags(summary: string | undefined): string[] {
  if (!summary) return [];
  return summary.split('/').filter((t) => t !== '' && !t.startsWith('.'));
}

export class DropboxApiError extends Error {
  constructor(
    readonly status: number,
    readonly tags: string[],
    readonly body: unknown,
    readonly retryAfterMs: number | undefined,
  ) {
    super(`Dropbox ${status} ${tags.join('/')}`);
  }
  has(...tags: string[]): boolean {
    return tags.every((t) => this.tags.includes(t));
  }
}

function retryAfterMs(header: string | null | undefined, body?: unknown): number | undefined {
  const fromHeader = parseRetryAfter(header);
  if (fromHeader !== undefined) return fromHeader;
  const ra = (body as { error?: { retry_after?: unknown } } | undefined)?.error?.retry_after;
  return typeof ra === 'number' ? ra * 1000 : undefined;
}

function toApiError(e: unknown): DropboxApiError | undefined {
  if (e instanceof DropboxApiError) return e;
  if (e instanceof ProviderError && e.cause !== undefined) return toApiError(e.cause);
  if (e instanceof DropboxResponseError) {
    const err = e as DropboxResponseError<unknown> & { status: number; headers: Headers; error: unknown };
    const body = ErrorBody.safeParse(err.error);
    const tags = body.success ? summaryTags(body.data.error_summary) : [];
    const headers = err.headers as { get?: (n: string) => string | null } | undefined;
    return new DropboxApiError(
      err.status,
      tags,
      err.error,
      retryAfterMs(headers?.get?.('retry-after'), err.error),
    );
  }
  return undefined;
}

/** Map a Dropbox failure to the contract's errors (conflicts → AlreadyExists; callers refine). */
export function classifyDropbox(e: unknown, where: string): Error {
  if (e instanceof ProviderError) return e;
  if (e instanceof Error && e.name === 'AbortError') return e;
  const api = toApiError(e);
  if (!api) return new TransientError(`${where}: ${String(e)}`, undefined, { cause: e });
  const msg = `${where}: Dropbox ${api.status} ${api.tags.join('/') || String(JSON.stringify(api.body) ?? '').slice(0, 200)}`;
  const t = api.tags;
  if (api.status === 401 || api.status === 403) return new AuthError(msg, { cause: e });
  if (
    api.status === 429 ||
    api.status >= 500 ||
    t.includes('too_many_write_operations') ||
    t.includes('too_many_requests')
  ) {
    return new TransientError(msg, api.retryAfterMs, { cause: e });
  }
  if (api.status === 409) {
    if (t.includes('not_found') || t.includes('not_file') || t.includes('not_folder'))
      return new NotFoundError(msg, { cause: e });
    if (t.includes('conflict')) return new AlreadyExistsError(msg, { cause: e });
    if (t.includes('insufficient_space') || t.includes('insufficient_quota'))
      return new QuotaExceededError(msg, { cause: e });
    if (t.includes('content_hash_mismatch')) return new TransientError(msg, undefined, { cause: e });
    if (
      t.includes('disallowed_name') ||
      t.includes('malformed_path') ||
      t.includes('cant_move_folder_into_itself')
    ) {
      return new InvalidPathError(msg, where, { cause: e });
    }
  }
  return new InvalidArgumentError(msg, { cause: e });
}

interface BatchItem {
  readonly entry: { cursor: { session_id: string; offset: number }; commit: Record<string, unknown> };
  readonly resolve: (meta: unknown) => void;
  readonly reject: (e: unknown) => void;
}

/** Queues finish entries and sends them with finish_batch_v2, one batch at a time. */
class CommitBatcher {
  private queue: BatchItem[] = [];
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  constructor(
    private readonly send: (entries: BatchItem['entry'][]) => Promise<unknown[]>,
    private readonly size: number,
    private readonly lingerMs: number,
  ) {}

  commit(entry: BatchItem['entry']): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.queue.push({ entry, resolve, reject });
      if (this.queue.length >= this.size) this.kick();
      else this.timer ??= setTimeout(() => this.kick(), this.lingerMs);
    });
  }

  private kick(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.running) return; // the running batch picks the queue up when it ends
    this.running = this.drain().finally(() => {
      this.running = undefined;
      if (this.queue.length > 0) this.kick();
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const items = this.queue.splice(0, this.size);
      try {
        const results = await this.send(items.map((i) => i.entry));
        items.forEach((item, i) => item.resolve(results[i]));
      } catch (e) {
        for (const item of items) item.reject(e);
      }
    }
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
  }
}

export class DropboxProvider implements Provider {
  readonly name: string;
  readonly features: Features;
  readonly sdk: Dropbox;
  private readonly tokens: AccessTokenSource;
  private readonly root: string;
  private readonly rootLower: string;
  private readonly chunkSize: number;
  private readonly fetchImpl: typeof fetch;
  private readonly batcher: CommitBatcher | undefined;
  private rootReady: Promise<void> | undefined;

  constructor(private readonly options: DropboxProviderOptions) {
    this.tokens = toTokenSource(options.token);
    const root = options.root ?? '';
    this.root = root === '' || root === '/' ? '' : '/' + normalizeEntryPath(root.replace(/^\/+|\/+$/g, ''));
    this.rootLower = caseFoldKey(this.root);
    this.chunkSize = options.chunkSize ?? 8 * MiB;
    if (this.chunkSize % DROPBOX_BLOCK !== 0) throw new RangeError('chunkSize must be a multiple of 4 MiB');
    this.fetchImpl = options.fetch ?? fetch;
    this.name = `dropbox:${this.root || '/'}`;
    // The SDK only adds a bearer header when it has a token; ours replaces it per request.
    this.sdk = new Dropbox({
      accessToken: 'set-per-request',
      fetch: (url: string, init: RequestInit) => this.http(url, init),
    });
    const batchSize = Math.min(1000, options.batchSize ?? 100);
    this.batcher =
      batchSize > 0
        ? new CommitBatcher((entries) => this.finishBatch(entries), batchSize, options.batchLingerMs ?? 15)
        : undefined;
    this.features = {
      move: 'files-and-folders',
      copy: 'files-and-folders',
      changeFeed: true,
      conditionalWrite: true,
      rangeRead: true,
      caseSensitive: false,
      setModTime: true,
      maxSingleUploadBytes: this.chunkSize,
      hashAlgorithm: 'dropbox-content-hash',
      hashInListing: true,
      folders: 'real',
      notes: {
        caseSensitive: 'Dropbox paths are case-insensitive and case-preserving',
        setModTime: 'client_modified, whole seconds',
        hashAlgorithm: 'content_hash: SHA-256 of the SHA-256s of 4 MiB blocks',
        changeFeed: 'list_folder/continue returns the latest state of each changed path, not every version',
      },
    };
  }

  /** The fetch the SDK and our raw requests use: base URL rewrite, current token, one refresh on 401. */
  private async http(url: string, init: RequestInit = {}, retried = false): Promise<Response> {
    const target = this.options.baseUrl
      ? url.replace(API_HOSTS, this.options.baseUrl.replace(/\/$/, ''))
      : url;
    const headers = new Headers(init.headers);
    if (headers.has('authorization') && /^Bearer /i.test(headers.get('authorization') ?? '')) {
      headers.set('authorization', `Bearer ${await this.tokens.getAccessToken(init.signal ?? undefined)}`);
    }
    const res = await this.fetchImpl(target, { ...init, headers });
    if (res.status === 401 && !retried && this.tokens.invalidate && headers.has('authorization')) {
      await res.body?.cancel();
      this.tokens.invalidate();
      return this.http(url, init, true);
    }
    return res;
  }

  private dbxPath(p: string): string {
    return p === '' ? this.root : `${this.root}/${p}`;
  }

  /** Provider path of a Dropbox path, or undefined when outside the root or not a valid name. */
  private relPath(display: string | undefined, lower: string | undefined): string | undefined {
    if (display === undefined) return undefined;
    const l = lower ?? caseFoldKey(display);
    if (this.root !== '' && !(l === this.rootLower || l.startsWith(this.rootLower + '/'))) return undefined;
    const rel = display.slice(this.root.length).replace(/^\/+/, '');
    if (rel === '') return undefined;
    try {
      return normalizePath(rel);
    } catch {
      return undefined;
    }
  }

  private toEntry(meta: Metadata, path?: string): Entry | undefined {
    const p = path ?? this.relPath(meta.path_display, meta.path_lower);
    if (p === undefined) return undefined;
    if (meta['.tag'] === 'folder') return { path: p, kind: 'dir', size: 0, modifiedMs: 0, revision: '' };
    if (meta['.tag'] !== 'file') return undefined;
    return {
      path: p,
      kind: 'file',
      size: meta.size,
      modifiedMs: Date.parse(meta.client_modified),
      revision: meta.rev,
      ...(meta.content_hash ? { hash: { algorithm: 'dropbox-content-hash', value: meta.content_hash } } : {}),
    };
  }

  private parseMeta(value: unknown): Metadata {
    const r = Metadata.safeParse(value);
    if (!r.success)
      throw new TransientError(`${this.name}: unexpected metadata from Dropbox: ${r.error.message}`);
    return r.data;
  }

  /** Run an SDK call, classifying failures. */
  private async call<T>(where: string, fn: () => Promise<{ result: T }>, signal?: AbortSignal): Promise<T> {
    throwIfAborted(signal);
    try {
      return (await fn()).result;
    } catch (e) {
      throw classifyDropbox(e, `${this.name}: ${where}`);
    }
  }

  /** The root folder exists before anything else happens. */
  private ensureRoot(): Promise<void> {
    if (this.root === '') return Promise.resolve();
    this.rootReady ??= this.sdk.filesCreateFolderV2({ path: this.root, autorename: false }).then(
      () => undefined,
      (e: unknown) => {
        const api = toApiError(e);
        if (api?.has('conflict', 'folder')) return;
        this.rootReady = undefined;
        throw classifyDropbox(e, `${this.name}: create root`);
      },
    );
    return this.rootReady;
  }

  async *list(dir: string, options: ListOptions = {}): AsyncIterable<Entry> {
    const d = normalizePath(dir);
    await this.ensureRoot();
    const limit = Math.max(1, Math.min(2000, options.pageSize ?? 2000));
    let page = ListResult.parse(
      await this.call(
        `list ${d}`,
        () =>
          this.sdk.filesListFolder({ path: this.dbxPath(d), recursive: options.recursive ?? false, limit }),
        options.signal,
      ),
    );
    for (;;) {
      for (const raw of page.entries) {
        const entry = this.toEntry(this.parseMeta(raw));
        if (entry && entry.path !== d && isWithin(entry.path, d)) yield entry;
      }
      if (!page.has_more) return;
      const cursor = page.cursor;
      page = ListResult.parse(
        await this.call(`list ${d}`, () => this.sdk.filesListFolderContinue({ cursor }), options.signal),
      );
    }
  }

  async stat(path: string, options: { signal?: AbortSignal } = {}): Promise<Entry> {
    const p = normalizeEntryPath(path);
    await this.ensureRoot();
    const meta = this.parseMeta(
      await this.call(
        `stat ${p}`,
        () => this.sdk.filesGetMetadata({ path: this.dbxPath(p) }),
        options.signal,
      ),
    );
    const entry = this.toEntry(meta, p);
    if (!entry) throw new NotFoundError(`${this.name}: not found: ${p}`);
    return entry;
  }

  private contentUrl(endpoint: string): string {
    return `https://content.dropboxapi.com/2/${endpoint}`;
  }

  /** A raw request to a content endpoint (downloads with Range). */
  private async rawContent(
    endpoint: string,
    arg: unknown,
    headers: Record<string, string>,
    signal?: AbortSignal,
  ): Promise<Response> {
    const argHeader = JSON.stringify(arg).replace(
      /[\u007f-\uffff]/g,
      (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'),
    );
    let res: Response;
    try {
      res = await this.http(this.contentUrl(endpoint), {
        method: 'POST',
        headers: { authorization: 'Bearer -', 'dropbox-api-arg': argHeader, ...headers },
        signal,
      });
    } catch (e) {
      if (signal?.aborted) throw e;
      throw new TransientError(`${this.name}: ${endpoint}: ${String(e)}`, undefined, { cause: e });
    }
    return res;
  }

  private async responseError(res: Response, where: string): Promise<Error> {
    const text = await res.text().catch(() => '');
    let body: unknown = text;
    try {
      body = JSON.parse(text) as unknown;
    } catch {
      /* plain text body */
    }
    const parsed = ErrorBody.safeParse(body);
    const tags = parsed.success ? summaryTags(parsed.data.error_summary) : [];
    return classifyDropbox(
      new DropboxApiError(res.status, tags, body, retryAfterMs(res.headers.get('retry-after'), body)),
      where,
    );
  }

  async read(path: string, options: ReadOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    const p = normalizeEntryPath(path);
    const offset = options.offset ?? 0;
    const length = options.length;
    if (!Number.isSafeInteger(offset) || offset < 0)
      throw new InvalidArgumentError(`bad read offset ${offset}`);
    if (length !== undefined && (!Number.isSafeInteger(length) || length < 0)) {
      throw new InvalidArgumentError(`bad read length ${length}`);
    }
    await this.ensureRoot();
    if (length === 0) {
      const e = await this.stat(p, options);
      if (e.kind !== 'file') throw new NotFoundError(`${this.name}: not a file: ${p}`);
      return (async function* () {})();
    }
    const range: Record<string, string> =
      offset === 0 && length === undefined
        ? {}
        : { range: `bytes=${offset}-${length === undefined ? '' : offset + length - 1}` };
    const res = await this.rawContent('files/download', { path: this.dbxPath(p) }, range, options.signal);
    if (res.status === 416) {
      await res.body?.cancel();
      return (async function* () {})();
    }
    if (!res.ok) throw await this.responseError(res, `${this.name}: read ${p}`);
    const body = res.body;
    const name = this.name;
    if (!body) return (async function* () {})();
    return (async function* () {
      try {
        for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) yield chunk;
      } catch (e) {
        if (options.signal?.aborted) throw e;
        throw new TransientError(`${name}: read ${p} broke: ${String(e)}`, undefined, { cause: e });
      }
    })();
  }

  private commitInfo(p: string, options: WriteOptions): Record<string, unknown> {
    const mode =
      options.ifRevision !== undefined
        ? { '.tag': 'update', update: options.ifRevision }
        : options.ifNotExists
          ? { '.tag': 'add' }
          : { '.tag': 'overwrite' };
    return {
      path: this.dbxPath(p),
      mode,
      autorename: false,
      strict_conflict: true,
      mute: true,
      ...(options.modifiedMs !== undefined
        ? {
            client_modified: new Date(Math.floor(options.modifiedMs / 1000) * 1000)
              .toISOString()
              .replace('.000Z', 'Z'),
          }
        : {}),
    };
  }

  async write(path: string, body: Body, options: WriteOptions = {}): Promise<Entry> {
    const p = normalizeEntryPath(path);
    await this.ensureRoot();
    const parts = rechunk(openBody(body), this.chunkSize)[Symbol.asyncIterator]();
    const sha = createHash('sha256');
    const hasher = new ContentHasher();
    const first = await parts.next();
    const firstChunk = first.done ? Buffer.alloc(0) : first.value;
    sha.update(firstChunk);
    hasher.update(firstChunk);
    const second = first.done ? { done: true as const, value: undefined } : await parts.next();
    throwIfAborted(options.signal);
    let meta: unknown;
    try {
      if (second.done) {
        this.checkBody(p, options, firstChunk.byteLength, sha.digest('hex'));
        const hash = hasher.hex();
        meta = await this.writeSmall(p, firstChunk, hash, options);
      } else {
        meta = await this.writeChunked(p, firstChunk, second.value, parts, sha, hasher, options);
      }
    } catch (e) {
      throw await this.refineWriteError(e, p, options);
    }
    const entry = this.toEntry(this.parseMeta(meta), p);
    if (!entry) throw new TransientError(`${this.name}: write ${p}: no metadata returned`);
    return entry;
  }

  private checkBody(p: string, options: WriteOptions, size: number, shaHex: string): void {
    if (options.size !== undefined && options.size !== size) {
      throw new InvalidArgumentError(
        `${this.name}: expected ${options.size} bytes for ${p}, received ${size}`,
      );
    }
    if (options.sha256 !== undefined && options.sha256.toLowerCase() !== shaHex) {
      throw new InvalidArgumentError(`${this.name}: SHA-256 of the bytes received for ${p} does not match`);
    }
  }

  /** Turn a write conflict into what the contract asks for. */
  private async refineWriteError(e: unknown, p: string, options: WriteOptions): Promise<Error> {
    const api = toApiError(e);
    const classified = classifyDropbox(e, `${this.name}: write ${p}`);
    if (!api?.has('conflict')) return classified;
    if (api.has('conflict', 'folder') || api.has('conflict', 'file_ancestor')) return classified;
    if (options.ifRevision !== undefined) {
      // update mode lost: either the rev moved on (PreconditionFailed) or the file is gone (NotFound).
      try {
        const now = await this.stat(p);
        return new PreconditionFailedError(
          `${this.name}: ${p} is at revision ${now.revision}, not ${options.ifRevision}`,
          now.revision,
          { cause: e },
        );
      } catch (statError) {
        if (statError instanceof NotFoundError) {
          return new NotFoundError(`${this.name}: conditional write on missing ${p}`, { cause: e });
        }
        return classified;
      }
    }
    return classified;
  }

  private async writeSmall(p: string, data: Buffer, hash: string, options: WriteOptions): Promise<unknown> {
    const commit = this.commitInfo(p, options);
    if (!this.batcher) {
      return this.call(`upload ${p}`, () =>
        this.sdk.filesUpload({
          ...(commit as { path: string }),
          contents: data,
          content_hash: hash,
        } as Parameters<Dropbox['filesUpload']>[0]),
      );
    }
    const started = await this.call(`upload_session/start ${p}`, () =>
      this.sdk.filesUploadSessionStart({ close: true, contents: data, content_hash: hash } as Parameters<
        Dropbox['filesUploadSessionStart']
      >[0]),
    );
    throwIfAborted(options.signal);
    const result = await this.batcher.commit({
      cursor: { session_id: started.session_id, offset: data.byteLength },
      commit,
    });
    const r = z.object({ '.tag': z.string() }).passthrough().safeParse(result);
    if (!r.success) throw new TransientError(`${this.name}: finish_batch_v2 gave no result for ${p}`);
    if (r.data['.tag'] === 'success') return { ...r.data, '.tag': 'file' };
    const failure = (result as { failure?: unknown }).failure;
    const tags = flattenTags(failure);
    throw new DropboxApiError(409, tags, failure, undefined);
  }

  private async finishBatch(entries: BatchItem['entry'][]): Promise<unknown[]> {
    const out = await this.call('upload_session/finish_batch_v2', () =>
      this.sdk.filesUploadSessionFinishBatchV2({ entries } as unknown as Parameters<
        Dropbox['filesUploadSessionFinishBatchV2']
      >[0]),
    );
    const parsed = z.object({ entries: z.array(z.unknown()) }).safeParse(out);
    if (!parsed.success || parsed.data.entries.length !== entries.length) {
      throw new TransientError(`${this.name}: finish_batch_v2 returned a malformed result`);
    }
    return parsed.data.entries;
  }

  /** Append one chunk at `offset`, resuming from the server's correct_offset after a drop. */
  private async appendChunk(
    sessionId: string,
    offset: number,
    chunk: Buffer,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    let sent = 0; // bytes of this chunk the server already has
    for (let attempt = 1; ; attempt++) {
      throwIfAborted(signal);
      try {
        await this.sdk.filesUploadSessionAppendV2({
          cursor: { session_id: sessionId, offset: offset + sent },
          close: false,
          contents: chunk.subarray(sent),
        } as Parameters<Dropbox['filesUploadSessionAppendV2']>[0]);
        return;
      } catch (e) {
        const api = toApiError(e);
        const correct = (api?.body as { error?: { correct_offset?: unknown } } | undefined)?.error
          ?.correct_offset;
        if (api?.has('incorrect_offset') && typeof correct === 'number') {
          if (correct === offset + chunk.byteLength) return; // the dropped request had arrived
          if (correct >= offset && correct < offset + chunk.byteLength) {
            sent = correct - offset;
            continue;
          }
        }
        const classified = classifyDropbox(e, `${this.name}: upload_session/append_v2`);
        if (!(classified instanceof TransientError) || attempt >= 5) throw classified;
        if (classified.retryAfterMs)
          await new Promise((r) => setTimeout(r, Math.min(classified.retryAfterMs ?? 0, 30_000)));
      }
    }
  }

  private async writeChunked(
    p: string,
    first: Buffer,
    second: Buffer,
    rest: AsyncIterator<Buffer>,
    sha: ReturnType<typeof createHash>,
    hasher: ContentHasher,
    options: WriteOptions,
  ): Promise<unknown> {
    const started = await this.call(`upload_session/start ${p}`, () =>
      this.sdk.filesUploadSessionStart({ close: false, contents: first } as Parameters<
        Dropbox['filesUploadSessionStart']
      >[0]),
    );
    const sessionId = started.session_id;
    let offset = first.byteLength;
    for (let chunk: Buffer | undefined = second; chunk !== undefined;) {
      throwIfAborted(options.signal);
      sha.update(chunk);
      hasher.update(chunk);
      await this.appendChunk(sessionId, offset, chunk, options.signal);
      offset += chunk.byteLength;
      const next = await rest.next();
      chunk = next.done ? undefined : next.value;
    }
    throwIfAborted(options.signal);
    this.checkBody(p, options, offset, sha.digest('hex'));
    const commit = this.commitInfo(p, options);
    return this.call(`upload_session/finish ${p}`, () =>
      this.sdk.filesUploadSessionFinish({
        cursor: { session_id: sessionId, offset },
        commit,
        content_hash: hasher.hex(),
        contents: Buffer.alloc(0),
      } as unknown as Parameters<Dropbox['filesUploadSessionFinish']>[0]),
    );
  }

  async remove(path: string, options: RemoveOptions = {}): Promise<void> {
    const p = normalizeEntryPath(path);
    await this.ensureRoot();
    try {
      await this.call(
        `delete ${p}`,
        () =>
          this.sdk.filesDeleteV2({
            path: this.dbxPath(p),
            ...(options.ifRevision !== undefined ? { parent_rev: options.ifRevision } : {}),
          }),
        options.signal,
      );
    } catch (e) {
      if (e instanceof NotFoundError && options.ifRevision !== undefined) {
        // A stale parent_rev is reported as a failed lookup: tell the two apart.
        const now = await this.stat(p).catch((s: unknown) => {
          if (s instanceof NotFoundError) return undefined;
          throw s;
        });
        if (now) {
          throw new PreconditionFailedError(
            `${this.name}: ${p} is at revision ${now.revision}, not ${options.ifRevision}`,
            now.revision,
            { cause: e },
          );
        }
      }
      throw e;
    }
  }

  async mkdir(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const p = normalizeEntryPath(path);
    await this.ensureRoot();
    try {
      await this.call(
        `mkdir ${p}`,
        () => this.sdk.filesCreateFolderV2({ path: this.dbxPath(p), autorename: false }),
        options.signal,
      );
    } catch (e) {
      const api = toApiError(e);
      if (api?.has('conflict', 'folder')) return;
      throw e;
    }
  }

  private async transfer(
    op: 'move' | 'copy',
    from: string,
    to: string,
    options: TransferOptions,
  ): Promise<Entry> {
    const f = normalizeEntryPath(from);
    const t = normalizeEntryPath(to);
    await this.ensureRoot();
    if (caseFoldKey(t) !== caseFoldKey(f) && isWithin(caseFoldKey(t), caseFoldKey(f))) {
      throw new InvalidPathError(`${this.name}: cannot put ${f} inside itself`, t);
    }
    if (op === 'copy' && caseFoldKey(t) === caseFoldKey(f))
      throw new AlreadyExistsError(`${this.name}: ${t} exists`);
    const arg = { from_path: this.dbxPath(f), to_path: this.dbxPath(t), autorename: false };
    const run = (): Promise<unknown> =>
      op === 'move'
        ? this.call(`move ${f} -> ${t}`, () => this.sdk.filesMoveV2(arg), options.signal)
        : this.call(`copy ${f} -> ${t}`, () => this.sdk.filesCopyV2(arg), options.signal);
    let out: unknown;
    try {
      out = await run();
    } catch (e) {
      const api = toApiError(e);
      if (!(e instanceof AlreadyExistsError) || !options.overwrite || !api?.has('to', 'conflict', 'file'))
        throw e;
      // Dropbox cannot replace on move/copy: remove the destination file, then retry once.
      const src = await this.stat(f, options);
      if (src.kind !== 'file') throw e;
      await this.remove(t, options);
      out = await run();
    }
    const meta = z.object({ metadata: z.unknown() }).parse(out).metadata;
    const entry = this.toEntry(this.parseMeta(meta), t);
    if (!entry) throw new TransientError(`${this.name}: ${op} ${f}: no metadata returned`);
    return entry;
  }

  move(from: string, to: string, options: TransferOptions = {}): Promise<Entry> {
    return this.transfer('move', from, to, options);
  }

  copy(from: string, to: string, options: TransferOptions = {}): Promise<Entry> {
    return this.transfer('copy', from, to, options);
  }

  async latestCursor(options: { signal?: AbortSignal } = {}): Promise<string> {
    await this.ensureRoot();
    const out = await this.call(
      'get_latest_cursor',
      () => this.sdk.filesListFolderGetLatestCursor({ path: this.root, recursive: true }),
      options.signal,
    );
    return CURSOR_PREFIX + out.cursor;
  }

  async changes(cursor: string, options: { signal?: AbortSignal; limit?: number } = {}): Promise<ChangePage> {
    const reset = async (): Promise<ChangePage> => ({
      changes: [],
      cursor: await this.latestCursor(options),
      hasMore: false,
      reset: true,
    });
    if (!cursor.startsWith(CURSOR_PREFIX)) return reset();
    let page: z.infer<typeof ListResult>;
    try {
      page = ListResult.parse(
        await this.call(
          'list_folder/continue',
          () => this.sdk.filesListFolderContinue({ cursor: cursor.slice(CURSOR_PREFIX.length) }),
          options.signal,
        ),
      );
    } catch (e) {
      const api = toApiError(e);
      if (api?.has('reset') || (api?.status === 400 && /cursor/i.test(JSON.stringify(api.body))))
        return reset();
      throw e;
    }
    const changes: Change[] = [];
    for (const raw of page.entries) {
      const meta = this.parseMeta(raw);
      const p = this.relPath(meta.path_display, meta.path_lower);
      if (p === undefined) continue;
      if (meta['.tag'] === 'deleted') changes.push({ type: 'delete', path: p });
      else {
        const entry = this.toEntry(meta, p);
        if (entry) changes.push({ type: 'upsert', path: p, entry });
      }
    }
    return { changes, cursor: CURSOR_PREFIX + page.cursor, hasMore: page.has_more, reset: false };
  }

  /**
   * Block until something changes after `cursor` or `timeoutSeconds` (30–480) pass
   * (list_folder/longpoll; no auth). Returns whether there are changes and the backoff
   * in ms Dropbox asks for before the next call.
   */
  async waitForChanges(
    cursor: string,
    timeoutSeconds = 30,
    signal?: AbortSignal,
  ): Promise<{ changes: boolean; backoffMs: number }> {
    if (!cursor.startsWith(CURSOR_PREFIX)) return { changes: true, backoffMs: 0 };
    let res: Response;
    try {
      res = await this.http('https://notify.dropboxapi.com/2/files/list_folder/longpoll', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          cursor: cursor.slice(CURSOR_PREFIX.length),
          timeout: Math.max(30, Math.min(480, timeoutSeconds)),
        }),
        signal,
      });
    } catch (e) {
      if (signal?.aborted) throw e;
      throw new TransientError(`${this.name}: longpoll: ${String(e)}`, undefined, { cause: e });
    }
    if (res.status === 409) {
      await res.body?.cancel();
      return { changes: true, backoffMs: 0 }; // reset: the caller's changes() reports it
    }
    if (!res.ok) throw await this.responseError(res, `${this.name}: longpoll`);
    const body = z.object({ changes: z.boolean(), backoff: z.number().optional() }).parse(await res.json());
    return { changes: body.changes, backoffMs: (body.backoff ?? 0) * 1000 };
  }

  async close(): Promise<void> {
    this.batcher?.close();
  }
}

/** Tags of a Stone-encoded union value, outermost first: {".tag":"path","path":{".tag":"conflict",…}}. */
function flattenTags(value: unknown): string[] {
  const tags: string[] = [];
  let cur: unknown = value;
  for (let depth = 0; depth < 6 && cur && typeof cur === 'object'; depth++) {
    const tag = (cur as Record<string, unknown>)['.tag'];
    if (typeof tag !== 'string') break;
    tags.push(tag);
    const o = cur as Record<string, unknown>;
    cur = o[tag] ?? o.reason ?? undefined;
  }
  return tags;
}
