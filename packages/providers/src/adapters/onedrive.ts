/**
 * OneDrive through the official `@microsoft/microsoft-graph-client` (Microsoft Graph v1.0).
 *
 * - Items are addressed by path (`/me/drive/root:/<root>/<path>:`); OneDrive is
 *   case-insensitive and case-preserving, with unique names per folder. Ids are used by
 *   the delta feed, with a path ↔ id index (shared with the Drive adapter).
 * - The client gets `baseUrl` and `customHosts` (so it sends the token to a non-Graph
 *   host such as the emulator) and a middleware chain without its own RetryHandler: the
 *   retry wrapper is the one place that retries.
 * - Writes up to 4 MiB are simple uploads (`PUT …:/content`); larger ones use an upload
 *   session: fragments of a multiple of 320 KiB, in order, PUT to the pre-authenticated
 *   `uploadUrl` without the Authorization header; after a drop the session's
 *   `nextExpectedRanges` says where to resume. A failed or aborted upload deletes its
 *   session. Graph needs the total size in every fragment, so a stream of unknown length
 *   above 4 MiB is buffered in memory first.
 * - Conditional writes and deletes send `If-Match: <eTag>` (412 → PreconditionFailed);
 *   must-not-exist writes use `@microsoft.graph.conflictBehavior=fail` (409 → AlreadyExists).
 * - Downloads: `GET …/content` (302 to a pre-authenticated URL) with Range.
 * - Change feed: `delta` on the root folder, `@odata.nextLink`/`@odata.deltaLink` as the
 *   cursor, 410 resyncRequired → reset.
 */
