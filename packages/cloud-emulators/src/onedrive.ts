/**
 * Microsoft Graph (OneDrive) emulator, served over HTTPS (the Graph SDK refuses plain
 * http). Follows https://learn.microsoft.com/graph/api/resources/driveitem :
 * - items by path `/me/drive/root:/{path}:` and by id `/me/drive/items/{id}`, with
 *   `/children` (paged by `$top`, `@odata.nextLink`), `/content`, `/createUploadSession`,
 *   `/delta`; PATCH to rename/move, DELETE, POST children to create folders;
 * - simple upload `PUT …:/content` with `If-Match` → 412 and
 *   `@microsoft.graph.conflictBehavior` (fail → 409 nameAlreadyExists); missing parent
 *   folders are created;
 * - upload sessions: `uploadUrl` on another host (127.0.0.1 while the API is `localhost`,
 *   so the SDK does not send the Authorization header there), fragments in order in
 *   multiples of 320 KiB, 202 with `nextExpectedRanges`, 201/200 on completion, 416 for a
 *   fragment out of order, GET for status, DELETE to cancel;
 * - downloads: `GET …/content` answers 302 to a pre-authenticated URL, which honours Range;
 * - `delta` with `@odata.nextLink` / `@odata.deltaLink`, `deleted` facets, and 410
 *   `resyncRequired` for an expired token;
 * - `eTag` (changes with content or metadata), `cTag` (content), `file.hashes`
 *   (quickXorHash, sha1Hash, sha256Hash), errors `{"error": {"code", "message", "innerError"}}`.
 * Names are case-insensitive; the characters " * : < > ? / \ | are refused.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { HttpError, sendContent, type Exchange, type Route } from './http.ts';
import { type TreeNode, foldName } from './tree.ts';
import {
  DRIVE_ID,
  ROOT_ID,
  graphError,
  notFound,
  ItemPatch,
  NewFolder,
  decodeURIComponentSafe,
} from './onedrive/protocol.ts';
import { OneDriveUploads } from './onedrive/uploads.ts';

export { parseEntityTags } from './http.ts';
export type { OneDriveEmulatorOptions } from './onedrive/protocol.ts';

/**
 * Split along the API's route groups: onedrive/protocol.ts (schemas, errors, name rules),
 * onedrive/model.ts (items, addressing, the store rule), onedrive/uploads.ts (simple upload,
 * upload sessions); this class holds the route table, the fault and auth answers, reads,
 * listing, folders, patch/delete, asynchronous copy and the delta feed.
 */
export class OneDriveEmulator extends OneDriveUploads {
  private readonly downloads = new Map<string, { id: string; expires: number }>();
  /** Copy jobs: the copy is made at once; the monitor reports inProgress once, then completed. */
  private readonly copies = new Map<string, { resourceId: string; polls: number }>();
  private epoch = 1;

  override flush(): void {
    this.tree.save();
  }

  override expireCursors(): void {
    this.epoch += 1;
  }

  protected override faultResponse(
    status: number,
    reason: string | undefined,
  ): { body: unknown; headers?: Record<string, string> } {
    const code =
      reason ??
      (status === 429 ? 'activityLimitReached' : status === 503 ? 'serviceNotAvailable' : 'generalException');
    const message =
      status === 429
        ? 'The request has been throttled'
        : status === 503
          ? 'Service unavailable'
          : 'An unspecified error has occurred.';
    const body = graphError(status, code, message).body as object;
    // Graph's 429 always carries a suggested wait (learn.microsoft.com/graph/throttling); a
    // rule's retryAfterSeconds replaces this default.
    return status === 429 ? { body, headers: { 'retry-after': '1' } } : { body };
  }

  protected override authError(expired: boolean): HttpError {
    return graphError(
      401,
      'InvalidAuthenticationToken',
      expired ? 'Lifetime validation failed, the token is expired.' : 'Access token is empty or invalid.',
    );
  }

