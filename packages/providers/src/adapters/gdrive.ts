/**
 * Google Drive through the official `googleapis` client (Drive API v3, and v2 for
 * conditional writes).
 *
 * - Drive is id-based: provider paths are mapped to ids by walking from the root folder
 *   (`'<parent>' in parents and name = '<name>' and trashed = false`), with a path ↔ id
 *   cache this adapter keeps correct across its own moves and deletes and across what
 *   the change feed reports. Another client may move, rename or trash any folder at any
 *   time, and Drive takes a write into a folder's id wherever that folder now is: so on
 *   each call every cached level of the path is fetched (in parallel, one files.get each)
 *   and checked (name, parent, not trashed); from the first that no longer matches, the
 *   path is resolved again by name.
 * - Duplicate names: Drive lets several items in one folder share a name. The rule here:
 *   the oldest item (createdTime, then id) owns the path; the others are not listed and
 *   never touched. Names containing '/' or breaking the path rules are not listed either.
 * - `rootUrl` is set in the constructor and on every media call (the client builds media
 *   URLs from the per-call options only). Retries in the client are off: the retry wrapper
 *   is the one place that retries.
 * - Small writes are multipart uploads; larger ones use the resumable protocol, sent
 *   through the auth client (the generated client has no resumable support): chunks of a
 *   multiple of 256 KiB, and after a dropped chunk the session's status (`bytes *∕N`)
 *   says where to resume. A failed or aborted upload cancels its session.
 * - Conditional writes are atomic in effect (features.conditionalWrite = true):
 *   - ifRevision (write and remove): v3 files carry no etag, v2 files do and v2 honours
 *     If-Match. One v2 files.get gives the etag and headRevisionId together; a different
 *     revision is PreconditionFailed at once, otherwise the upload (v2 files.update: one
 *     request, or a resumable session opened with If-Match) or the v2 trash (metadata
 *     update labels.trashed; files.delete without the trash) carries `If-Match: <etag>`, and Drive's 412 conditionNotMet is PreconditionFailed. The etag
 *     changes on any change to the file, metadata too: such a refusal may be spurious, and
 *     the caller re-reads and retries (fail closed).
 *   - ifNotExists: Drive cannot refuse a duplicate name. The item is created, then the
 *     folder's items of that name are listed: the oldest owns the path (the rule above),
 *     so when ours is not the oldest another create won; ours is deleted (permanently) and
 *     the write fails AlreadyExists. Both racers decide on the same rule, so exactly one
 *     wins and no write is lost or left hidden. Folders the adapter creates are settled
 *     alike (the older is used; what someone already wrote into ours is moved into it, then
 *     ours is deleted).
 *   Unconditional writes stay on v3.
 * - remove() trashes (useTrash, default true, as Drive's own apps do): restorable for 30
 *   days. Only a duplicate the adapter itself just made is deleted permanently.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { google, type drive_v2, type drive_v3 } from 'googleapis';
import { openBody, rechunk, throwIfAborted } from '../body.ts';
import {
  AlreadyExistsError,
  AuthError,
  InvalidArgumentError,
  InvalidPathError,
  NotFoundError,
  NotSupportedError,
  PreconditionFailedError,
  ProviderError,
  QuotaExceededError,
  TransientError,
} from '../errors.ts';
import type { Features } from '../features.ts';
import { KeyedMutex } from '../keyed-mutex.ts';
import { baseName, isWithin, normalizeEntryPath, normalizePath, parentPath } from '../paths.ts';
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
import { withFolderContents } from './id-feed.ts';

export interface GDriveProviderOptions {
  readonly token: string | AccessTokenSource;
  /** Folder id the provider's root lives under. Default 'root' (My Drive). */
  readonly rootFolderId?: string;
  /** Path of the provider's root below rootFolderId, created when missing ('' = rootFolderId itself). */
  readonly root?: string;
  /** API root, e.g. the emulator's URL. Default https://www.googleapis.com/. */
  readonly rootUrl?: string;
  /** Writes above this use a resumable upload, in chunks of this size (a multiple of 256 KiB). Default 8 MiB. */
  readonly chunkSize?: number;
  /**
   * remove() (and a move or copy that replaces a file) sends the item to Drive's trash, as
   * Drive's own apps do, where it can be restored for 30 days. false: delete permanently.
   * Default true.
   */
  readonly useTrash?: boolean;
}

const KiB = 1024;
const MiB = 1024 * KiB;
const FOLDER_MIME = 'application/vnd.google-apps.folder';
const FILE_FIELDS =
  'id,name,mimeType,parents,trashed,size,sha256Checksum,md5Checksum,headRevisionId,modifiedTime,createdTime';
/** The v2 fields a conditional write reads and answers with (v2 names). */
const V2_FIELDS =
  'id,title,mimeType,parents(id),labels(trashed),fileSize,sha256Checksum,md5Checksum,headRevisionId,modifiedDate,createdDate,etag,version';
const CURSOR_PREFIX = 'gd1:';

type DriveFile = drive_v3.Schema$File;
type DriveFileV2 = drive_v2.Schema$File;

/** A v2 file in the v3 shape the rest of the adapter reads. */
function fromV2(f: DriveFileV2): DriveFile {
  return {
    id: f.id,
    name: f.title,
    mimeType: f.mimeType,
    parents: (f.parents ?? []).flatMap((r) => (r.id ? [r.id] : [])),
    trashed: f.labels?.trashed ?? false,
    size: f.fileSize,
    sha256Checksum: f.sha256Checksum,
    md5Checksum: f.md5Checksum,
    headRevisionId: f.headRevisionId,
    modifiedTime: f.modifiedDate,
    createdTime: f.createdDate,
  };
}

/** Where a write goes: a new item, or an existing one (under If-Match: `etag`, through v2). */
type WriteTarget =
  | { readonly kind: 'create'; readonly parentId: string }
  | { readonly kind: 'update'; readonly fileId: string; readonly etag?: string };

interface GaxiosLike {
  status?: number;
  code?: string;
  message?: string;
  response?: { status?: number; data?: unknown; headers?: { get?: (n: string) => string | null } };
}

function driveReason(data: unknown): string {
  const errors = (data as { error?: { errors?: { reason?: string }[] } } | undefined)?.error?.errors;
  return errors?.[0]?.reason ?? '';
}

