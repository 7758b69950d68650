/**
 * The change feed over changes.list. Drive reports each changed item's latest state by id;
 * the feed turns that into path changes: an item's path is found by walking its parents up
 * to the provider's root (folders outside the root are remembered as such), a move is a
 * delete at the old path and an upsert at the new one, and what a moved folder holds is
 * listed (id-feed.ts). Cursors are Drive page tokens behind the prefix `gd1:`.
 */
import type { drive_v3 } from 'googleapis';
import { InvalidArgumentError, NotFoundError, TransientError } from '../../errors.ts';
import { type Change, type ChangePage, type Provider, resetPage } from '../../provider.ts';
import { withFolderContents } from '../id-feed.ts';
import { type DriveApi, type DriveFile, FILE_FIELDS, FOLDER_MIME, toEntry, validName } from './api.ts';
import type { DriveResolver } from './resolve.ts';

const CURSOR_PREFIX = 'gd1:';

export class DriveChangeFeed {
  /** Parents of folders outside the root seen by the change feed (id → parent id or null). */
  private readonly foreignParents = new Map<string, string | null>();
  /** Moves made through this provider, not yet seen in the feed: id → old path. */
  private readonly movedFrom = new Map<string, string>();

  constructor(
    private readonly api: DriveApi,
    private readonly resolver: DriveResolver,
    /** The provider, to list what a moved folder holds. */
    private readonly provider: Provider,
  ) {}

  /** The provider moved item `id` away from `from`: the feed reports the delete there. */
  noteMove(id: string, from: string): void {
    this.movedFrom.set(id, from);
  }

  async latestCursor(options: { signal?: AbortSignal } = {}): Promise<string> {
    await this.resolver.getRootId();
    const o = await this.api.opts(options.signal);
    const out = await this.api.call(
      'changes.getStartPageToken',
      () => this.api.drive.changes.getStartPageToken({}, o),
      options.signal,
    );
    if (!out.startPageToken) throw new TransientError(`${this.api.name}: no startPageToken`);
    return CURSOR_PREFIX + out.startPageToken;
  }

  /** Provider path of a file from the feed: walk its parents up to our root (undefined when outside). */
  private async feedPath(f: DriveFile, signal?: AbortSignal): Promise<string | undefined> {
    const index = this.resolver.index;
    const rootId = await this.resolver.getRootId();
    const name = validName(f.name);
    const parent = f.parents?.[0];
    if (name === undefined || !parent) return undefined;
    if (parent === rootId) return name;
    const known = index.pathOf(parent);
    if (known !== undefined) return `${known}/${name}`;
    // Walk up through folders we have not seen, remembering the ones outside the root.
    const chain: DriveFile[] = [];
    let cur: string | null = parent;
    for (let depth = 0; cur && depth < 64; depth++) {
      if (cur === rootId) break;
      const k = index.pathOf(cur);
      if (k !== undefined) break;
      if (this.foreignParents.has(cur) && this.foreignParents.get(cur) === null) return undefined;
      const o = await this.api.opts(signal);
      const fileId: string = cur;
      let folder: DriveFile;
      try {
        folder = await this.api.call(
          'files.get',
          () => this.api.drive.files.get({ fileId, fields: 'id,name,parents,mimeType,trashed' }, o),
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
    let base = cur === rootId ? '' : (index.pathOf(cur) ?? '');
    for (const c of chain.reverse()) {
      const n = validName(c.name);
      if (n === undefined || !c.id) return undefined;
      base = base === '' ? n : `${base}/${n}`;
      index.set(base, c.id, true);
    }
    return base === '' ? name : `${base}/${name}`;
  }

  async changes(cursor: string, options: { signal?: AbortSignal; limit?: number } = {}): Promise<ChangePage> {
    const index = this.resolver.index;
    const reset = async (): Promise<ChangePage> => resetPage(await this.latestCursor(options));
    if (!cursor.startsWith(CURSOR_PREFIX)) return reset();
    const rootId = await this.resolver.getRootId();
    let page: drive_v3.Schema$ChangeList;
    try {
      const o = await this.api.opts(options.signal);
      page = await this.api.call(
        'changes.list',
        () =>
          this.api.drive.changes.list(
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
      const holder = index.get(path);
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
      if (!was.has(id)) was.set(id, this.movedFrom.get(id) ?? index.lastPathOf(id));
    }
    // changes.list gives each item's latest state in the order of its last change, so a file
    // changed before its folder moved comes first: the page's folders are placed first (twice,
    // for a folder inside a moved folder), and every item is resolved under their new paths.
    for (let pass = 0; pass < 2; pass++) {
      for (const c of changes) {
        if (!c.file || c.removed || c.file.trashed || c.file.mimeType !== FOLDER_MIME) continue;
        const now = await this.feedPath(c.file, options.signal);
        if (now !== undefined && c.file.id) index.set(now, c.file.id, true);
      }
    }
    for (const c of changes) {
      const id = (c.fileId ?? c.file?.id) as string;
      const before = was.get(id);
      this.movedFrom.delete(id);
      if (c.removed || !c.file || c.file.trashed) {
        if (before !== undefined) pushDelete(before, id);
        index.drop(id);
        continue;
      }
      const now = await this.feedPath(c.file, options.signal);
      if (before !== undefined && before !== now) pushDelete(before, id);
      if (now === undefined) {
        index.drop(id);
        continue;
      }
      const dir = c.file.mimeType === FOLDER_MIME;
      index.set(now, id, dir);
      out.push({ type: 'upsert', path: now, entry: toEntry(now, c.file) });
      if (dir && before !== now) folders.push(now);
    }
    const next = page.nextPageToken ?? page.newStartPageToken;
    if (!next) throw new TransientError(`${this.api.name}: changes.list returned no token`);
    return {
      changes: await withFolderContents(this.provider, out, folders, options.signal),
      cursor: CURSOR_PREFIX + next,
      hasMore: Boolean(page.nextPageToken),
      reset: false,
    };
  }
}