  protected override route(x: { method: string; url: URL }): Route | undefined {
    const p = x.url.pathname;
    const m = x.method;
    let r: RegExpExecArray | null;
    if ((r = /^\/up\/([\w-]+)$/.exec(p))) {
      const id = r[1] as string;
      return { endpoint: 'uploadSession', noAuth: true, handle: (ex) => this.sessionRequest(ex, id) };
    }
    if ((r = /^\/monitor\/([\w-]+)$/.exec(p)) && m === 'GET') {
      const id = r[1] as string;
      return { endpoint: 'copy.monitor', noAuth: true, handle: (ex) => this.monitor(ex, id) };
    }
    if ((r = /^\/dl\/([\w-]+)$/.exec(p)) && m === 'GET') {
      const token = r[1] as string;
      return { endpoint: 'download', noAuth: true, handle: (ex) => this.download(ex, token) };
    }
    const drive = /^\/v1\.0\/(?:me\/drive|drive|drives\/[^/]+)(\/.*)$/.exec(p);
    if (!drive) return undefined;
    const rest = decodeURIComponentSafe(drive[1] as string);
    const item =
      /^\/(root|items\/([^/:]+))(?::(\/[^:]*?)(?::)?)?(?:\/(children|content|createUploadSession|delta|copy))?$/.exec(
        rest,
      );
    if (!item) return undefined;
    const base = item[2] ?? ROOT_ID;
    const rel = item[3];
    const action = item[4];
    const target = { base, rel };
    switch (action) {
      case undefined:
        if (m === 'GET') return { endpoint: 'driveItem.get', handle: (ex) => this.getItem(ex, target) };
        if (m === 'PATCH')
          return { endpoint: 'driveItem.update', handle: (ex) => this.patchItem(ex, target) };
        if (m === 'DELETE')
          return { endpoint: 'driveItem.delete', handle: (ex) => this.deleteItem(ex, target) };
        return undefined;
      case 'children':
        if (m === 'GET') return { endpoint: 'driveItem.children', handle: (ex) => this.children(ex, target) };
        if (m === 'POST')
          return { endpoint: 'driveItem.createFolder', handle: (ex) => this.createFolder(ex, target) };
        return undefined;
      case 'content':
        if (m === 'GET')
          return { endpoint: 'driveItem.content.get', handle: (ex) => this.contentRedirect(ex, target) };
        if (m === 'PUT')
          return { endpoint: 'driveItem.content.put', handle: (ex) => this.simpleUpload(ex, target) };
        return undefined;
      case 'createUploadSession':
        if (m === 'POST')
          return {
            endpoint: 'driveItem.createUploadSession',
            handle: (ex) => this.createSession(ex, target),
          };
        return undefined;
      case 'delta':
        if (m === 'GET') return { endpoint: 'driveItem.delta', handle: (ex) => this.delta(ex, target) };
        return undefined;
      case 'copy':
        if (m === 'POST') return { endpoint: 'driveItem.copy', handle: (ex) => this.copy(ex, target) };
        return undefined;
    }
    return undefined;
  }

  // ---- handlers ----

  private async getItem(x: Exchange, t: { base: string; rel: string | undefined }): Promise<void> {
    const n = this.mustResolve(t);
    const out = this.item(n);
    if (n.kind === 'file') out['@microsoft.graph.downloadUrl'] = this.downloadUrl(n);
    await x.sendJson(200, this.select(x, out), { etag: this.etag(n) });
  }

  private select(x: Exchange, item: Record<string, unknown>): Record<string, unknown> {
    const sel = x.url.searchParams.get('$select');
    if (!sel) return item;
    const keep = new Set(sel.split(',').map((s) => s.trim()));
    return Object.fromEntries(Object.entries(item).filter(([k]) => keep.has(k) || k.startsWith('@')));
  }

  private downloadUrl(n: TreeNode): string {
    const token = randomBytes(18).toString('base64url').replace(/_/g, '-');
    this.downloads.set(token, { id: n.id, expires: Date.now() + 3600_000 });
    if (this.downloads.size > 20_000) this.downloads.delete(this.downloads.keys().next().value as string);
    return `${this.transferOrigin}/dl/${token}`;
  }

