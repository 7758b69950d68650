/**
 * The change feed over `delta` on the root folder. Graph reports each changed item's latest
 * state by id; the feed turns that into path changes: an item's path is its parent's (from
 * the path ↔ id index, or a walk up by id) plus its name, a move is a delete at the old path
 * and an upsert at the new one, and what a moved folder holds is listed (id-feed.ts).
 * Cursors are `@odata.nextLink`/`@odata.deltaLink` behind the prefix `od1:`; 410
 * resyncRequired is the contract's reset.
 */
import type { z } from 'zod';
import { InvalidArgumentError, NotFoundError, TransientError } from '../../errors.ts';
import { type Change, type ChangePage, type Provider, resetPage } from '../../provider.ts';
import { withFolderContents } from '../id-feed.ts';
import type { IdPathIndex } from '../id-path-index.ts';
import { CURSOR_PREFIX, type GraphCalls, type Item, ItemPage, parseItem, toEntry, validName } from './api.ts';
import { graphStatus } from './errors.ts';

export class OneDriveChangeFeed {
  /** Moves made through this provider, not yet seen in the feed: id → old path. */
  private readonly movedFrom = new Map<string, string>();

  constructor(
    private readonly g: GraphCalls,
    private readonly index: IdPathIndex,
    private readonly rootId: (signal?: AbortSignal) => Promise<string>,
    /** The provider, to list what a moved folder holds. */
    private readonly provider: Provider,
  ) {}

  /** The provider moved item `id` away from `from`: the feed reports the delete there. */
  noteMove(id: string, from: string): void {
    this.movedFrom.set(id, from);
  }

  private deltaBase(rootId: string): string {
    return `/me/drive/items/${encodeURIComponent(rootId)}/delta`;
  }

  async latestCursor(options: { signal?: AbortSignal } = {}): Promise<string> {
    const rootId = await this.rootId(options.signal);
    const page = ItemPage.parse(
      await this.g.call(
        'delta latest',
        () => this.g.client.api(this.deltaBase(rootId)).query({ token: 'latest' }).get() as Promise<unknown>,
        options.signal,
      ),
    );
    const link = page['@odata.deltaLink'] ?? page['@odata.nextLink'];
    if (!link) throw new TransientError(`${this.g.name}: delta gave no link`);
    return CURSOR_PREFIX + link;
  }

  /** Provider path of a delta item: parent path (index, or a walk up by id) + name. */
  private async itemPathOf(it: Item, rootId: string, signal?: AbortSignal): Promise<string | undefined> {
    const name = validName(it.name);
    const parent = it.parentReference?.id;
    if (name === undefined || !parent) return undefined;
    if (parent === rootId) return name;
    const known = this.index.pathOf(parent);
    if (known !== undefined) return `${known}/${name}`;
    const chain: Item[] = [];
    let cur: string | undefined = parent;
    for (let depth = 0; cur && cur !== rootId && depth < 64; depth++) {
      if (this.index.pathOf(cur) !== undefined) break;
      const id: string = cur;
      const got = await this.g
        .call(
          `get item ${id}`,
          () => this.g.client.api(`/me/drive/items/${encodeURIComponent(id)}`).get() as Promise<unknown>,
          signal,
        )
        .catch((e: unknown) => {
          if (e instanceof NotFoundError) return undefined;
          throw e;
        });
      if (!got) return undefined;
      const folder = parseItem(this.g.name, got);
      if (folder.root) return undefined; // reached the drive root: outside our folder
      chain.push(folder);
      cur = folder.parentReference?.id;
    }
    if (!cur) return undefined;
    let base = cur === rootId ? '' : (this.index.pathOf(cur) ?? '');
    for (const c of chain.reverse()) {
      const n = validName(c.name);
      if (n === undefined) return undefined;
      base = base === '' ? n : `${base}/${n}`;
      this.index.set(base, c.id, true);
    }
    return base === '' ? name : `${base}/${name}`;
  }

  async changes(cursor: string, options: { signal?: AbortSignal; limit?: number } = {}): Promise<ChangePage> {
    const reset = async (): Promise<ChangePage> => resetPage(await this.latestCursor(options));
    if (!cursor.startsWith(CURSOR_PREFIX)) return reset();
    const rootId = await this.rootId(options.signal);
    const link = cursor.slice(CURSOR_PREFIX.length);
    let page: z.infer<typeof ItemPage>;
    try {
      page = ItemPage.parse(
        await this.g.call('delta', () => this.g.client.api(link).get() as Promise<unknown>, options.signal),
      );
    } catch (e) {
      const { status } = graphStatus((e as { cause?: unknown }).cause);
      if (status === 410 || e instanceof InvalidArgumentError) return reset();
      throw e;
    }
    const out: Change[] = [];
    const folders: string[] = [];
    const pushDelete = (path: string, id: string): void => {
      const holder = this.index.get(path);
      if (holder && holder.id !== id) return;
      out.push({ type: 'delete', path });
    };
    const items = page.value
      .map((raw) => parseItem(this.g.name, raw))
      .filter((it) => it.id !== rootId && !it.root);
    // Where each item was before this page, read before the index learns the page's folders.
    const was = new Map<string, string | undefined>();
    for (const it of items) {
      if (!was.has(it.id)) was.set(it.id, this.movedFrom.get(it.id) ?? this.index.lastPathOf(it.id));
    }
    // A page lists each item's latest state in the order of its last change, so a file
    // changed before its folder moved comes first: the page's folders are placed first (twice,
    // for a folder inside a moved folder), and every item is resolved under their new paths.
    for (let pass = 0; pass < 2; pass++) {
      for (const it of items) {
        if (!it.folder || it.deleted) continue;
        const now = await this.itemPathOf(it, rootId, options.signal);
        if (now !== undefined) this.index.set(now, it.id, true);
      }
    }
    for (const it of items) {
      const before = was.get(it.id);
      this.movedFrom.delete(it.id);
      if (it.deleted) {
        if (before !== undefined) pushDelete(before, it.id);
        this.index.drop(it.id);
        continue;
      }
      const now = await this.itemPathOf(it, rootId, options.signal);
      if (before !== undefined && before !== now) pushDelete(before, it.id);
      if (now === undefined) {
        this.index.drop(it.id);
        continue;
      }
      this.index.set(now, it.id, Boolean(it.folder));
      out.push({ type: 'upsert', path: now, entry: toEntry(now, it) });
      if (it.folder && before !== now) folders.push(now);
    }
    const next = page['@odata.nextLink'] ?? page['@odata.deltaLink'];
    if (!next) throw new TransientError(`${this.g.name}: delta gave no link`);
    return {
      changes: await withFolderContents(this.provider, out, folders, options.signal),
      cursor: CURSOR_PREFIX + next,
      hasMore: page['@odata.nextLink'] !== undefined,
      reset: false,
    };
  }
}
