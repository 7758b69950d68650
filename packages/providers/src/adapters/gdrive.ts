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
 *
 * The parts (after rclone's backend/drive): gdrive/api.ts (clients, calls, item helpers),
 * gdrive/errors.ts (classification), gdrive/resolve.ts (path → id, folder creation),
 * gdrive/duplicates.ts (settling a create against a concurrent one), gdrive/upload.ts
 * (multipart, resumable, If-Match), gdrive/changes.ts (the change feed); this file holds
 * the contract's operations.
 */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { checkBody, openBody, readRange, rechunk, throwIfAborted } from '../body.ts';
import {
  AlreadyExistsError,
  InvalidPathError,
  NotFoundError,
  NotSupportedError,
  PreconditionFailedError,
  TransientError,
} from '../errors.ts';
import type { Features } from '../features.ts';
import { KeyedMutex } from '../keyed-mutex.ts';
import { baseName, isWithin, normalizeEntryPath, normalizePath, parentPath } from '../paths.ts';
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
import {
  DriveApi,
  type DriveFile,
  FILE_FIELDS,
  FOLDER_MIME,
  owner,
  toEntry,
  validName,
} from './gdrive/api.ts';
import { type GDriveProviderOptions } from './gdrive/api.ts';
import { DriveChangeFeed } from './gdrive/changes.ts';
import { settleCreate } from './gdrive/duplicates.ts';
import { classifyGDrive, withBody } from './gdrive/errors.ts';
import { DriveResolver } from './gdrive/resolve.ts';
import { etagAt, resumable, underIfMatch, upload, type WriteTarget } from './gdrive/upload.ts';

export { classifyGDrive } from './gdrive/errors.ts';
export type { GDriveProviderOptions } from './gdrive/api.ts';

const KiB = 1024;
const MiB = 1024 * KiB;

export class GDriveProvider implements Provider {
  readonly name: string;
  readonly features: Features;
  private readonly api: DriveApi;
  private readonly chunkSize: number;
  private readonly locks = new KeyedMutex();
  private readonly resolve: DriveResolver;
  private readonly feed: DriveChangeFeed;

  constructor(private readonly options: GDriveProviderOptions) {
    this.chunkSize = options.chunkSize ?? 8 * MiB;
    if (this.chunkSize % (256 * KiB) !== 0) throw new RangeError('chunkSize must be a multiple of 256 KiB');
    this.name = `gdrive:${options.rootFolderId ?? 'root'}/${options.root ?? ''}`;
    this.api = new DriveApi(this.name, options);
    this.resolve = new DriveResolver(this.api, this.locks, options);
    this.feed = new DriveChangeFeed(this.api, this.resolve, this);
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

  /** The Drive v3 client (googleapis). */
  get drive(): DriveApi['drive'] {
    return this.api.drive;
  }

  async *list(dir: string, options: ListOptions = {}): AsyncIterable<Entry> {
    const d = normalizePath(dir);
    const folder = await this.resolve.lookup(d, options.signal);
    if (!folder?.id || folder.mimeType !== FOLDER_MIME)
      throw new NotFoundError(`${this.name}: folder not found: ${d}`);
    const queue: { path: string; id: string }[] = [{ path: d, id: folder.id }];
    while (queue.length > 0) {
      const { path, id } = queue.shift() as { path: string; id: string };
      const byName = new Map<string, DriveFile[]>();
      for (const f of await this.api.children(id, undefined, options.signal)) {
        const name = validName(f.name);
        if (name === undefined || !f.id) continue;
        const list = byName.get(name) ?? [];
        list.push(f);
        byName.set(name, list);
      }
      for (const [name, files] of [...byName].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
        const f = owner(files) as DriveFile & { id: string };
        const p = path === '' ? name : `${path}/${name}`;
        this.resolve.index.set(p, f.id, f.mimeType === FOLDER_MIME);
        throwIfAborted(options.signal);
        yield toEntry(p, f);
        if (options.recursive && f.mimeType === FOLDER_MIME) queue.push({ path: p, id: f.id });
      }
    }
  }

  async stat(path: string, options: { signal?: AbortSignal } = {}): Promise<Entry> {
    const p = normalizeEntryPath(path);
    const f = await this.resolve.lookup(p, options.signal);
    if (!f) throw new NotFoundError(`${this.name}: not found: ${p}`);
    return toEntry(p, f);
  }

  async read(path: string, options: ReadOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    const p = normalizeEntryPath(path);
    const { offset, length } = readRange(options);
    const f = await this.resolve.lookup(p, options.signal);
    if (!f?.id || f.mimeType === FOLDER_MIME) throw new NotFoundError(`${this.name}: no file at ${p}`);
    const size = Number(f.size ?? 0);
    if (length === 0 || offset >= size) return (async function* () {})();
    const headers: Record<string, string> =
      offset === 0 && length === undefined
        ? {}
        : { range: `bytes=${offset}-${length === undefined ? '' : offset + length - 1}` };
    const fileId = f.id;
    const o = await this.api.opts(options.signal);
    let stream: Readable;
    try {
      const res = await this.api.drive.files.get(
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
      const parentId = await this.resolve.ensureFolders(parentPath(p), options.signal);
      const existing = await this.api.child(parentId, baseName(p), options.signal);
      if (existing?.mimeType === FOLDER_MIME)
        throw new AlreadyExistsError(`${this.name}: a folder exists at ${p}`);
      if (options.ifNotExists && existing) throw new AlreadyExistsError(`${this.name}: ${p} exists`);
      let target: WriteTarget = existing?.id
        ? { kind: 'update', fileId: existing.id }
        : { kind: 'create', parentId };
      if (options.ifRevision !== undefined) {
        if (!existing?.id) throw new NotFoundError(`${this.name}: conditional write on missing ${p}`);
        const etag = await etagAt(this.api, p, existing.id, parentId, options.ifRevision, options.signal);
        target = { kind: 'update', fileId: existing.id, etag };
      }
      const modifiedTime =
        options.modifiedMs !== undefined ? new Date(options.modifiedMs).toISOString() : undefined;
      let result: DriveFile;
      if (second.done) {
        checkBody(this.name, p, options, firstChunk.byteLength, sha.digest('hex'));
        result = await upload(this.api, p, target, modifiedTime, firstChunk, options.signal);
      } else {
        result = await resumable(
          this.api,
          p,
          target,
          modifiedTime,
          firstChunk,
          second.value,
          parts,
          sha,
          options,
        );
      }
      if (!result.id) throw new TransientError(`${this.name}: write ${p}: no id returned`);
      if (target.kind === 'create' && options.ifNotExists) {
        if (await settleCreate(this.api, parentId, baseName(p), result.id, false))
          throw new AlreadyExistsError(`${this.name}: ${p} was created meanwhile by another client`);
      }
      this.resolve.index.set(p, result.id, false);
      return toEntry(p, result);
    });
  }

  /**
   * The etag of file `fileId` if it is still at `p` (in `parentId`) and at revision `want`:
   * etag and revision come from one v2 read, so a write under If-Match on that etag makes
   * the revision check and the write one step on the server. Else PreconditionFailed
   * (NotFound when the file is gone).
   */
  async remove(path: string, options: RemoveOptions = {}): Promise<void> {
    const p = normalizeEntryPath(path);
    await this.locks.run([`path:${p}`], async () => {
      const f = await this.resolve.lookup(p, options.signal);
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
        const etag = await etagAt(
          this.api,
          p,
          fileId,
          f.parents?.[0] ?? undefined,
          options.ifRevision,
          options.signal,
        );
        const o = await this.api.opts(options.signal);
        const headers = { 'If-Match': etag };
        if (this.options.useTrash ?? true) {
          await underIfMatch(
            this.api,
            p,
            'files.update (v2, trash, If-Match)',
            () =>
              this.api.driveV2.files.update(
                { fileId, requestBody: { labels: { trashed: true } }, fields: 'id' },
                { ...o, headers },
              ),
            options.signal,
          );
        } else {
          await underIfMatch(
            this.api,
            p,
            'files.delete (v2, If-Match)',
            () => this.api.driveV2.files.delete({ fileId }, { ...o, headers }),
            options.signal,
          );
        }
      } else await this.api.discard(fileId, options.signal);
      this.resolve.index.forget(p);
    });
  }

  async mkdir(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const p = normalizeEntryPath(path);
    await this.resolve.ensureFolders(p, options.signal);
  }

  async move(from: string, to: string, options: TransferOptions = {}): Promise<Entry> {
    const f = normalizeEntryPath(from);
    const t = normalizeEntryPath(to);
    if (t !== f && isWithin(t, f))
      throw new InvalidPathError(`${this.name}: cannot put ${f} inside itself`, t);
    return this.locks.run([`path:${f}`, `path:${t}`], async () => {
      const src = await this.resolve.lookup(f, options.signal);
      if (!src?.id) throw new NotFoundError(`${this.name}: not found: ${f}`);
      const parentId = await this.resolve.ensureFolders(parentPath(t), options.signal);
      const dst = await this.api.child(parentId, baseName(t), options.signal);
      if (dst?.id && dst.id !== src.id) {
        if (dst.mimeType === FOLDER_MIME || src.mimeType === FOLDER_MIME || !options.overwrite) {
          throw new AlreadyExistsError(`${this.name}: ${t} exists`);
        }
        await this.api.discard(dst.id, options.signal);
        this.resolve.index.forget(t);
      }
      const oldParent = src.parents?.[0];
      const o = await this.api.opts(options.signal);
      const moved = await this.api.call(
        'files.update (move)',
        () =>
          this.api.drive.files.update(
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
      this.feed.noteMove(src.id, f);
      this.resolve.index.forget(f);
      this.resolve.index.set(t, src.id, src.mimeType === FOLDER_MIME);
      return toEntry(t, moved);
    });
  }

  async copy(from: string, to: string, options: TransferOptions = {}): Promise<Entry> {
    const f = normalizeEntryPath(from);
    const t = normalizeEntryPath(to);
    if (t === f) throw new AlreadyExistsError(`${this.name}: ${t} exists`);
    return this.locks.run([`path:${t}`], async () => {
      const src = await this.resolve.lookup(f, options.signal);
      if (!src?.id) throw new NotFoundError(`${this.name}: not found: ${f}`);
      if (src.mimeType === FOLDER_MIME)
        throw new NotSupportedError(`${this.name}: Drive cannot copy folders (features.copy = 'files')`);
      const parentId = await this.resolve.ensureFolders(parentPath(t), options.signal);
      const dst = await this.api.child(parentId, baseName(t), options.signal);
      if (dst?.id) {
        if (dst.mimeType === FOLDER_MIME || !options.overwrite)
          throw new AlreadyExistsError(`${this.name}: ${t} exists`);
        await this.api.discard(dst.id, options.signal);
      }
      const o = await this.api.opts(options.signal);
      const copied = await this.api.call(
        'files.copy',
        () =>
          this.api.drive.files.copy(
            {
              fileId: src.id as string,
              requestBody: { name: baseName(t), parents: [parentId] },
              fields: FILE_FIELDS,
            },
            o,
          ),
        options.signal,
      );
      if (copied.id) this.resolve.index.set(t, copied.id, false);
      return toEntry(t, copied);
    });
  }

  latestCursor(options: { signal?: AbortSignal } = {}): Promise<string> {
    return this.feed.latestCursor(options);
  }

  changes(cursor: string, options: { signal?: AbortSignal; limit?: number } = {}): Promise<ChangePage> {
    return this.feed.changes(cursor, options);
  }
}