import {
  type AuthenticationProvider,
  AuthenticationHandler,
  Client,
  GraphError,
  HTTPMessageHandler,
  RedirectHandler,
  ResponseType,
} from '@microsoft/microsoft-graph-client';
import { readRange, throwIfAborted } from '../body.ts';
import {
  AlreadyExistsError,
  InvalidPathError,
  NotFoundError,
  PreconditionFailedError,
  TransientError,
} from '../errors.ts';
import type { Features } from '../features.ts';
import { KeyedMutex } from '../keyed-mutex.ts';
import { baseName, isWithin, caseFoldKey, normalizeEntryPath, normalizePath, parentPath } from '../paths.ts';
import type {
  Body,
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
import { IdPathIndex } from './id-path-index.ts';
import {
  encodePath,
  type GraphCalls,
  type Item,
  ItemPage,
  KiB,
  type OneDriveProviderOptions,
  parseItem,
  SIMPLE_MAX,
  toEntry,
  validName,
} from './onedrive/api.ts';
import { OneDriveChangeFeed } from './onedrive/changes.ts';
import { classifyGraph } from './onedrive/errors.ts';
import { ChunkRetry } from './chunk-retry.ts';
import { awaitCopy } from './onedrive/copy.ts';
import { uploadBody } from './onedrive/upload.ts';

export { classifyGraph } from './onedrive/errors.ts';
export type { OneDriveProviderOptions } from './onedrive/api.ts';

export class OneDriveProvider implements Provider {
  readonly name: string;
  readonly features: Features;
  readonly client: Client;
  private readonly tokens: AccessTokenSource;
  private readonly root: string;
  private readonly fragment: number;
  private readonly fetchImpl: typeof fetch;
  private readonly chunkRetry: ChunkRetry;
  private readonly locks = new KeyedMutex();
  private readonly index = new IdPathIndex();
  private rootItem: Promise<Item> | undefined;
  private readonly feed: OneDriveChangeFeed;
  /** What the upload and feed code use of this provider. */
  private readonly graph: GraphCalls;

  constructor(private readonly options: OneDriveProviderOptions) {
    this.tokens = toTokenSource(options.token);
    const root = (options.root ?? '').replace(/^\/+|\/+$/g, '');
    this.root = root === '' ? '' : normalizeEntryPath(root);
    this.fragment = options.fragmentSize ?? 32 * 320 * KiB;
    if (this.fragment % (320 * KiB) !== 0) throw new RangeError('fragmentSize must be a multiple of 320 KiB');
    this.fetchImpl = options.fetch ?? fetch;
    this.chunkRetry = new ChunkRetry(options);
    const origin = (options.graphOrigin ?? 'https://graph.microsoft.com').replace(/\/$/, '');
    const tokens = this.tokens;
    const authProvider: AuthenticationProvider = { getAccessToken: () => tokens.getAccessToken() };
    const auth = new AuthenticationHandler(authProvider);
    const redirect = new RedirectHandler();
    auth.setNext(redirect);
    redirect.setNext(new HTTPMessageHandler());
    this.client = Client.initWithMiddleware({
      middleware: auth,
      baseUrl: origin + '/',
      defaultVersion: 'v1.0',
      customHosts: new Set([new URL(origin).hostname]),
    });
    this.name = `onedrive:/${this.root}`;
    this.graph = {
      name: this.name,
      client: this.client,
      call: (where, fn, signal) => this.call(where, fn, signal),
    };
    this.feed = new OneDriveChangeFeed(
      this.graph,
      this.index,
      async (signal) => (await this.ensureRoot(signal)).id,
      this,
    );
    this.features = {
      move: 'files-and-folders',
      copy: 'files-and-folders',
      changeFeed: true,
      conditionalWrite: true,
      rangeRead: true,
      caseSensitive: false,
      setModTime: true,
      maxSingleUploadBytes: SIMPLE_MAX,
      hashAlgorithm: 'quickxor',
      hashInListing: true,
      folders: 'real',
      notes: {
        copy: 'asynchronous in Graph: 202 and a monitor URL, polled until completed',
        caseSensitive: 'OneDrive names are case-insensitive and case-preserving',
        names: 'OneDrive refuses " * : < > ? / \\ | and some reserved names',
        changeFeed: 'delta reports the latest state of each changed item, not every version',
      },
    };
  }

  private itemPath(p: string): string {
    const full = [this.root, p].filter((s) => s !== '').join('/');
    return full === '' ? '/me/drive/root' : `/me/drive/root:/${encodePath(full)}:`;
  }

  private async call<T>(
    where: string,
    fn: () => Promise<T>,
    signal?: AbortSignal,
    retried = false,
  ): Promise<T> {
    throwIfAborted(signal);
    try {
      return await fn();
    } catch (e) {
      if (signal?.aborted) throw e;
      if (e instanceof GraphError && e.statusCode === 401 && !retried && this.tokens.invalidate) {
        // The token was refused (expired early, revoked): refresh once and try again.
        this.tokens.invalidate();
        return this.call(where, fn, signal, true);
      }
      throw classifyGraph(e, `${this.name}: ${where}`);
    }
  }

  private parseItem(v: unknown): Item {
    return parseItem(this.name, v);
  }

  private async getItem(p: string, signal?: AbortSignal): Promise<Item | undefined> {
    try {
      return this.parseItem(
        await this.call(
          `get ${p}`,
          () => this.client.api(this.itemPath(p)).get() as Promise<unknown>,
          signal,
        ),
      );
    } catch (e) {
      if (e instanceof NotFoundError) return undefined;
      throw e;
    }
  }

  /** The root folder exists (created on first use). */
  private ensureRoot(signal?: AbortSignal): Promise<Item> {
    this.rootItem ??= (async () => {
      if (this.root !== '') await this.mkdirs(this.root, signal, true);
      const it = await this.getItem('', signal);
      if (!it) throw new NotFoundError(`${this.name}: root folder missing`);
      return it;
    })().catch((e: unknown) => {
      this.rootItem = undefined;
      throw e;
    });
    return this.rootItem;
  }

  /** Create folders along `p` (relative to the drive root when `absolute`, else to ours). */
  private async mkdirs(p: string, signal: AbortSignal | undefined, absolute = false): Promise<void> {
    const segs = p.split('/');
    for (let i = 0; i < segs.length; i++) {
      const sub = segs.slice(0, i + 1).join('/');
      await this.locks.run([`dir:${absolute ? '/' : ''}${caseFoldKey(sub)}`], async () => {
        const parent = segs.slice(0, i).join('/');
        const at = absolute
          ? sub === ''
            ? '/me/drive/root'
            : `/me/drive/root:/${encodePath(sub)}:`
          : this.itemPath(sub);
        const parentAt = absolute
          ? parent === ''
            ? '/me/drive/root'
            : `/me/drive/root:/${encodePath(parent)}:`
          : this.itemPath(parent);
        const existing = await this.call(
          `get ${sub}`,
          () => this.client.api(at).get() as Promise<unknown>,
          signal,
        ).catch((e: unknown) => {
          if (e instanceof NotFoundError) return undefined;
          throw e;
        });
        if (existing) {
          if (!this.parseItem(existing).folder)
            throw new AlreadyExistsError(`${this.name}: a file is in the way of folder ${sub}`);
          return;
        }
        try {
          await this.call(
            `mkdir ${sub}`,
            () =>
              this.client.api(`${parentAt}/children`).post({
                name: segs[i],
                folder: {},
                '@microsoft.graph.conflictBehavior': 'fail',
              }) as Promise<unknown>,
            signal,
          );
        } catch (e) {
          if (!(e instanceof AlreadyExistsError)) throw e;
          const now = this.parseItem(
            await this.call(`get ${sub}`, () => this.client.api(at).get() as Promise<unknown>, signal),
          );
          if (!now.folder)
            throw new AlreadyExistsError(`${this.name}: a file is in the way of folder ${sub}`);
        }
      });
    }
  }

  async *list(dir: string, options: ListOptions = {}): AsyncIterable<Entry> {
    const d = normalizePath(dir);
    await this.ensureRoot(options.signal);
    const top = Math.max(1, Math.min(1000, options.pageSize ?? 1000));
    const queue = [d];
    while (queue.length > 0) {
      const folder = queue.shift() as string;
      let url: string | undefined = `${this.itemPath(folder)}/children?$top=${top}`;
      while (url) {
        const target: string = url;
        const page = ItemPage.parse(
          await this.call(
            `list ${folder}`,
            () => this.client.api(target).get() as Promise<unknown>,
            options.signal,
          ),
        );
        for (const raw of page.value) {
          const it = this.parseItem(raw);
          const name = validName(it.name);
          if (name === undefined) continue;
          const p = folder === '' ? name : `${folder}/${name}`;
          this.index.set(p, it.id, Boolean(it.folder));
          yield toEntry(p, it);
          if (options.recursive && it.folder) queue.push(p);
        }
        url = page['@odata.nextLink'];
      }
    }
  }

  async stat(path: string, options: { signal?: AbortSignal } = {}): Promise<Entry> {
    const p = normalizeEntryPath(path);
    await this.ensureRoot(options.signal);
    const it = await this.getItem(p, options.signal);
    if (!it) throw new NotFoundError(`${this.name}: not found: ${p}`);
    this.index.set(p, it.id, Boolean(it.folder));
    return toEntry(p, it);
  }

  async read(path: string, options: ReadOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    const p = normalizeEntryPath(path);
    const { offset, length } = readRange(options);
    await this.ensureRoot(options.signal);
    if (length === 0) {
      const e = await this.stat(p, options);
      if (e.kind !== 'file') throw new NotFoundError(`${this.name}: not a file: ${p}`);
      return (async function* () {})();
    }
    const headers: Record<string, string> =
      offset === 0 && length === undefined
        ? {}
        : { Range: `bytes=${offset}-${length === undefined ? '' : offset + length - 1}` };
    const res = await this.call(
      `read ${p}`,
      () =>
        this.client
          .api(`${this.itemPath(p)}/content`)
          .headers(headers)
          .responseType(ResponseType.RAW)
          .get() as Promise<Response>,
      options.signal,
    );
    if (res.status === 416) {
      await res.body?.cancel();
      return (async function* () {})();
    }
    if (!res.ok) {
      const body = await res.text().catch(() => '');
      const err = new GraphError(res.status, body);
      err.code = /"code"\s*:\s*"([^"]+)"/.exec(body)?.[1] ?? null;
      err.headers = res.headers;
      throw classifyGraph(err, `${this.name}: read ${p}`);
    }
    const stream = res.body;
    const name = this.name;
    if (!stream) return (async function* () {})();
    return (async function* () {
      try {
        for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) yield chunk;
      } catch (e) {
        if (options.signal?.aborted) throw e;
        throw new TransientError(`${name}: read ${p} broke: ${String(e)}`, undefined, { cause: e });
      }
    })();
  }

  /** A lost If-Match means the revision moved on — or the file is gone. */
  private async refine(e: unknown, p: string, ifRevision: string | undefined): Promise<unknown> {
    if (!(e instanceof PreconditionFailedError) || ifRevision === undefined) return e;
    const now = await this.getItem(p);
    if (!now) return new NotFoundError(`${this.name}: conditional operation on missing ${p}`, { cause: e });
    return new PreconditionFailedError(
      `${this.name}: ${p} is at revision ${now.eTag ?? ''}, not ${ifRevision}`,
      now.eTag,
      { cause: e },
    );
  }

  async write(path: string, body: Body, options: WriteOptions = {}): Promise<Entry> {
    const p = normalizeEntryPath(path);
    await this.ensureRoot(options.signal);
    let item = await uploadBody(
      this.graph,
      this.fetchImpl,
      this.chunkRetry,
      this.fragment,
      this.itemPath(p),
      p,
      body,
      options,
      (e) => this.refine(e, p, options.ifRevision),
    );
    if (
      options.modifiedMs !== undefined &&
      !item.fileSystemInfo?.lastModifiedDateTime?.startsWith(
        new Date(options.modifiedMs).toISOString().slice(0, 19),
      )
    ) {
      item = this.parseItem(
        await this.call(
          `set modified time ${p}`,
          () =>
            this.client.api(this.itemPath(p)).patch({
              fileSystemInfo: {
                lastModifiedDateTime: new Date(options.modifiedMs as number).toISOString(),
              },
            }) as Promise<unknown>,
          options.signal,
        ),
      );
    }
    // Learn the parent folder's id too: when it is later moved by someone else, the feed
    // names it by id only, and its old path is what the move is reported from.
    const parentId = item.parentReference?.id;
    if (parentId && parentPath(p) !== '') this.index.set(parentPath(p), parentId, true);
    this.index.set(p, item.id, false);
    return toEntry(p, item);
  }

  async remove(path: string, options: RemoveOptions = {}): Promise<void> {
    const p = normalizeEntryPath(path);
    await this.ensureRoot(options.signal);
    let req = this.client.api(this.itemPath(p));
    if (options.ifRevision !== undefined) req = req.header('If-Match', options.ifRevision);
    try {
      await this.call(`delete ${p}`, () => req.delete() as Promise<unknown>, options.signal);
    } catch (e) {
      throw await this.refine(e, p, options.ifRevision);
    }
    this.index.forget(p);
  }

  async mkdir(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const p = normalizeEntryPath(path);
    await this.ensureRoot(options.signal);
    await this.mkdirs(p, options.signal);
  }

  async move(from: string, to: string, options: TransferOptions = {}): Promise<Entry> {
    const f = normalizeEntryPath(from);
    const t = normalizeEntryPath(to);
    await this.ensureRoot(options.signal);
    if (caseFoldKey(t) !== caseFoldKey(f) && isWithin(caseFoldKey(t), caseFoldKey(f))) {
      throw new InvalidPathError(`${this.name}: cannot put ${f} inside itself`, t);
    }
    if (!(await this.getItem(f, options.signal))) throw new NotFoundError(`${this.name}: not found: ${f}`);
    if (parentPath(t) !== '') await this.mkdirs(parentPath(t), options.signal);
    const parent = await this.getItem(parentPath(t), options.signal);
    if (!parent) throw new NotFoundError(`${this.name}: no folder ${parentPath(t)}`);
    const moved = this.parseItem(
      await this.call(
        `move ${f} -> ${t}`,
        () =>
          this.client
            .api(this.itemPath(f))
            .query({ '@microsoft.graph.conflictBehavior': options.overwrite ? 'replace' : 'fail' })
            .patch({ name: baseName(t), parentReference: { id: parent.id } }) as Promise<unknown>,
        options.signal,
      ),
    );
    this.feed.noteMove(moved.id, f);
    this.index.forget(f);
    this.index.set(t, moved.id, Boolean(moved.folder));
    return toEntry(t, moved);
  }

  /**
   * Server-side copy: Graph answers 202 with a monitor URL (no auth needed) that reports
   * the job until it is completed with the new item's id.
   */
  async copy(from: string, to: string, options: TransferOptions = {}): Promise<Entry> {
    const f = normalizeEntryPath(from);
    const t = normalizeEntryPath(to);
    await this.ensureRoot(options.signal);
    if (caseFoldKey(t) === caseFoldKey(f)) throw new AlreadyExistsError(`${this.name}: ${t} exists`);
    if (isWithin(caseFoldKey(t), caseFoldKey(f)))
      throw new InvalidPathError(`${this.name}: cannot put ${f} inside itself`, t);
    if (!(await this.getItem(f, options.signal))) throw new NotFoundError(`${this.name}: not found: ${f}`);
    if (parentPath(t) !== '') await this.mkdirs(parentPath(t), options.signal);
    const parent = await this.getItem(parentPath(t), options.signal);
    if (!parent) throw new NotFoundError(`${this.name}: no folder ${parentPath(t)}`);
    const res = await this.call(
      `copy ${f} -> ${t}`,
      () =>
        this.client
          .api(`${this.itemPath(f)}/copy`)
          .query({ '@microsoft.graph.conflictBehavior': options.overwrite ? 'replace' : 'fail' })
          .responseType(ResponseType.RAW)
          .post({ parentReference: { id: parent.id }, name: baseName(t) }) as Promise<Response>,
      options.signal,
    );
    if (res.status !== 202) {
      const text = await res.text().catch(() => '');
      const err = new GraphError(res.status, text);
      err.code = /"code"\s*:\s*"([^"]+)"/.exec(text)?.[1] ?? null;
      err.headers = res.headers;
      throw classifyGraph(err, `${this.name}: copy ${f} -> ${t}`);
    }
    await res.body?.cancel();
    const monitor = res.headers.get('location');
    if (!monitor) throw new TransientError(`${this.name}: copy ${f}: no monitor URL`);
    const item = await awaitCopy(this.graph, this.fetchImpl, monitor, f, t, options.signal);
    this.index.set(t, item.id, Boolean(item.folder));
    return toEntry(t, item);
  }

  latestCursor(options: { signal?: AbortSignal } = {}): Promise<string> {
    return this.feed.latestCursor(options);
  }

  changes(cursor: string, options: { signal?: AbortSignal; limit?: number } = {}): Promise<ChangePage> {
    return this.feed.changes(cursor, options);
  }
}
