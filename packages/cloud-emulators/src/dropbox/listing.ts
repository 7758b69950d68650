/**
 * The Dropbox emulator's listing and change feed: list_folder (recursive or not) and
 * list_folder/continue over cursors that encode a position in the tree's change log,
 * get_latest_cursor, and list_folder/longpoll (answered when a change lands in the cursor's
 * scope, or at its timeout). expireCursors() makes every cursor issued so far `reset`.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { HttpError } from '../http.ts';
import { type TreeNode, foldName } from '../tree.ts';
import { Path, type ListCursor, routeError, lookupError, badRequest } from './protocol.ts';
import { DropboxUploads } from './uploads.ts';

/** The argument of list_folder and of get_latest_cursor (the listing it would start). */
const ListFolderArg = z
  .object({
    path: Path,
    recursive: z.boolean().default(false),
    limit: z.number().int().min(1).max(2000).optional(),
  })
  .passthrough();

export abstract class DropboxListing extends DropboxUploads {
  private readonly snapshots = new Map<string, { entries: unknown[]; seq: number }>();
  private epoch = 1;

  override expireCursors(): void {
    this.epoch += 1;
    this.snapshots.clear();
  }

  // ---- listing and the change feed ----

  protected encodeCursor(c: ListCursor): string {
    return 'AAE' + Buffer.from(JSON.stringify(c)).toString('base64url');
  }