  private async contentRedirect(x: Exchange, t: { base: string; rel: string | undefined }): Promise<void> {
    const n = this.mustResolve(t);
    if (n.kind !== 'file') throw notFound();
    await x.redirect(this.downloadUrl(n));
  }

  private async download(x: Exchange, token: string): Promise<void> {
    const d = this.downloads.get(token);
    if (!d || d.expires < Date.now())
      throw graphError(401, 'unauthenticated', 'The download URL has expired');
    const n = this.tree.get(d.id);
    if (!n || n.kind !== 'file') throw notFound();
    await sendContent(x, n.content, { 'content-type': 'application/octet-stream', etag: this.etag(n) });
  }

  private async children(x: Exchange, t: { base: string; rel: string | undefined }): Promise<void> {
    const n = this.mustResolve(t);
    if (n.kind !== 'folder') throw notFound();
    const top = x.url.searchParams.has('$top')
      ? Number(x.url.searchParams.get('$top'))
      : (this.opts.defaultPageSize ?? 200);
    if (!Number.isInteger(top) || top < 1 || top > 1000)
      throw graphError(400, 'invalidRequest', 'Invalid $top');
    const skip = Number(x.url.searchParams.get('$skiptoken') ?? '0');
    const kids = this.tree.children(n.id).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const page = kids.slice(skip, skip + top);
    const out: Record<string, unknown> = { value: page.map((k) => this.select(x, this.item(k))) };
    if (skip + top < kids.length) {
      const next = new URL(`${this.graphBase}/me/drive/items/${encodeURIComponent(n.id)}/children`);
      next.searchParams.set('$top', String(top));
      next.searchParams.set('$skiptoken', String(skip + top));
      const sel = x.url.searchParams.get('$select');
      if (sel) next.searchParams.set('$select', sel);
      out['@odata.nextLink'] = next.toString();
    }
    await x.sendJson(200, out);
  }

  private async createFolder(x: Exchange, t: { base: string; rel: string | undefined }): Promise<void> {
    const parent = this.mustResolve(t);
    if (parent.kind !== 'folder') throw notFound();
    const r = NewFolder.safeParse(await x.json());
    if (!r.success) throw graphError(400, 'invalidRequest', 'Invalid request body');
    this.checkName(r.data.name);
    const conflict = r.data['@microsoft.graph.conflictBehavior'] ?? this.conflictParam(x, 'fail');
    let name = r.data.name;
    const existing = this.tree.childrenNamed(parent.id, name)[0];
    if (existing) {
      if (conflict === 'fail')
        throw graphError(409, 'nameAlreadyExists', 'The specified item name already exists.');
      if (conflict === 'rename') name = this.uniqueName(parent, name);
      else if (existing.kind === 'folder') {
        await x.sendJson(200, this.item(existing));
        return;
      } else this.tree.remove(existing);
    }
    const n = this.tree.create(parent, name, 'folder');
    await x.sendJson(201, this.item(n));
  }

