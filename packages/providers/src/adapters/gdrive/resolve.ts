/**
 * Path → id resolution. Provider paths are mapped to ids by walking from the root folder,
 * with a path ↔ id cache (IdPathIndex). Another client may move, rename or trash any
 * folder at any time, and Drive takes a write into a folder's id wherever that folder now
 * is: so on each call every cached level of the path is fetched (in parallel, one
 * files.get each) and checked (name, parent, not trashed); from the first that no longer
 * matches, the path is resolved again by name. Missing folders are created here, and a
 * folder create is settled against a concurrent one (duplicates.ts).
 */
import { AlreadyExistsError, NotFoundError, TransientError } from '../../errors.ts';
import type { KeyedMutex } from '../../keyed-mutex.ts';
import { normalizePath } from '../../paths.ts';
import { IdPathIndex } from '../id-path-index.ts';
import { type DriveApi, type DriveFile, FILE_FIELDS, FOLDER_MIME } from './api.ts';
import { settleCreate } from './duplicates.ts';

export class DriveResolver {
  readonly index = new IdPathIndex();
  private rootId: Promise<string> | undefined;

  constructor(
    private readonly api: DriveApi,
    private readonly locks: KeyedMutex,
    private readonly root: { readonly rootFolderId?: string; readonly root?: string },
  ) {}

  /** The id of the provider's root folder (its path below rootFolderId created when missing). */
  getRootId(): Promise<string> {
    this.rootId ??= (async () => {
      const base = this.root.rootFolderId ?? 'root';
      let id = base;
      if (base === 'root') {
        const o = await this.api.opts();
        id =
          (await this.api.call('root', () => this.api.drive.files.get({ fileId: 'root', fields: 'id' }, o)))
            .id ?? 'root';
      }
      const rel = normalizePath((this.root.root ?? '').replace(/^\/+|\/+$/g, ''));
      for (const seg of rel === '' ? [] : rel.split('/'))
        id = await this.ensureChildFolder(id, seg, undefined);
      return id;
    })().catch((e: unknown) => {
      this.rootId = undefined;
      throw e;
    });
    return this.rootId;
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
    const o = await this.api.opts(signal);
    const got = await Promise.all(
      cached.map(async ({ id }) => {
        try {
          return await this.api.call(
            'files.get',
            () => this.api.drive.files.get({ fileId: id, fields: FILE_FIELDS }, o),
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
  async lookup(p: string, signal?: AbortSignal): Promise<DriveFile | undefined> {
    const rootId = await this.getRootId();
    if (p === '') return { id: rootId, mimeType: FOLDER_MIME, name: '' };
    const segs = p.split('/');
    const { depth, ids, last } = await this.verifiedPrefix(segs, false, signal);
    if (depth === segs.length) return last;
    let parentId = depth === 0 ? rootId : (ids[depth - 1] as string);
    let found: DriveFile | undefined;
    for (let i = depth; i < segs.length; i++) {
      found = await this.api.child(parentId, segs[i] as string, signal);
      if (!found?.id) return undefined;
      this.index.set(segs.slice(0, i + 1).join('/'), found.id, found.mimeType === FOLDER_MIME);
      if (i < segs.length - 1) {
        if (found.mimeType !== FOLDER_MIME) return undefined;
        parentId = found.id;
      }
    }
    return found;
  }

  /** Make sure folder `name` exists under `parentId`; a file there is AlreadyExists. Returns its id. */
  private ensureChildFolder(
    parentId: string,
    name: string,
    path: string | undefined,
    signal?: AbortSignal,
  ): Promise<string> {
    const api = this.api;
    return this.locks.run([`folder:${parentId}/${name}`], async () => {
      const existing = await api.child(parentId, name, signal);
      if (existing?.id) {
        if (existing.mimeType !== FOLDER_MIME)
          throw new AlreadyExistsError(`${api.name}: a file is in the way of folder ${path ?? name}`);
        if (path !== undefined) this.index.set(path, existing.id, true);
        return existing.id;
      }
      const o = await api.opts(signal);
      const created = await api.call(
        'files.create (folder)',
        () =>
          api.drive.files.create(
            { requestBody: { name, mimeType: FOLDER_MIME, parents: [parentId] }, fields: 'id' },
            o,
          ),
        signal,
      );
      if (!created.id) throw new TransientError(`${api.name}: folder create returned no id`);
      // Another client may have made the same folder meanwhile: the older one is used.
      const winner = await settleCreate(api, parentId, name, created.id, true);
      if (winner && winner.mimeType !== FOLDER_MIME)
        throw new AlreadyExistsError(`${api.name}: a file is in the way of folder ${path ?? name}`);
      const id = winner?.id ?? created.id;
      if (path !== undefined) this.index.set(path, id, true);
      return id;
    });
  }

  /** Folder id for `dir` (its cached ids verified), creating missing folders. */
  async ensureFolders(dir: string, signal?: AbortSignal): Promise<string> {
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
}
