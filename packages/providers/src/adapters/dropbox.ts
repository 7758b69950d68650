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
import { Dropbox } from 'dropbox';
import { z } from 'zod';
import { readRange, throwIfAborted } from '../body.ts';
import {
  AlreadyExistsError,
  InvalidPathError,
  NotFoundError,
  PreconditionFailedError,
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
import { resetPage } from '../provider.ts';
import { type AccessTokenSource, toTokenSource } from '../oauth/token-source.ts';
import {
  API_HOSTS,
  CURSOR_PREFIX,
  DROPBOX_BLOCK,
  type DropboxCalls,
  type DropboxProviderOptions,
  ListResult,
  Metadata,
  MiB,
} from './dropbox/api.ts';
import { classifyDropbox, classifyResponse, toApiError } from './dropbox/errors.ts';
import { contentRequest, type DropboxFetch, longpoll } from './dropbox/http.ts';
import { type BatchItem, CommitBatcher, finishBatch, uploadBody } from './dropbox/upload.ts';

export { classifyDropbox, DropboxApiError } from './dropbox/errors.ts';
export type { DropboxProviderOptions } from './dropbox/api.ts';

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
  /** What the upload functions use of this provider. */
  private readonly calls: DropboxCalls;
  /** Raw requests (outside the SDK) with the base URL and the current token. */
  private readonly fetcher: DropboxFetch = (url, init) => this.http(url, init);

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
    this.calls = {
      name: this.name,
      sdk: this.sdk,
      call: (where, fn, signal) => this.call(where, fn, signal),
    };
    const batchSize = Math.min(1000, options.batchSize ?? 100);
    this.batcher =
      batchSize > 0
        ? new CommitBatcher(
            (entries: BatchItem['entry'][]) => finishBatch(this.calls, entries),
            batchSize,
            options.batchLingerMs ?? 15,
          )
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

  async read(path: string, options: ReadOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    const p = normalizeEntryPath(path);
    const { offset, length } = readRange(options);
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
    const res = await contentRequest(
      this.fetcher,
      this.name,
      'files/download',
      { path: this.dbxPath(p) },
      range,
      options.signal,
    );
    if (res.status === 416) {
      await res.body?.cancel();
      return (async function* () {})();
    }
    if (!res.ok) throw await classifyResponse(res, `${this.name}: read ${p}`);
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

  async write(path: string, body: Body, options: WriteOptions = {}): Promise<Entry> {
    const p = normalizeEntryPath(path);
    await this.ensureRoot();
    const meta = await uploadBody(
      this.calls,
      this.batcher,
      this.chunkSize,
      this.dbxPath(p),
      p,
      body,
      options,
      (e) => this.refineWriteError(e, p, options),
    );
    const entry = this.toEntry(this.parseMeta(meta), p);
    if (!entry) throw new TransientError(`${this.name}: write ${p}: no metadata returned`);
    return entry;
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
    const reset = async (): Promise<ChangePage> => resetPage(await this.latestCursor(options));
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
    return longpoll(this.fetcher, this.name, cursor, timeoutSeconds, signal);
  }

  async close(): Promise<void> {
    this.batcher?.close();
  }
}