/** Map a Drive failure to the contract's errors. */
export function classifyGDrive(e: unknown, where: string): Error {
  if (e instanceof ProviderError) return e;
  if (e instanceof Error && e.name === 'AbortError') return e;
  const err = (e ?? {}) as GaxiosLike;
  const status = err.response?.status ?? err.status;
  const data = err.response?.data;
  const reason = driveReason(data);
  const msg = `${where}: Drive ${status ?? err.code ?? ''} ${reason || err.message || ''}`.trim();
  const ra = err.response?.headers?.get?.('retry-after');
  const retryAfter = ra && Number.isFinite(Number(ra)) ? Number(ra) * 1000 : undefined;
  if (status === undefined) return new TransientError(msg, undefined, { cause: e });
  if (status === 404) return new NotFoundError(msg, { cause: e });
  if (status === 401) return new AuthError(msg, { cause: e });
  if (status === 429 || status >= 500) return new TransientError(msg, retryAfter, { cause: e });
  if (status === 403) {
    if (['userRateLimitExceeded', 'rateLimitExceeded', 'sharingRateLimitExceeded'].includes(reason)) {
      return new TransientError(msg, retryAfter, { cause: e });
    }
    if (reason === 'storageQuotaExceeded' || reason === 'quotaExceeded')
      return new QuotaExceededError(msg, { cause: e });
    return new AuthError(msg, { cause: e });
  }
  if (status === 412) return new PreconditionFailedError(msg, undefined, { cause: e });
  return new InvalidArgumentError(msg, { cause: e });
}

function escapeQ(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/'/g, "\\'");
}

function validName(name: string | null | undefined): string | undefined {
  if (!name || name.includes('/')) return undefined;
  try {
    const n = normalizePath(name);
    return n === name.normalize('NFC') ? n : undefined;
  } catch {
    return undefined;
  }
}

/** The item that owns a name among duplicates: the oldest (createdTime, then id). */
function owner(files: DriveFile[]): DriveFile | undefined {
  let best: DriveFile | undefined;
  for (const f of files) {
    if (!best) best = f;
    else {
      const a = f.createdTime ?? '';
      const b = best.createdTime ?? '';
      if (a < b || (a === b && (f.id ?? '') < (best.id ?? ''))) best = f;
    }
  }
  return best;
}

/** Path ↔ id cache for one provider root (also used by the OneDrive adapter's feed). */
export class IdPathIndex {
  private readonly byPath = new Map<string, { id: string; dir: boolean }>();
  private readonly byId = new Map<string, string>();
  /** The last path each id was seen at, kept after it is forgotten (for the change feed's deletes). */
  private readonly lastKnown = new Map<string, string>();

  get(path: string): { id: string; dir: boolean } | undefined {
    return this.byPath.get(path);
  }

  pathOf(id: string): string | undefined {
    return this.byId.get(id);
  }

  lastPathOf(id: string): string | undefined {
    return this.lastKnown.get(id);
  }

  set(path: string, id: string, dir: boolean): void {
    const old = this.byId.get(id);
    if (old !== undefined && old !== path) this.forget(old);
    const prev = this.byPath.get(path);
    if (prev && prev.id !== id) this.forget(path);
    this.byPath.set(path, { id, dir });
    this.byId.set(id, path);
    this.lastKnown.set(id, path);
  }

  /** Forget a path and everything cached below it. */
  forget(path: string): void {
    for (const [p, v] of this.byPath) {
      if (isWithin(p, path)) {
        this.byPath.delete(p);
        this.byId.delete(v.id);
      }
    }
  }

  /** After the feed reported a removal: drop what is left of the id. */
  drop(id: string): void {
    const p = this.byId.get(id);
    if (p !== undefined) this.forget(p);
    this.lastKnown.delete(id);
  }
}

export class GDriveProvider implements Provider {
  readonly name: string;
  readonly features: Features;
  readonly drive: drive_v3.Drive;
  /** Drive v2, for what only it has: etags and If-Match (conditional writes). */
  private readonly driveV2: drive_v2.Drive;
  private readonly auth: InstanceType<typeof google.auth.OAuth2>;
  private readonly tokens: AccessTokenSource;
  private readonly rootUrl: string;
  private readonly chunkSize: number;
  private readonly index = new IdPathIndex();
  private readonly locks = new KeyedMutex();
  private rootId: Promise<string> | undefined;
  /** Parents of folders outside the root seen by the change feed (id → parent id or null). */
  private readonly foreignParents = new Map<string, string | null>();
  /** Moves made through this provider, not yet seen in the feed: id → old path. */
  private readonly movedFrom = new Map<string, string>();

  constructor(private readonly options: GDriveProviderOptions) {
    this.tokens = toTokenSource(options.token);
    this.rootUrl = (options.rootUrl ?? 'https://www.googleapis.com/').replace(/\/?$/, '/');
    this.chunkSize = options.chunkSize ?? 8 * MiB;
    if (this.chunkSize % (256 * KiB) !== 0) throw new RangeError('chunkSize must be a multiple of 256 KiB');
    this.auth = new google.auth.OAuth2();
    this.drive = google.drive({
      version: 'v3',
      auth: this.auth,
      rootUrl: this.rootUrl,
      retry: false,
    } as drive_v3.Options);
    this.driveV2 = google.drive({
      version: 'v2',
      auth: this.auth,
      rootUrl: this.rootUrl,
      retry: false,
    } as drive_v2.Options);
    this.name = `gdrive:${options.rootFolderId ?? 'root'}/${options.root ?? ''}`;
    this.features = {
      move: 'files-and-folders',
      copy: 'files',
      changeFeed: true,
      conditionalWrite: true,
      rangeRead: true,
      caseSensitive: true,
      setModTime: true,
      maxSingleUploadBytes: this.chunkSize,
      hashAlgorithm: 'sha256',
      hashInListing: true,
      folders: 'real',
      notes: {
        copy: 'files.copy copies files only; Drive has no folder copy',
        conditionalWrite:
          'ifRevision: If-Match on the v2 etag (any change to the file, metadata too, refuses: fail closed); ' +
          'ifNotExists: create, then the oldest item of the name owns the path and a younger one of ours is deleted',
        duplicates:
          'several items may share a name in a folder; the oldest (createdTime, id) owns the path, the rest are hidden',
        changeFeed: 'changes.list reports the latest state of each changed item, not every version',
      },
    };
  }

  /** Media calls need rootUrl per call; every call gets a fresh token first. */
  private async opts(signal?: AbortSignal): Promise<{ rootUrl: string; signal?: AbortSignal }> {
    this.auth.setCredentials({ access_token: await this.tokens.getAccessToken(signal) });
    return signal ? { rootUrl: this.rootUrl, signal } : { rootUrl: this.rootUrl };
  }