  protected decodeCursor(raw: string, endpoint: string): ListCursor {
    const bad = (): HttpError => badRequest(endpoint, 'request body: cursor: Invalid cursor');
    if (!raw.startsWith('AAE')) throw bad();
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.from(raw.slice(3), 'base64url').toString('utf8'));
    } catch {
      throw bad();
    }
    const r = z
      .object({
        p: z.string(),
        r: z.boolean(),
        s: z.number(),
        k: z.string().optional(),
        o: z.number().optional(),
        e: z.number(),
        l: z.number(),
      })
      .safeParse(parsed);
    if (!r.success) throw bad();
    return r.data;
  }

  protected folderFor(path: string, endpoint: string): TreeNode {
    const node = this.lookup(path, endpoint);
    if (!node) throw lookupError('path', 'not_found');
    if (node.kind !== 'folder') throw lookupError('path', 'not_folder');
    return node;
  }

  protected inScope(recordPath: string, c: ListCursor): boolean {
    const p = foldName(recordPath);
    if (c.p === '') return c.r || p.lastIndexOf('/') === 0;
    if (!p.startsWith(c.p + '/')) return false;
    return c.r || p.lastIndexOf('/') === c.p.length;
  }

  protected listFolder(arg: unknown): unknown {
    const a = this.parse(ListFolderArg, arg, 'files/list_folder');
    const folder = this.folderFor(a.path, 'files/list_folder');
    const nodes = a.recursive ? this.tree.subtree(folder).slice(1) : this.tree.children(folder.id);
    const entries = nodes.map((n) => this.metadata(n));
    const key = randomBytes(9).toString('base64url');
    this.snapshots.set(key, { entries, seq: this.tree.seq });
    if (this.snapshots.size > 1000) this.snapshots.delete(this.snapshots.keys().next().value as string);
    const cursor: ListCursor = {
      p: foldName(this.tree.pathOf(folder)),
      r: a.recursive,
      s: this.tree.seq,
      k: key,
      o: 0,
      e: this.epoch,
      l: a.limit ?? this.opts.defaultListLimit ?? 500,
    };
    return this.page(cursor);
  }

  protected page(c: ListCursor): { entries: unknown[]; cursor: string; has_more: boolean } {
    if (c.k !== undefined) {
      const snap = this.snapshots.get(c.k);
      if (!snap) throw routeError(['reset'], { '.tag': 'reset' });
      const start = c.o ?? 0;
      const entries = snap.entries.slice(start, start + c.l);
      const end = start + entries.length;
      if (end < snap.entries.length) {
        return { entries, cursor: this.encodeCursor({ ...c, o: end }), has_more: true };
      }
      this.snapshots.delete(c.k);
      return {
        entries,
        cursor: this.encodeCursor({ p: c.p, r: c.r, s: snap.seq, e: c.e, l: c.l }),
        has_more: false,
      };
    }
    // Changes since c.s, collapsed to the latest state of each path, in the order of their last change.
    const {
      records,
      lastSeq: last,
      more,
    } = this.tree.latestChanges(
      c.s,
      c.l,
      (rec) => foldName(rec.path),
      (rec) => !this.inScope(rec.path, c),
    );
    const entries: unknown[] = [];
    for (const rec of records) {
      const node = this.tree.get(rec.id);
      const name = rec.path.slice(rec.path.lastIndexOf('/') + 1);
      if (rec.deleted || !node) {
        entries.push({ '.tag': 'deleted', name, path_lower: foldName(rec.path), path_display: rec.path });
      } else {
        entries.push(this.metadata(node));
      }
    }
    return {
      entries,
      cursor: this.encodeCursor({ p: c.p, r: c.r, s: last, e: c.e, l: c.l }),
      has_more: more,
    };
  }

  protected checkCursor(c: ListCursor): void {
    if (c.e !== this.epoch || (c.k === undefined && c.s < this.tree.oldestSeq())) {
      throw routeError(['reset'], { '.tag': 'reset' });
    }
    const folder = c.p === '' ? this.tree.root : this.tree.resolve(c.p);
    if (!folder) throw lookupError('path', 'not_found');
  }

  protected listContinue(arg: unknown): unknown {
    const a = this.parse(z.object({ cursor: z.string().min(1) }), arg, 'files/list_folder/continue');
    const c = this.decodeCursor(a.cursor, 'files/list_folder/continue');
    this.checkCursor(c);
    return this.page(c);
  }

  protected latestCursor(arg: unknown): unknown {
    const a = this.parse(ListFolderArg, arg, 'files/list_folder/get_latest_cursor');
    const folder = this.folderFor(a.path, 'files/list_folder/get_latest_cursor');
    return {
      cursor: this.encodeCursor({
        p: foldName(this.tree.pathOf(folder)),
        r: a.recursive,
        s: this.tree.seq,
        e: this.epoch,
        l: a.limit ?? this.opts.defaultListLimit ?? 500,
      }),
    };
  }

  protected hasChanges(c: ListCursor): boolean {
    for (let i = this.tree.log.length - 1; i >= 0; i--) {
      const rec = this.tree.log[i];
      if (!rec || rec.seq <= c.s) break;
      if (this.inScope(rec.path, c)) return true;
    }
    return false;
  }

  protected async longpoll(arg: unknown): Promise<unknown> {
    const a = this.parse(
      z.object({ cursor: z.string().min(1), timeout: z.number().int().min(30).max(480).default(30) }),
      arg,
      'files/list_folder/longpoll',
    );
    const c = this.decodeCursor(a.cursor, 'files/list_folder/longpoll');
    if (c.k !== undefined)
      throw badRequest('files/list_folder/longpoll', 'cursor: must be a cursor from the end of a listing');
    this.checkCursor(c);
    const backoff = this.opts.longpollBackoffSeconds;
    if (this.hasChanges(c)) return { changes: true, ...(backoff ? { backoff } : {}) };
    const ms = a.timeout * 1000 * this.longpollTimeScale;
    const changed = await new Promise<boolean>((resolve) => {
      const done = (v: boolean): void => {
        clearTimeout(timer);
        this.waiters.delete(onChange);
        resolve(v);
      };
      const onChange = (): void => {
        if (this.hasChanges(c)) done(true);
      };
      const timer = setTimeout(() => done(false), ms);
      timer.unref();
      this.waiters.add(onChange);
    });
    if (changed) return { changes: true, ...(backoff ? { backoff } : {}) };
    return { changes: false, backoff: backoff ?? 0 };
  }
}