  private async patchItem(x: Exchange, t: { base: string; rel: string | undefined }): Promise<void> {
    const n = this.mustResolve(t);
    if (n.parentId === null) throw graphError(403, 'accessDenied', 'The root cannot be changed');
    this.checkIfMatch(x, n);
    const r = ItemPatch.safeParse(await x.json());
    if (!r.success) throw graphError(400, 'invalidRequest', 'Invalid request body');
    const body = r.data;
    let parent = this.tree.get(n.parentId) as TreeNode;
    if (body.parentReference?.id) {
      const p = this.tree.get(body.parentReference.id);
      if (!p) throw notFound();
      parent = p;
    } else if (body.parentReference?.path) {
      const p = this.tree.resolve(body.parentReference.path.replace(/^\/drive\/root:?/, ''));
      if (!p) throw notFound();
      parent = p;
    }
    if (parent.kind !== 'folder') throw graphError(400, 'invalidRequest', 'The destination is not a folder');
    if (this.tree.isAncestor(n, parent))
      throw graphError(400, 'invalidRequest', 'An item cannot be moved into itself');
    const name = body.name ?? n.name;
    this.checkName(name);
    const conflict = body['@microsoft.graph.conflictBehavior'] ?? this.conflictParam(x, 'fail');
    if (parent.id !== n.parentId || name !== n.name) {
      const existing = this.tree.childrenNamed(parent.id, name)[0];
      let target = name;
      if (existing && existing.id !== n.id) {
        if (conflict === 'fail')
          throw graphError(409, 'nameAlreadyExists', 'The specified item name already exists.');
        if (conflict === 'rename') target = this.uniqueName(parent, name);
        else if (existing.kind === 'folder' || n.kind === 'folder')
          throw graphError(409, 'nameAlreadyExists', 'A folder cannot be replaced.');
        else this.tree.remove(existing);
      }
      this.tree.move(n, parent, target);
    }
    const lm = body.fileSystemInfo?.lastModifiedDateTime;
    if (lm) {
      n.clientModifiedMs = Date.parse(lm);
      this.tree.touch(n);
    }
    await x.sendJson(200, this.item(n));
  }

  private async deleteItem(x: Exchange, t: { base: string; rel: string | undefined }): Promise<void> {
    const n = this.mustResolve(t);
    if (n.parentId === null) throw graphError(403, 'accessDenied', 'The root cannot be deleted');
    this.checkIfMatch(x, n);
    this.tree.remove(n);
    await x.send(204, Buffer.alloc(0));
  }

  // ---- copy (asynchronous: 202 + a monitor URL) ----

  private async copy(x: Exchange, t: { base: string; rel: string | undefined }): Promise<void> {
    const src = this.mustResolve(t);
    if (src.parentId === null) throw graphError(400, 'invalidRequest', 'The root cannot be copied');
    const r = ItemPatch.safeParse((await x.json()) ?? {});
    if (!r.success) throw graphError(400, 'invalidRequest', 'Invalid request body');
    let parent = this.tree.get(src.parentId) as TreeNode;
    if (r.data.parentReference?.id) {
      const p = this.tree.get(r.data.parentReference.id);
      if (!p) throw notFound();
      parent = p;
    }
    if (parent.kind !== 'folder') throw graphError(400, 'invalidRequest', 'The destination is not a folder');
    if (this.tree.isAncestor(src, parent))
      throw graphError(400, 'invalidRequest', 'An item cannot be copied into itself');
    let name = r.data.name ?? src.name;
    this.checkName(name);
    const conflict = r.data['@microsoft.graph.conflictBehavior'] ?? this.conflictParam(x, 'fail');
    const existing = this.tree.childrenNamed(parent.id, name)[0];
    if (existing) {
      if (conflict === 'fail' || existing.id === src.id)
        throw graphError(409, 'nameAlreadyExists', 'The specified item name already exists.');
      if (conflict === 'rename') name = this.uniqueName(parent, name);
      else if (existing.kind === 'folder' || src.kind === 'folder')
        throw graphError(409, 'nameAlreadyExists', 'A folder cannot be replaced.');
      else this.tree.remove(existing);
    }
    const copyInto = (n: TreeNode, into: TreeNode, as: string): TreeNode => {
      const c = this.tree.create(into, as, n.kind, Buffer.from(n.content), {
        clientModifiedMs: n.clientModifiedMs,
      });
      if (n.kind === 'folder') for (const k of this.tree.children(n.id)) copyInto(k, c, k.name);
      return c;
    };
    const copied = copyInto(src, parent, name);
    const job = randomBytes(12).toString('base64url').replace(/_/g, '-');
    this.copies.set(job, { resourceId: copied.id, polls: 0 });
    await x.send(202, Buffer.alloc(0), { location: `${this.transferOrigin}/monitor/${job}` });
  }