  private async call<T>(
    where: string,
    fn: () => Promise<{ data: T }>,
    signal?: AbortSignal,
    retried = false,
  ): Promise<T> {
    throwIfAborted(signal);
    try {
      return (await fn()).data;
    } catch (e) {
      if (signal?.aborted) throw e;
      const status = (e as GaxiosLike).response?.status;
      if (status === 401 && !retried && this.tokens.invalidate) {
        // The token was refused (expired early, revoked): refresh once and try again.
        this.tokens.invalidate();
        await this.opts(signal);
        return this.call(where, fn, signal, true);
      }
      throw classifyGDrive(e, `${this.name}: ${where}`);
    }
  }

  // ---- path resolution ----

  private getRootId(): Promise<string> {
    this.rootId ??= (async () => {
      const base = this.options.rootFolderId ?? 'root';
      let id = base;
      if (base === 'root') {
        const o = await this.opts();
        id =
          (await this.call('root', () => this.drive.files.get({ fileId: 'root', fields: 'id' }, o))).id ??
          'root';
      }
      const rel = normalizePath((this.options.root ?? '').replace(/^\/+|\/+$/g, ''));
      for (const seg of rel === '' ? [] : rel.split('/'))
        id = await this.ensureChildFolder(id, seg, undefined);
      return id;
    })().catch((e: unknown) => {
      this.rootId = undefined;
      throw e;
    });
    return this.rootId;
  }

  private async children(
    parentId: string,
    name: string | undefined,
    signal?: AbortSignal,
  ): Promise<DriveFile[]> {
    const q =
      `'${escapeQ(parentId)}' in parents and trashed = false` +
      (name === undefined ? '' : ` and name = '${escapeQ(name)}'`);
    const out: DriveFile[] = [];
    let pageToken: string | undefined;
    do {
      const o = await this.opts(signal);
      const page = await this.call(
        'files.list',
        () =>
          this.drive.files.list(
            { q, pageSize: 1000, pageToken, fields: `nextPageToken,files(${FILE_FIELDS})` },
            o,
          ),
        signal,
      );
      out.push(...(page.files ?? []));
      pageToken = page.nextPageToken ?? undefined;
    } while (pageToken);
    return out;
  }

  private async child(parentId: string, name: string, signal?: AbortSignal): Promise<DriveFile | undefined> {
    return owner(await this.children(parentId, name, signal));
  }

  /**
   * How many leading folders of `segs` (and the item itself) the cache still holds where
   * they were: each cached id is fetched (in parallel) and must still carry its name, sit in
   * the folder before it and not be trashed. Another client may have moved, renamed or
   * trashed any of them; Drive would take a write into a moved folder's id without a word.
   * The first stale level and everything cached below it is forgotten. Returns the number
   * of levels verified and the item of the last one. `folders`: every level must be a folder.
   */
  private async verifiedPrefix(
    segs: readonly string[],
    folders: boolean,
    signal?: AbortSignal,
  ): Promise<{ depth: number; ids: string[]; last?: DriveFile }> {
    const rootId = await this.getRootId();
    const cached: { path: string; id: string }[] = [];
    for (let i = 0; i < segs.length; i++) {
      const path = segs.slice(0, i + 1).join('/');
      const c = this.index.get(path);
      if (!c || ((folders || i < segs.length - 1) && !c.dir)) break;
      cached.push({ path, id: c.id });
    }
    if (cached.length === 0) return { depth: 0, ids: [] };
    const o = await this.opts(signal);
    const got = await Promise.all(
      cached.map(async ({ id }) => {
        try {
          return await this.call(
            'files.get',
            () => this.drive.files.get({ fileId: id, fields: FILE_FIELDS }, o),
            signal,
          );
        } catch (e) {
          if (e instanceof NotFoundError) return undefined;
          throw e;
        }
      }),
    );
    const ids: string[] = [];
    let last: DriveFile | undefined;
    for (const [i, { path, id }] of cached.entries()) {
      const f = got[i];
      const parentId = i === 0 ? rootId : ids[i - 1];
      if (!f || f.trashed || f.name !== segs[i] || !parentId || !f.parents?.includes(parentId)) {
        this.index.forget(path); // moved, renamed, trashed or deleted behind our back
        break;
      }
      ids.push(id);
      last = f;
    }
    return { depth: ids.length, ids, ...(last ? { last } : {}) };
  }

  /** The Drive item at `p`, or undefined. Uses the cache, verified, and refreshes it. */
  private async lookup(p: string, signal?: AbortSignal): Promise<DriveFile | undefined> {
    const rootId = await this.getRootId();
    if (p === '') return { id: rootId, mimeType: FOLDER_MIME, name: '' };
    const segs = p.split('/');
    const { depth, ids, last } = await this.verifiedPrefix(segs, false, signal);
    if (depth === segs.length) return last;
    let parentId = depth === 0 ? rootId : (ids[depth - 1] as string);
    let found: DriveFile | undefined;
    for (let i = depth; i < segs.length; i++) {
      found = await this.child(parentId, segs[i] as string, signal);
      if (!found?.id) return undefined;
      this.index.set(segs.slice(0, i + 1).join('/'), found.id, found.mimeType === FOLDER_MIME);
      if (i < segs.length - 1) {
        if (found.mimeType !== FOLDER_MIME) return undefined;
        parentId = found.id;
      }
    }
    return found;
  }

  private toEntry(p: string, f: DriveFile): Entry {
    if (f.mimeType === FOLDER_MIME) {
      return {
        path: p,
        kind: 'dir',
        size: 0,
        modifiedMs: f.modifiedTime ? Date.parse(f.modifiedTime) : 0,
        revision: '',
      };
    }
    return {
      path: p,
      kind: 'file',
      size: Number(f.size ?? 0),
      modifiedMs: f.modifiedTime ? Date.parse(f.modifiedTime) : 0,
      revision: f.headRevisionId ?? '',
      ...(f.sha256Checksum ? { hash: { algorithm: 'sha256', value: f.sha256Checksum } } : {}),
    };
  }

