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
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import {
  type EmulatorOptions,
  EmulatorServer,
  type Exchange,
  HttpError,
  parseEntityTags,
  type Route,
  sendContent,
} from './http.ts';
import { Tree, type TreeNode, foldName } from './tree.ts';

export { parseEntityTags };

export interface OneDriveEmulatorOptions extends EmulatorOptions {
  /** TLS is required (the Graph SDK only talks https). */
  readonly tls: { readonly cert: string | Buffer; readonly key: string | Buffer };
  /** Largest simple upload (PUT …/content). Default 250 MB, as documented. */
  readonly maxSimpleUploadBytes?: number;
  /** Children per page when the caller gives no $top. Default 200. */
  readonly defaultPageSize?: number;
}

const FRAGMENT = 320 * 1024;
const DRIVE_ID = 'b!emulatordrive';
const ROOT_ID = 'EMULATOR!ROOT';
const INVALID_NAME = /["*:<>?/\\|]/;
const RESERVED = /^(\.lock|con|prn|aux|nul|com\d|lpt\d|desktop\.ini|_vti_)$/i;

function graphError(
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
): HttpError {
  return new HttpError(
    status,
    {
      error: {
        code,
        message,
        innerError: {
          date: new Date().toISOString().slice(0, 19),
          'request-id': randomUUID(),
          'client-request-id': randomUUID(),
        },
      },
    },
    headers,
  );
}

const notFound = (): HttpError => graphError(404, 'itemNotFound', 'Item not found');

interface UploadSession {
  id: string;
  parentId: string;
  name: string;
  /** Existing item being replaced, when known at creation. */
  conflict: 'fail' | 'replace' | 'rename';
  ifMatch?: string;
  chunks: Buffer[];
  received: number;
  total?: number;
  expires: number;
}

const ItemPatch = z
  .object({
    name: z.string().optional(),
    parentReference: z
      .object({ id: z.string().optional(), path: z.string().optional() })
      .partial()
      .optional(),
    fileSystemInfo: z.object({ lastModifiedDateTime: z.string().optional() }).partial().optional(),
    '@microsoft.graph.conflictBehavior': z.enum(['fail', 'replace', 'rename']).optional(),
  })
  .passthrough();

const NewFolder = z
  .object({
    name: z.string().min(1),
    folder: z.object({}).passthrough(),
    '@microsoft.graph.conflictBehavior': z.enum(['fail', 'replace', 'rename']).optional(),
  })
  .passthrough();

const SessionBody = z
  .object({
    item: z
      .object({
        '@microsoft.graph.conflictBehavior': z.enum(['fail', 'replace', 'rename']).optional(),
        name: z.string().optional(),
        fileSystemInfo: z.object({ lastModifiedDateTime: z.string().optional() }).partial().optional(),
      })
      .passthrough()
      .optional(),
    deferCommit: z.boolean().optional(),
  })
  .passthrough();

export class OneDriveEmulator extends EmulatorServer {
  readonly tree: Tree;
  private readonly sessions = new Map<string, UploadSession>();
  private readonly downloads = new Map<string, { id: string; expires: number }>();
  /** Copy jobs: the copy is made at once; the monitor reports inProgress once, then completed. */
  private readonly copies = new Map<string, { resourceId: string; polls: number }>();
  private epoch = 1;
  private readonly opts: OneDriveEmulatorOptions;

  constructor(options: OneDriveEmulatorOptions) {
    super(options, {
      authorize: '/common/oauth2/v2.0/authorize',
      token: '/common/oauth2/v2.0/token',
    });
    this.opts = options;
    this.tree = new Tree({ caseInsensitive: true, rootId: ROOT_ID, dataDir: options.dataDir });
  }

  /** https://localhost:PORT — the API host (the upload and download host is 127.0.0.1). */
  get apiOrigin(): string {
    return `https://localhost:${this.port}`;
  }

  /** Graph base, as the SDK's baseUrl. */
  get graphBase(): string {
    return `${this.apiOrigin}/v1.0`;
  }

  private get transferOrigin(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  override flush(): void {
    this.tree.save();
  }

  override expireCursors(): void {
    this.epoch += 1;
  }

  openSessions(): number {
    return this.sessions.size;
  }

  override stats(): Record<string, number> {
    return { openSessions: this.sessions.size };
  }

  protected override faultResponse(status: number, reason: string | undefined): { body: unknown } {
    const code =
      reason ??
      (status === 429 ? 'activityLimitReached' : status === 503 ? 'serviceNotAvailable' : 'generalException');
    const message =
      status === 429
        ? 'The request has been throttled'
        : status === 503
          ? 'Service unavailable'
          : 'An unspecified error has occurred.';
    return { body: graphError(status, code, message).body as object };
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

  // ---- items ----

  private etag(n: TreeNode): string {
    return `"{${n.id}},${n.version}"`;
  }

  private ctag(n: TreeNode): string {
    return `"c:{${n.id}},${n.contentVersion}"`;
  }

  item(n: TreeNode, withPath = true): Record<string, unknown> {
    const parent = n.parentId === null ? undefined : this.tree.get(n.parentId);
    const parentPath = parent ? this.tree.pathOf(parent) : '';
    const out: Record<string, unknown> = {
      id: n.id,
      name: n.parentId === null ? 'root' : n.name,
      eTag: this.etag(n),
      cTag: this.ctag(n),
      createdDateTime: new Date(n.createdMs).toISOString(),
      lastModifiedDateTime: new Date(n.modifiedMs).toISOString(),
      size: n.kind === 'file' ? n.content.byteLength : this.folderSize(n),
      fileSystemInfo: {
        createdDateTime: new Date(n.createdMs).toISOString(),
        lastModifiedDateTime: new Date(n.clientModifiedMs).toISOString(),
      },
    };
    if (parent) {
      out.parentReference = {
        driveId: DRIVE_ID,
        driveType: 'personal',
        id: parent.id,
        ...(withPath ? { path: `/drive/root:${parentPath}` } : {}),
      };
    } else out.root = {};
    if (n.kind === 'folder') out.folder = { childCount: this.tree.children(n.id).length };
    else {
      out.file = {
        mimeType: 'application/octet-stream',
        hashes: {
          quickXorHash: this.tree.quickXor(n),
          sha1Hash: createHash('sha1').update(n.content).digest('hex').toUpperCase(),
          sha256Hash: n.hashes.sha256.toUpperCase(),
        },
      };
    }
    return out;
  }

  private folderSize(n: TreeNode): number {
    let total = 0;
    for (const k of this.tree.subtree(n)) if (k.kind === 'file') total += k.content.byteLength;
    return total;
  }

  private resolve(t: { base: string; rel: string | undefined }): TreeNode | undefined {
    const base = this.tree.get(t.base);
    if (!base) return undefined;
    if (t.rel === undefined || t.rel === '' || t.rel === '/') return base;
    let cur = base;
    for (const seg of t.rel.split('/').filter((s) => s !== '')) {
      if (cur.kind !== 'folder') return undefined;
      const next = this.tree.childrenNamed(cur.id, seg)[0];
      if (!next) return undefined;
      cur = next;
    }
    return cur;
  }

  private mustResolve(t: { base: string; rel: string | undefined }): TreeNode {
    const n = this.resolve(t);
    if (!n) throw notFound();
    return n;
  }

  private checkName(name: string): void {
    if (
      name === '' ||
      INVALID_NAME.test(name) ||
      RESERVED.test(name) ||
      name.startsWith('~$') ||
      /^\s|[\s.]$/.test(name) ||
      name.length > 400
    ) {
      throw graphError(
        400,
        'invalidRequest',
        'The provided name contains invalid characters or is reserved.',
      );
    }
  }

  /** Parent folder and name for a path target, creating missing folders when asked. */
  private parentFor(
    t: { base: string; rel: string | undefined },
    create: boolean,
  ): { parent: TreeNode; name: string } {
    const segs = (t.rel ?? '').split('/').filter((s) => s !== '');
    const name = segs.pop();
    if (name === undefined) throw graphError(400, 'invalidRequest', 'The item path is required');
    this.checkName(name);
    let cur = this.tree.get(t.base);
    if (!cur) throw notFound();
    for (const seg of segs) {
      if (cur.kind !== 'folder')
        throw graphError(409, 'nameAlreadyExists', 'A file is where a folder is needed');
      const next: TreeNode | undefined = this.tree.childrenNamed(cur.id, seg)[0];
      if (next) {
        cur = next;
        continue;
      }
      if (!create) throw notFound();
      this.checkName(seg);
      cur = this.tree.create(cur, seg, 'folder');
    }
    if (cur.kind !== 'folder')
      throw graphError(409, 'nameAlreadyExists', 'A file is where a folder is needed');
    return { parent: cur, name };
  }

  private checkIfMatch(x: Exchange, n: TreeNode | undefined): void {
    const ifMatch = x.header('if-match');
    if (ifMatch === undefined) return;
    if (!n)
      throw graphError(
        412,
        'preconditionFailed',
        'The resource has changed since the caller last read it; usually an eTag mismatch',
      );
    const tags = parseEntityTags(ifMatch);
    if (!tags.includes('*') && !tags.includes(this.etag(n)) && !tags.includes(this.ctag(n))) {
      throw graphError(
        412,
        'preconditionFailed',
        'The resource has changed since the caller last read it; usually an eTag mismatch',
      );
    }
  }

  private uniqueName(parent: TreeNode, name: string): string {
    const dot = name.lastIndexOf('.');
    const stem = dot > 0 ? name.slice(0, dot) : name;
    const ext = dot > 0 ? name.slice(dot) : '';
    for (let i = 1; ; i++) {
      const candidate = `${stem} ${i}${ext}`;
      if (this.tree.childrenNamed(parent.id, candidate).length === 0) return candidate;
    }
  }

  /** Store content at parent/name under a conflict behaviour; returns the item and whether it was created. */
  private store(
    parent: TreeNode,
    name: string,
    data: Buffer,
    conflict: 'fail' | 'replace' | 'rename',
    x: Exchange | undefined,
    ifMatch?: string,
    modified?: number,
  ): { node: TreeNode; created: boolean } {
    const existing = this.tree.childrenNamed(parent.id, name)[0];
    if (ifMatch !== undefined) {
      const tags = parseEntityTags(ifMatch);
      if (
        !existing ||
        (!tags.includes('*') && !tags.includes(this.etag(existing)) && !tags.includes(this.ctag(existing)))
      ) {
        throw graphError(
          412,
          'preconditionFailed',
          'The resource has changed since the caller last read it; usually an eTag mismatch',
        );
      }
    } else if (x) this.checkIfMatch(x, existing);
    if (existing) {
      if (conflict === 'fail')
        throw graphError(409, 'nameAlreadyExists', 'The specified item name already exists.');
      if (conflict === 'rename') name = this.uniqueName(parent, name);
      else if (existing.kind === 'folder')
        throw graphError(409, 'nameAlreadyExists', 'A folder with this name already exists.');
      else {
        this.tree.setContent(existing, data, modified);
        return { node: existing, created: false };
      }
    }
    return {
      node: this.tree.create(parent, name, 'file', data, { clientModifiedMs: modified }),
      created: true,
    };
  }

  private conflictParam(x: Exchange, fallback: 'fail' | 'replace' | 'rename'): 'fail' | 'replace' | 'rename' {
    const v = x.url.searchParams.get('@microsoft.graph.conflictBehavior');
    if (v === null) return fallback;
    if (v !== 'fail' && v !== 'replace' && v !== 'rename')
      throw graphError(400, 'invalidRequest', 'Invalid conflictBehavior');
    return v;
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

  private async simpleUpload(x: Exchange, t: { base: string; rel: string | undefined }): Promise<void> {
    const data = await x.body();
    const max = this.opts.maxSimpleUploadBytes ?? 250 * 1000 * 1000;
    if (data.byteLength > max)
      throw graphError(413, 'requestEntityTooLarge', 'Use an upload session for files this large');
    let parent: TreeNode;
    let name: string;
    if (t.rel === undefined) {
      // PUT /items/{id}/content replaces an existing file.
      const n = this.mustResolve(t);
      if (n.kind !== 'file' || n.parentId === null)
        throw graphError(400, 'invalidRequest', 'Cannot upload content to a folder');
      parent = this.tree.get(n.parentId) as TreeNode;
      name = n.name;
    } else ({ parent, name } = this.parentFor(t, true));
    const { node, created } = this.store(parent, name, data, this.conflictParam(x, 'replace'), x);
    await x.sendJson(created ? 201 : 200, this.item(node));
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

  // ---- upload sessions ----

  private async createSession(x: Exchange, t: { base: string; rel: string | undefined }): Promise<void> {
    const r = SessionBody.safeParse((await x.json()) ?? {});
    if (!r.success) throw graphError(400, 'invalidRequest', 'Invalid request body');
    let parent: TreeNode;
    let name: string;
    if (t.rel === undefined) {
      const n = this.mustResolve(t);
      if (n.kind !== 'file' || n.parentId === null)
        throw graphError(400, 'invalidRequest', 'Cannot upload content to a folder');
      parent = this.tree.get(n.parentId) as TreeNode;
      name = n.name;
    } else ({ parent, name } = this.parentFor(t, true));
    const conflict = r.data.item?.['@microsoft.graph.conflictBehavior'] ?? 'replace';
    const existing = this.tree.childrenNamed(parent.id, name)[0];
    if (existing && conflict === 'fail')
      throw graphError(409, 'nameAlreadyExists', 'The specified item name already exists.');
    if (existing?.kind === 'folder' && conflict === 'replace')
      throw graphError(409, 'nameAlreadyExists', 'A folder with this name already exists.');
    this.checkIfMatch(x, x.header('if-match') === undefined ? undefined : existing);
    const id = randomBytes(24).toString('base64url').replace(/_/g, '-');
    const expires = Date.now() + 24 * 3600_000;
    this.sessions.set(id, {
      id,
      parentId: parent.id,
      name,
      conflict,
      ifMatch: x.header('if-match'),
      chunks: [],
      received: 0,
      expires,
    });
    await x.sendJson(200, {
      '@odata.context': `${this.graphBase}/$metadata#microsoft.graph.uploadSession`,
      uploadUrl: `${this.transferOrigin}/up/${id}`,
      expirationDateTime: new Date(expires).toISOString(),
      nextExpectedRanges: ['0-'],
    });
  }

  private sessionStatus(s: UploadSession): Record<string, unknown> {
    return {
      expirationDateTime: new Date(s.expires).toISOString(),
      nextExpectedRanges: [`${s.received}-${s.total === undefined ? '' : s.total - 1}`],
    };
  }

  private async sessionRequest(x: Exchange, id: string): Promise<void> {
    const s = this.sessions.get(id);
    if (!s) throw graphError(404, 'itemNotFound', 'The upload session was not found');
    if (x.method === 'GET') {
      await x.sendJson(200, this.sessionStatus(s));
      return;
    }
    if (x.method === 'DELETE') {
      this.sessions.delete(id);
      await x.send(204, Buffer.alloc(0));
      return;
    }
    if (x.method !== 'PUT') throw graphError(405, 'invalidRequest', 'Method not allowed');
    if (x.header('authorization')) {
      // The documentation asks clients not to send it; the service may refuse.
      throw graphError(401, 'unauthenticated', 'Do not send an Authorization header to the uploadUrl');
    }
    const data = await x.body();
    const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(x.header('content-range') ?? '');
    if (!m) throw graphError(400, 'invalidRequest', 'Content-Range is required');
    const start = Number(m[1]);
    const end = Number(m[2]);
    const total = Number(m[3]);
    if (end - start + 1 !== data.byteLength)
      throw graphError(400, 'invalidRequest', 'Content-Range does not match the body');
    if (s.total !== undefined && s.total !== total)
      throw graphError(400, 'invalidRequest', 'The total size changed');
    if (start !== s.received) {
      throw graphError(416, 'invalidRange', `The uploaded fragment is out of order; expected ${s.received}`);
    }
    const last = end + 1 === total;
    if (!last && data.byteLength % FRAGMENT !== 0) {
      throw graphError(
        400,
        'invalidRequest',
        `Fragments must be a multiple of ${FRAGMENT} bytes except the last`,
      );
    }
    s.total = total;
    s.chunks.push(data);
    s.received += data.byteLength;
    if (!last) {
      await x.sendJson(202, this.sessionStatus(s));
      return;
    }
    this.sessions.delete(id);
    const parent = this.tree.get(s.parentId);
    if (!parent) throw notFound();
    const { node, created } = this.store(
      parent,
      s.name,
      Buffer.concat(s.chunks),
      s.conflict,
      undefined,
      s.ifMatch,
    );
    await x.sendJson(created ? 201 : 200, this.item(node));
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

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw graphError(400, 'invalidRequest', 'Malformed URL');
  }
}