  private async monitor(x: Exchange, job: string): Promise<void> {
    const c = this.copies.get(job);
    if (!c) throw notFound();
    c.polls += 1;
    if (c.polls === 1) {
      await x.sendJson(202, { operation: 'itemCopy', status: 'inProgress', percentageComplete: 50 });
      return;
    }
    await x.sendJson(200, {
      operation: 'itemCopy',
      status: 'completed',
      percentageComplete: 100,
      resourceId: c.resourceId,
    });
  }

  // ---- delta ----

  private encodeToken(seq: number): string {
    return Buffer.from(JSON.stringify({ s: seq, e: this.epoch })).toString('base64url');
  }

  private async delta(x: Exchange, t: { base: string; rel: string | undefined }): Promise<void> {
    const scope = this.mustResolve(t);
    if (scope.kind !== 'folder') throw notFound();
    const top = x.url.searchParams.has('$top') ? Number(x.url.searchParams.get('$top')) : 200;
    const raw = x.url.searchParams.get('token');
    const link = (token: string): string => {
      const u = new URL(`${this.graphBase}/me/drive/items/${encodeURIComponent(scope.id)}/delta`);
      u.searchParams.set('token', token);
      return u.toString();
    };
    if (raw === 'latest') {
      await x.sendJson(200, { value: [], '@odata.deltaLink': link(this.encodeToken(this.tree.seq)) });
      return;
    }
    const inScope = (n: TreeNode | undefined): boolean =>
      n !== undefined && n.id !== scope.id && this.tree.isAncestor(scope, n);
    let items: Record<string, unknown>[] = [];
    let nextSeq: number;
    let more = false;
    if (raw === null || /^snap:/.test(raw)) {
      // Initial enumeration: everything in scope, parents before children, paged by offset.
      const offset = raw === null ? 0 : Number(raw.split(':')[1]);
      const seq = raw === null ? this.tree.seq : Number(raw.split(':')[2]);
      const all = this.tree.subtree(scope);
      const page = all.slice(offset, offset + top);
      items = page.map((n) => this.item(n, false));
      more = offset + top < all.length;
      if (more) {
        await x.sendJson(200, { value: items, '@odata.nextLink': link(`snap:${offset + top}:${seq}`) });
        return;
      }
      nextSeq = seq;
    } else {
      let parsed: { s: number; e: number };
      try {
        parsed = z
          .object({ s: z.number(), e: z.number() })
          .parse(JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')));
      } catch {
        throw graphError(400, 'invalidRequest', 'Invalid delta token');
      }
      if (parsed.e !== this.epoch || parsed.s < this.tree.oldestSeq() || parsed.s > this.tree.seq) {
        throw graphError(
          410,
          'resyncRequired',
          "Resync required. Replace any local items with the server's version (including deletes) if you're sure that the service was up to date with your local changes when you last sync'd. Upload any local changes that the server doesn't know about.",
          {
            location: link(`snap:0:${this.tree.seq}`).replace(/token=[^&]*/, ''),
          },
        );
      }
      // The latest state of each changed item, in the order of their last change.
      // A moved folder is reported, not the items that moved with it (their parent did not
      // change).
      const page = this.tree.latestChanges(
        parsed.s,
        top,
        (rec) => rec.id,
        (rec) => rec.inherited === true,
      );
      nextSeq = page.lastSeq;
      more = page.more;
      const scopePath = foldName(this.tree.pathOf(scope));
      for (const rec of page.records) {
        const n = this.tree.get(rec.id);
        if (n && !rec.deleted) {
          if (inScope(n)) items.push(this.item(n, false));
        } else if (scopePath === '' || foldName(rec.path).startsWith(scopePath + '/')) {
          const name = rec.path.slice(rec.path.lastIndexOf('/') + 1);
          items.push({
            id: rec.id,
            name,
            deleted: { state: 'deleted' },
            parentReference: { driveId: DRIVE_ID, driveType: 'personal' },
          });
        }
      }
    }
    const token = this.encodeToken(nextSeq);
    await x.sendJson(
      200,
      more
        ? { value: items, '@odata.nextLink': link(token) }
        : { value: items, '@odata.deltaLink': link(token) },
    );
  }
}