  /** Make sure folder `name` exists under `parentId`; a file there is AlreadyExists. Returns its id. */
  private ensureChildFolder(
    parentId: string,
    name: string,
    path: string | undefined,
    signal?: AbortSignal,
  ): Promise<string> {
    return this.locks.run([`folder:${parentId}/${name}`], async () => {
      const existing = await this.child(parentId, name, signal);
      if (existing?.id) {
        if (existing.mimeType !== FOLDER_MIME)
          throw new AlreadyExistsError(`${this.name}: a file is in the way of folder ${path ?? name}`);
        if (path !== undefined) this.index.set(path, existing.id, true);
        return existing.id;
      }
      const o = await this.opts(signal);
      const created = await this.call(
        'files.create (folder)',
        () =>
          this.drive.files.create(
            { requestBody: { name, mimeType: FOLDER_MIME, parents: [parentId] }, fields: 'id' },
            o,
          ),
        signal,
      );
      if (!created.id) throw new TransientError(`${this.name}: folder create returned no id`);
      // Another client may have made the same folder meanwhile: the older one is used.
      const winner = await this.settleCreate(parentId, name, created.id, true);
      if (winner && winner.mimeType !== FOLDER_MIME)
        throw new AlreadyExistsError(`${this.name}: a file is in the way of folder ${path ?? name}`);
      const id = winner?.id ?? created.id;
      if (path !== undefined) this.index.set(path, id, true);
      return id;
    });
  }

  /** Folder id for `dir` (its cached ids verified), creating missing folders. */
  private async ensureFolders(dir: string, signal?: AbortSignal): Promise<string> {
    let id = await this.getRootId();
    if (dir === '') return id;
    const segs = dir.split('/');
    const { depth, ids } = await this.verifiedPrefix(segs, true, signal);
    if (depth > 0) id = ids[depth - 1] as string;
    for (let i = depth; i < segs.length; i++) {
      id = await this.ensureChildFolder(id, segs[i] as string, segs.slice(0, i + 1).join('/'), signal);
    }
    return id;
  }

  // ---- contract ----

  async *list(dir: string, options: ListOptions = {}): AsyncIterable<Entry> {
    const d = normalizePath(dir);
    const folder = await this.lookup(d, options.signal);
    if (!folder?.id || folder.mimeType !== FOLDER_MIME)
      throw new NotFoundError(`${this.name}: folder not found: ${d}`);
    const queue: { path: string; id: string }[] = [{ path: d, id: folder.id }];
    while (queue.length > 0) {
      const { path, id } = queue.shift() as { path: string; id: string };
      const byName = new Map<string, DriveFile[]>();
      for (const f of await this.children(id, undefined, options.signal)) {
        const name = validName(f.name);
        if (name === undefined || !f.id) continue;
        const list = byName.get(name) ?? [];
        list.push(f);
        byName.set(name, list);
      }
      for (const [name, files] of [...byName].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
        const f = owner(files) as DriveFile & { id: string };
        const p = path === '' ? name : `${path}/${name}`;
        this.index.set(p, f.id, f.mimeType === FOLDER_MIME);
        throwIfAborted(options.signal);
        yield this.toEntry(p, f);
        if (options.recursive && f.mimeType === FOLDER_MIME) queue.push({ path: p, id: f.id });
      }
    }
  }

  async stat(path: string, options: { signal?: AbortSignal } = {}): Promise<Entry> {
    const p = normalizeEntryPath(path);
    const f = await this.lookup(p, options.signal);
    if (!f) throw new NotFoundError(`${this.name}: not found: ${p}`);
    return this.toEntry(p, f);
  }

  async read(path: string, options: ReadOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    const p = normalizeEntryPath(path);
    const offset = options.offset ?? 0;
    const length = options.length;
    if (!Number.isSafeInteger(offset) || offset < 0)
      throw new InvalidArgumentError(`bad read offset ${offset}`);
    if (length !== undefined && (!Number.isSafeInteger(length) || length < 0))
      throw new InvalidArgumentError(`bad read length ${length}`);
    const f = await this.lookup(p, options.signal);
    if (!f?.id || f.mimeType === FOLDER_MIME) throw new NotFoundError(`${this.name}: no file at ${p}`);
    const size = Number(f.size ?? 0);
    if (length === 0 || offset >= size) return (async function* () {})();
    const headers: Record<string, string> =
      offset === 0 && length === undefined
        ? {}
        : { range: `bytes=${offset}-${length === undefined ? '' : offset + length - 1}` };
    const fileId = f.id;
    const o = await this.opts(options.signal);
    let stream: Readable;
    try {
      const res = await this.drive.files.get(
        { fileId, alt: 'media' },
        { ...o, responseType: 'stream', headers },
      );
      stream = res.data as unknown as Readable;
    } catch (e) {
      if (options.signal?.aborted) throw e;
      throw classifyGDrive(await withBody(e), `${this.name}: read ${p}`);
    }
    const name = this.name;
    return (async function* () {
      try {
        for await (const chunk of stream) yield chunk as Uint8Array;
      } catch (e) {
        if (options.signal?.aborted) throw e;
        throw new TransientError(`${name}: read ${p} broke: ${String(e)}`, undefined, { cause: e });
      }
    })();
  }

  async write(path: string, body: Body, options: WriteOptions = {}): Promise<Entry> {
    const p = normalizeEntryPath(path);
    const parts = rechunk(openBody(body), this.chunkSize)[Symbol.asyncIterator]();
    const sha = createHash('sha256');
    const first = await parts.next();
    const firstChunk = first.done ? Buffer.alloc(0) : first.value;
    sha.update(firstChunk);
    const second = first.done ? ({ done: true, value: undefined } as const) : await parts.next();
    throwIfAborted(options.signal);
    return this.locks.run([`path:${p}`], async () => {
      const parentId = await this.ensureFolders(parentPath(p), options.signal);
      const existing = await this.child(parentId, baseName(p), options.signal);
      if (existing?.mimeType === FOLDER_MIME)
        throw new AlreadyExistsError(`${this.name}: a folder exists at ${p}`);
      if (options.ifNotExists && existing) throw new AlreadyExistsError(`${this.name}: ${p} exists`);
      let target: WriteTarget = existing?.id
        ? { kind: 'update', fileId: existing.id }
        : { kind: 'create', parentId };
      if (options.ifRevision !== undefined) {
        if (!existing?.id) throw new NotFoundError(`${this.name}: conditional write on missing ${p}`);
        const etag = await this.etagAt(p, existing.id, parentId, options.ifRevision, options.signal);
        target = { kind: 'update', fileId: existing.id, etag };
      }
      const modifiedTime =
        options.modifiedMs !== undefined ? new Date(options.modifiedMs).toISOString() : undefined;
      let result: DriveFile;
      if (second.done) {
        checkBody(this.name, p, options, firstChunk.byteLength, sha.digest('hex'));
        result = await this.upload(p, target, modifiedTime, firstChunk, options.signal);
      } else {
        result = await this.resumable(p, target, modifiedTime, firstChunk, second.value, parts, sha, options);
      }
      if (!result.id) throw new TransientError(`${this.name}: write ${p}: no id returned`);
      if (target.kind === 'create' && options.ifNotExists) {
        if (await this.settleCreate(parentId, baseName(p), result.id, false))
          throw new AlreadyExistsError(`${this.name}: ${p} was created meanwhile by another client`);
      }
      this.index.set(p, result.id, false);
      return this.toEntry(p, result);
    });
  }

  /**
   * The etag of file `fileId` if it is still at `p` (in `parentId`) and at revision `want`:
   * etag and revision come from one v2 read, so a write under If-Match on that etag makes
   * the revision check and the write one step on the server. Else PreconditionFailed
   * (NotFound when the file is gone).
   */
  private async etagAt(
    p: string,
    fileId: string,
    parentId: string | undefined,
    want: string,
    signal?: AbortSignal,
  ): Promise<string> {
    const o = await this.opts(signal);
    const cur = await this.call(
      'files.get (v2)',
      () => this.driveV2.files.get({ fileId, fields: V2_FIELDS }, o),
      signal,
    );
    if (
      cur.labels?.trashed ||
      cur.title !== baseName(p) ||
      (parentId !== undefined && !cur.parents?.some((r) => r.id === parentId))
    ) {
      throw new PreconditionFailedError(`${this.name}: ${p} was moved, renamed or trashed meanwhile`);
    }
    if (cur.headRevisionId !== want) {
      throw new PreconditionFailedError(
        `${this.name}: ${p} is at revision ${cur.headRevisionId ?? ''}, not ${want}`,
        cur.headRevisionId ?? undefined,
      );
    }
    if (!cur.etag) throw new TransientError(`${this.name}: Drive gave no etag for ${p}`);
    return cur.etag;
  }

  /** Drive's 412 to a request under If-Match: the file changed after its etag was read. */
  private changed(p: string, e: PreconditionFailedError): PreconditionFailedError {
    return new PreconditionFailedError(
      `${this.name}: ${p} changed after its revision was checked (If-Match refused)`,
      undefined,
      { cause: e },
    );
  }

  /** A v2 request under If-Match. */
  private async underIfMatch<T>(
    p: string,
    where: string,
    fn: () => Promise<{ data: T }>,
    signal?: AbortSignal,
  ): Promise<T> {
    try {
      return await this.call(where, fn, signal);
    } catch (e) {
      throw e instanceof PreconditionFailedError ? this.changed(p, e) : e;
    }
  }

  /** A write in one request: v3 create or update, or v2 update under If-Match. */
  private async upload(
    p: string,
    target: WriteTarget,
    modifiedTime: string | undefined,
    data: Buffer,
    signal?: AbortSignal,
  ): Promise<DriveFile> {
    const o = await this.opts(signal);
    // A fresh stream per attempt (call() repeats the request after a refreshed token).
    const media = (): { mimeType: string; body: Readable } => ({
      mimeType: 'application/octet-stream',
      body: Readable.from([data]),
    });
    if (target.kind === 'create') {
      const { parentId } = target;
      return this.call(
        'files.create',
        () =>
          this.drive.files.create(
            {
              requestBody: {
                ...(modifiedTime ? { modifiedTime } : {}),
                name: baseName(p),
                parents: [parentId],
              },
              media: media(),
              fields: FILE_FIELDS,
            },
            o,
          ),
        signal,
      );
    }
    const { fileId, etag } = target;
    if (etag === undefined) {
      return this.call(
        'files.update',
        () =>
          this.drive.files.update(
            {
              fileId,
              requestBody: modifiedTime ? { modifiedTime } : {},
              media: media(),
              fields: FILE_FIELDS,
            },
            o,
          ),
        signal,
      );
    }
    const f = await this.underIfMatch(
      p,
      'files.update (v2, If-Match)',
      () =>
        this.driveV2.files.update(
          {
            fileId,
            media: media(),
            fields: V2_FIELDS,
            // v2 keeps the body's modifiedDate only when asked to.
            ...(modifiedTime ? { setModifiedDate: true, requestBody: { modifiedDate: modifiedTime } } : {}),
          },
          { ...o, headers: { 'If-Match': etag } },
        ),
      signal,
    );
    return fromV2(f);
  }

  /**
   * After a create Drive could not refuse (it allows a taken name): the oldest item of the
   * name owns the path. When that is not ours, another client's create landed between our
   * check and our create, and won: ours is deleted permanently (not trashed, so it cannot
   * come back) and the winner is returned; undefined when ours owns the path. The other
   * client, deciding on the same rule, keeps its item. A folder of ours that someone wrote
   * into before we settled (by its id) is first emptied into the winner. Runs to the end
   * even when the caller aborts, so that no losing item is left behind.
   */
  private async settleCreate(
    parentId: string,
    name: string,
    id: string,
    folder: boolean,
  ): Promise<DriveFile | undefined> {
    const winner = owner(await this.children(parentId, name));
    if (!winner?.id || winner.id === id) return undefined;
    if (folder && winner.mimeType === FOLDER_MIME) {
      // Someone wrote into ours before we settled (by its id): left there, it would be
      // hidden behind the older folder. What it holds moves into the winner first.
      await this.mergeFolder(id, winner.id);
      if ((await this.children(id, undefined)).length > 0) return winner; // could not move all
    } else if (folder && (await this.children(id, undefined)).length > 0) return winner;
    for (let attempt = 1; ; attempt++) {
      try {
        const o = await this.opts();
        await this.call('files.delete (lost create race)', () => this.drive.files.delete({ fileId: id }, o));
        return winner;
      } catch (e) {
        if (e instanceof NotFoundError) return winner;
        if (attempt >= 3 || !(e instanceof TransientError)) throw e;
        await new Promise((r) => setTimeout(r, 200 * attempt));
      }
    }
  }

  /**
   * Move what folder `from` holds into folder `to` (server-side, by id): a name `to` has
   * already is merged when both are folders, else moved under a free name "name (2).ext".
   */
  private async mergeFolder(from: string, to: string): Promise<void> {
    for (const c of await this.children(from, undefined)) {
      if (!c.id || !c.name) continue;
      const clash = owner(await this.children(to, c.name));
      let name = c.name;
      if (clash?.id) {
        if (clash.mimeType === FOLDER_MIME && c.mimeType === FOLDER_MIME) {
          await this.mergeFolder(c.id, clash.id);
          if ((await this.children(c.id, undefined)).length === 0) {
            const o = await this.opts();
            await this.call('files.delete (merged folder)', () =>
              this.drive.files.delete({ fileId: c.id as string }, o),
            );
          }
          continue;
        }
        const dot = c.name.lastIndexOf('.');
        const [stem, ext] = dot > 0 ? [c.name.slice(0, dot), c.name.slice(dot)] : [c.name, ''];
        for (let n = 2; ; n++) {
          name = `${stem} (${n})${ext}`;
          if ((await this.children(to, name)).length === 0) break;
        }
      }
      const o = await this.opts();
      await this.call('files.update (merge into the older folder)', () =>
        this.drive.files.update(
          {
            fileId: c.id as string,
            addParents: to,
            removeParents: from,
            requestBody: name === c.name ? {} : { name },
            fields: 'id',
          },
          o,
        ),
      );
    }
  }

  /**
   * Resumable upload: chunks sent through the auth client, resuming from the session's
   * status. An update under If-Match (v2) opens the session with it; Drive may also refuse
   * the last chunk with 412 when the file changed while the chunks were sent.
   */
  private async resumable(
    p: string,
    target: WriteTarget,
    modifiedTime: string | undefined,
    first: Buffer,
    second: Buffer,
    rest: AsyncIterator<Buffer>,
    sha: ReturnType<typeof createHash>,
    options: WriteOptions,
  ): Promise<DriveFile> {
    const v2 = target.kind === 'update' && target.etag !== undefined;
    const headers: Record<string, string> = {
      'x-upload-content-type': 'application/octet-stream',
      ...(options.size !== undefined ? { 'x-upload-content-length': String(options.size) } : {}),
    };
    let url: string;
    let method: string;
    let meta: Record<string, unknown>;
    if (target.kind === 'create') {
      url = `${this.rootUrl}upload/drive/v3/files?uploadType=resumable&fields=${FILE_FIELDS}`;
      method = 'POST';
      meta = { ...(modifiedTime ? { modifiedTime } : {}), name: baseName(p), parents: [target.parentId] };
    } else if (target.etag === undefined) {
      url = `${this.rootUrl}upload/drive/v3/files/${encodeURIComponent(target.fileId)}?uploadType=resumable&fields=${FILE_FIELDS}`;
      method = 'PATCH';
      meta = modifiedTime ? { modifiedTime } : {};
    } else {
      // v2 files.update is a PUT.
      url =
        `${this.rootUrl}upload/drive/v2/files/${encodeURIComponent(target.fileId)}?uploadType=resumable` +
        `&fields=${encodeURIComponent(V2_FIELDS)}${modifiedTime ? '&setModifiedDate=true' : ''}`;
      method = 'PUT';
      meta = modifiedTime ? { modifiedDate: modifiedTime } : {};
      headers['if-match'] = target.etag;
    }
    const init = await this.request(url, method, meta, headers, options.signal);
    if (init.status !== 200) {
      const data: unknown = await init.json().catch(() => undefined);
      const e = classifyGDrive(
        { response: { status: init.status, data, headers: init.headers } },
        `${this.name}: start resumable upload ${p}`,
      );
      throw v2 && e instanceof PreconditionFailedError ? this.changed(p, e) : e;
    }
    const session = init.headers.get('location');
    if (!session) throw new TransientError(`${this.name}: resumable upload of ${p} got no session URI`);
    try {
      let offset = 0;
      let chunk = first;
      let next: Buffer | undefined = second;
      for (;;) {
        throwIfAborted(options.signal);
        const last = next === undefined;
        if (last) checkBody(this.name, p, options, offset + chunk.byteLength, sha.digest('hex'));
        const done = await this.sendChunk(session, chunk, offset, last, options.signal);
        if (done) return v2 ? fromV2(done as DriveFileV2) : (done as DriveFile);
        offset += chunk.byteLength;
        chunk = next as Buffer;
        const following = await rest.next();
        next = following.done ? undefined : following.value;
        sha.update(chunk);
      }
    } catch (e) {
      // Cancel the session so nothing is left behind (best effort; it also expires in a week).
      await this.request(session, 'DELETE', undefined, {}, undefined).catch(() => undefined);
      throw v2 && e instanceof PreconditionFailedError ? this.changed(p, e) : e;
    }
  }

  /** PUT one chunk; on a dropped connection or 5xx ask the session where it stands and resume. */
  private async sendChunk(
    session: string,
    chunk: Buffer,
    offset: number,
    last: boolean,
    signal?: AbortSignal,
  ): Promise<object | undefined> {
    const total = last ? String(offset + chunk.byteLength) : '*';
    const end = offset + chunk.byteLength;
    let sent = 0; // bytes of this chunk the session already holds
    for (let attempt = 1; ; attempt++) {
      throwIfAborted(signal);
      let res: Response | undefined;
      try {
        res = await this.request(
          session,
          'PUT',
          chunk.subarray(sent),
          { 'content-range': `bytes ${offset + sent}-${end - 1}/${total}` },
          signal,
        );
      } catch (e) {
        if (signal?.aborted) throw e;
      }
      if (res && (res.status === 200 || res.status === 201)) return (await res.json()) as object;
      let have: number | undefined;
      if (res?.status === 308) have = rangeEnd(res.headers.get('range'));
      else if (res && res.status < 500 && res.status !== 429) {
        const data: unknown = await res.json().catch(() => undefined);
        throw classifyGDrive(
          { response: { status: res.status, data, headers: res.headers } },
          `${this.name}: upload chunk`,
        );
      }
      if (attempt >= 6) {
        throw new TransientError(
          `${this.name}: upload chunk failed ${attempt} times (last: ${res?.status ?? 'network error'})`,
        );
      }
      if (have === undefined) {
        // Dropped or refused: ask where the session stands (status query `bytes */N`).
        await new Promise((r) => setTimeout(r, Math.min(2000, 50 * 2 ** attempt)));
        const status = await this.request(
          session,
          'PUT',
          Buffer.alloc(0),
          { 'content-range': `bytes */${total}` },
          signal,
        ).catch(() => undefined);
        if (status && (status.status === 200 || status.status === 201))
          return (await status.json()) as object;
        if (status?.status !== 308) continue;
        have = rangeEnd(status.headers.get('range'));
      }
      if (have >= end) return undefined;
      sent = Math.max(0, have - offset);
    }
  }

  /** One request through the auth client (Authorization set by it), answered as a fetch Response. */
  private async request(
    url: string,
    method: string,
    data: unknown,
    headers: Record<string, string>,
    signal?: AbortSignal,
  ): Promise<Response> {
    await this.opts(signal);
    const res = await this.auth.request<string>({
      url,
      method: method as 'PUT',
      headers:
        data !== undefined && !Buffer.isBuffer(data)
          ? { 'content-type': 'application/json; charset=UTF-8', ...headers }
          : headers,
      data: data === undefined ? undefined : Buffer.isBuffer(data) ? data : JSON.stringify(data),
      responseType: 'text',
      validateStatus: () => true,
      retry: false,
      ...(signal ? { signal } : {}),
    });
    const h = new Headers();
    const raw = res.headers as unknown as Headers | Record<string, string>;
    if (typeof (raw as Headers).get === 'function') (raw as Headers).forEach((v, k) => h.set(k, v));
    else for (const [k, v] of Object.entries(raw)) h.set(k, String(v));
    const empty = res.status === 204 || res.status === 205 || res.status === 304;
    return new Response(empty ? null : (res.data ?? ''), { status: res.status, headers: h });
  }

  /** An item removed for the caller: to the trash (useTrash, the default), else deleted. */
  private async discard(fileId: string, signal?: AbortSignal): Promise<void> {
    const o = await this.opts(signal);
    if (this.options.useTrash ?? true) {
      await this.call(
        'files.update (trash)',
        () => this.drive.files.update({ fileId, requestBody: { trashed: true }, fields: 'id' }, o),
        signal,
      );
    } else await this.call('files.delete', () => this.drive.files.delete({ fileId }, o), signal);
  }

  async remove(path: string, options: RemoveOptions = {}): Promise<void> {
    const p = normalizeEntryPath(path);
    await this.locks.run([`path:${p}`], async () => {
      const f = await this.lookup(p, options.signal);
      if (!f?.id) throw new NotFoundError(`${this.name}: not found: ${p}`);
      if (options.ifRevision !== undefined && f.headRevisionId !== options.ifRevision) {
        throw new PreconditionFailedError(
          `${this.name}: ${p} is at revision ${f.headRevisionId ?? ''}, not ${options.ifRevision}`,
          f.headRevisionId ?? undefined,
        );
      }
      const fileId = f.id;
      if (options.ifRevision !== undefined) {
        // The same check again, now bound to the etag the delete carries in If-Match.
        const etag = await this.etagAt(
          p,
          fileId,
          f.parents?.[0] ?? undefined,
          options.ifRevision,
          options.signal,
        );
        const o = await this.opts(options.signal);
        const headers = { 'If-Match': etag };
        if (this.options.useTrash ?? true) {
          await this.underIfMatch(
            p,
            'files.update (v2, trash, If-Match)',
            () =>
              this.driveV2.files.update(
                { fileId, requestBody: { labels: { trashed: true } }, fields: 'id' },
                { ...o, headers },
              ),
            options.signal,
          );
        } else {
          await this.underIfMatch(
            p,
            'files.delete (v2, If-Match)',
            () => this.driveV2.files.delete({ fileId }, { ...o, headers }),
            options.signal,
          );
        }
      } else await this.discard(fileId, options.signal);
      this.index.forget(p);
    });
  }

  async mkdir(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const p = normalizeEntryPath(path);
    await this.ensureFolders(p, options.signal);
  }

  async move(from: string, to: string, options: TransferOptions = {}): Promise<Entry> {
    const f = normalizeEntryPath(from);
    const t = normalizeEntryPath(to);
    if (t !== f && isWithin(t, f))
      throw new InvalidPathError(`${this.name}: cannot put ${f} inside itself`, t);
    return this.locks.run([`path:${f}`, `path:${t}`], async () => {
      const src = await this.lookup(f, options.signal);
      if (!src?.id) throw new NotFoundError(`${this.name}: not found: ${f}`);
      const parentId = await this.ensureFolders(parentPath(t), options.signal);
      const dst = await this.child(parentId, baseName(t), options.signal);
      if (dst?.id && dst.id !== src.id) {
        if (dst.mimeType === FOLDER_MIME || src.mimeType === FOLDER_MIME || !options.overwrite) {
          throw new AlreadyExistsError(`${this.name}: ${t} exists`);
        }
        await this.discard(dst.id, options.signal);
        this.index.forget(t);
      }
      const oldParent = src.parents?.[0];
      const o = await this.opts(options.signal);
      const moved = await this.call(
        'files.update (move)',
        () =>
          this.drive.files.update(
            {
              fileId: src.id as string,
              requestBody: { name: baseName(t) },
              ...(oldParent !== parentId
                ? { addParents: parentId, removeParents: oldParent ?? undefined }
                : {}),
              fields: FILE_FIELDS,
            },
            o,
          ),
        options.signal,
      );
      this.movedFrom.set(src.id, f);
      this.index.forget(f);
      this.index.set(t, src.id, src.mimeType === FOLDER_MIME);
      return this.toEntry(t, moved);
    });
  }

  async copy(from: string, to: string, options: TransferOptions = {}): Promise<Entry> {
    const f = normalizeEntryPath(from);
    const t = normalizeEntryPath(to);
    if (t === f) throw new AlreadyExistsError(`${this.name}: ${t} exists`);
    return this.locks.run([`path:${t}`], async () => {
      const src = await this.lookup(f, options.signal);
      if (!src?.id) throw new NotFoundError(`${this.name}: not found: ${f}`);
      if (src.mimeType === FOLDER_MIME)
        throw new NotSupportedError(`${this.name}: Drive cannot copy folders (features.copy = 'files')`);
      const parentId = await this.ensureFolders(parentPath(t), options.signal);
      const dst = await this.child(parentId, baseName(t), options.signal);
      if (dst?.id) {
        if (dst.mimeType === FOLDER_MIME || !options.overwrite)
          throw new AlreadyExistsError(`${this.name}: ${t} exists`);
        await this.discard(dst.id, options.signal);
      }
      const o = await this.opts(options.signal);
      const copied = await this.call(
        'files.copy',
        () =>
          this.drive.files.copy(
            {
              fileId: src.id as string,
              requestBody: { name: baseName(t), parents: [parentId] },
              fields: FILE_FIELDS,
            },
            o,
          ),
        options.signal,
      );
      if (copied.id) this.index.set(t, copied.id, false);
      return this.toEntry(t, copied);
    });
  }

  async latestCursor(options: { signal?: AbortSignal } = {}): Promise<string> {
    await this.getRootId();
    const o = await this.opts(options.signal);
    const out = await this.call(
      'changes.getStartPageToken',
      () => this.drive.changes.getStartPageToken({}, o),
      options.signal,
    );
    if (!out.startPageToken) throw new TransientError(`${this.name}: no startPageToken`);
    return CURSOR_PREFIX + out.startPageToken;
  }

  /** Provider path of a file from the feed: walk its parents up to our root (undefined when outside). */
  private async feedPath(f: DriveFile, signal?: AbortSignal): Promise<string | undefined> {
    const rootId = await this.getRootId();
    const name = validName(f.name);
    const parent = f.parents?.[0];
    if (name === undefined || !parent) return undefined;
    if (parent === rootId) return name;
    const known = this.index.pathOf(parent);
    if (known !== undefined) return `${known}/${name}`;
    // Walk up through folders we have not seen, remembering the ones outside the root.
    const chain: DriveFile[] = [];
    let cur: string | null = parent;
    for (let depth = 0; cur && depth < 64; depth++) {
      if (cur === rootId) break;
      const k = this.index.pathOf(cur);
      if (k !== undefined) break;
      if (this.foreignParents.has(cur) && this.foreignParents.get(cur) === null) return undefined;
      const o = await this.opts(signal);
      let folder: DriveFile;
      try {
        folder = await this.call(
          'files.get',
          () =>
            this.drive.files.get({ fileId: cur as string, fields: 'id,name,parents,mimeType,trashed' }, o),
          signal,
        );
      } catch (e) {
        if (e instanceof NotFoundError) return undefined;
        throw e;
      }
      chain.push(folder);
      cur = folder.parents?.[0] ?? null;
    }
    if (cur === null || cur === undefined) {
      for (const c of chain) if (c.id) this.foreignParents.set(c.id, null);
      return undefined;
    }
    let base = cur === rootId ? '' : (this.index.pathOf(cur) ?? '');
    for (const c of chain.reverse()) {
      const n = validName(c.name);
      if (n === undefined || !c.id) return undefined;
      base = base === '' ? n : `${base}/${n}`;
      this.index.set(base, c.id, true);
    }
    return base === '' ? name : `${base}/${name}`;
  }

  async changes(cursor: string, options: { signal?: AbortSignal; limit?: number } = {}): Promise<ChangePage> {
    const reset = async (): Promise<ChangePage> => ({
      changes: [],
      cursor: await this.latestCursor(options),
      hasMore: false,
      reset: true,
    });
    if (!cursor.startsWith(CURSOR_PREFIX)) return reset();
    const rootId = await this.getRootId();
    let page: drive_v3.Schema$ChangeList;
    try {
      const o = await this.opts(options.signal);
      page = await this.call(
        'changes.list',
        () =>
          this.drive.changes.list(
            {
              pageToken: cursor.slice(CURSOR_PREFIX.length),
              pageSize: Math.max(1, Math.min(1000, options.limit ?? 1000)),
              includeRemoved: true,
              fields: `nextPageToken,newStartPageToken,changes(fileId,removed,file(${FILE_FIELDS}))`,
            },
            o,
          ),
        options.signal,
      );
    } catch (e) {
      if (e instanceof InvalidArgumentError) return reset(); // an invalid or expired page token
      throw e;
    }
    const out: Change[] = [];
    const folders: string[] = [];
    // A delete is only reported for a path no other live item is known to hold now.
    const pushDelete = (path: string, id: string): void => {
      const holder = this.index.get(path);
      if (holder && holder.id !== id) return;
      out.push({ type: 'delete', path });
    };
    const changes = (page.changes ?? []).filter((c) => {
      const id = c.fileId ?? c.file?.id;
      return id && id !== rootId;
    });
    // Where each item was before this page, read before the index learns the page's folders.
    const was = new Map<string, string | undefined>();
    for (const c of changes) {
      const id = (c.fileId ?? c.file?.id) as string;
      if (!was.has(id)) was.set(id, this.movedFrom.get(id) ?? this.index.lastPathOf(id));
    }
    // changes.list gives each item's latest state in the order of its last change, so a file
    // changed before its folder moved comes first: the page's folders are placed first (twice,
    // for a folder inside a moved folder), and every item is resolved under their new paths.
    for (let pass = 0; pass < 2; pass++) {
      for (const c of changes) {
        if (!c.file || c.removed || c.file.trashed || c.file.mimeType !== FOLDER_MIME) continue;
        const now = await this.feedPath(c.file, options.signal);
        if (now !== undefined && c.file.id) this.index.set(now, c.file.id, true);
      }
    }
    for (const c of changes) {
      const id = (c.fileId ?? c.file?.id) as string;
      const before = was.get(id);
      this.movedFrom.delete(id);
      if (c.removed || !c.file || c.file.trashed) {
        if (before !== undefined) pushDelete(before, id);
        this.index.drop(id);
        continue;
      }
      const now = await this.feedPath(c.file, options.signal);
      if (before !== undefined && before !== now) pushDelete(before, id);
      if (now === undefined) {
        this.index.drop(id);
        continue;
      }
      const dir = c.file.mimeType === FOLDER_MIME;
      this.index.set(now, id, dir);
      out.push({ type: 'upsert', path: now, entry: this.toEntry(now, c.file) });
      if (dir && before !== now) folders.push(now);
    }
    const next = page.nextPageToken ?? page.newStartPageToken;
    if (!next) throw new TransientError(`${this.name}: changes.list returned no token`);
    return {
      changes: await withFolderContents(this, out, folders, options.signal),
      cursor: CURSOR_PREFIX + next,
      hasMore: Boolean(page.nextPageToken),
      reset: false,
    };
  }
}

function checkBody(name: string, p: string, options: WriteOptions, size: number, shaHex: string): void {
  if (options.size !== undefined && options.size !== size) {
    throw new InvalidArgumentError(`${name}: expected ${options.size} bytes for ${p}, received ${size}`);
  }
  if (options.sha256 !== undefined && options.sha256.toLowerCase() !== shaHex) {
    throw new InvalidArgumentError(`${name}: SHA-256 of the bytes received for ${p} does not match`);
  }
}

/** Last byte + 1 from a 308's `Range: bytes=0-N` (0 when absent). */
function rangeEnd(header: string | null): number {
  const m = header ? /bytes=0-(\d+)/.exec(header) : null;
  return m ? Number(m[1]) + 1 : 0;
}

/** For responseType 'stream' errors the body is a stream: read it so the reason can be classified. */
async function withBody(e: unknown): Promise<unknown> {
  const err = e as GaxiosLike;
  const data = err.response?.data;
  if (data && typeof (data as Readable).pipe === 'function') {
    const chunks: Buffer[] = [];
    try {
      for await (const c of data as Readable) chunks.push(Buffer.from(c as Uint8Array));
      const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
      return { ...err, message: err.message, response: { ...err.response, data: parsed } };
    } catch {
      return e;
    }
  }
  return e;
}
