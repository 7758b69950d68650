/**
 * Google Drive API v3 emulator (https://developers.google.com/drive/api/reference/rest/v3),
 * the subset a sync client uses:
 * - files.create: metadata only, and uploads with uploadType=media, multipart
 *   (multipart/related: JSON metadata then the media) and resumable (session URI in
 *   Location; chunks with Content-Range, multiples of 256 KiB except the last; 308 Resume
 *   Incomplete with `Range: bytes=0-N`; status query `Content-Range: bytes *∕N`; DELETE
 *   cancels with 499);
 * - files.get (metadata, and alt=media with Range → 206), files.list with `q` (terms
 *   joined by `and`: `'ID' in parents`, `name = '…'`, `trashed = …`, `mimeType = / != '…'`),
 *   `fields` partial responses, pageSize/pageToken; files.update (content and metadata,
 *   addParents/removeParents); files.copy; files.delete;
 * - changes.getStartPageToken and changes.list (the latest state of each changed file,
 *   nextPageToken / newStartPageToken);
 * - errors as `{"error": {"code", "message", "errors": [{"domain", "reason", "message"}]}}`,
 *   including 403 userRateLimitExceeded and 429 rateLimitExceeded.
 * And the Drive API v2 pieces a client needs for conditional writes
 * (https://developers.google.com/drive/api/reference/rest/v2), since only v2 files carry an
 * `etag` and honour `If-Match`:
 * - files.get (`GET /drive/v2/files/{id}`, v2 field names: title, labels.trashed, fileSize,
 *   modifiedDate, parents[{id}], etag, version…; the full resource unless `fields` says);
 * - files.update with content (`PUT /upload/drive/v2/files/{id}`, uploadType media,
 *   multipart or resumable; metadata title, description, labels.trashed, and modifiedDate
 *   with setModifiedDate=true) and files.delete (`DELETE /drive/v2/files/{id}`, 204);
 * - files.update without content (`PUT` or `PATCH /drive/v2/files/{id}`: title,
 *   description, labels.trashed — how a client trashes under If-Match);
 * - `If-Match` on those writes: a list of entity tags or `*`; when none is the
 *   file's etag → 412 `conditionNotMet`. A resumable update checks it when the session is
 *   opened and again when the last chunk would commit the content.
 * An item's etag changes on every change to it (content, name, parent, trash, times);
 * `version` (both APIs) increases with each. Items created through the API get strictly
 * increasing createdTimes.
 * Items are id-based; several items in one folder may share a name, as Drive allows.
 */
import { createHash, randomBytes } from 'node:crypto';
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
import { Tree, type TreeNode } from './tree.ts';

export const FOLDER_MIME = 'application/vnd.google-apps.folder';
const CHUNK_GRANULARITY = 256 * 1024;
const ROOT_ID = '0AEmulatorRootFolderPVA';

export type GDriveEmulatorOptions = EmulatorOptions;

function driveError(
  code: number,
  message: string,
  reason: string,
  domain = 'global',
  extra: Record<string, string> = {},
  headers: Record<string, string> = {},
): HttpError {
  return new HttpError(
    code,
    { error: { code, message, errors: [{ message, domain, reason, ...extra }] } },
    headers,
  );
}

const notFound = (id: string): HttpError =>
  driveError(404, `File not found: ${id}.`, 'notFound', 'global', {
    locationType: 'parameter',
    location: 'fileId',
  });
/** What Drive answers when an If-Match precondition does not hold. */
const preconditionFailed = (): HttpError =>
  driveError(412, 'Precondition Failed', 'conditionNotMet', 'global', {
    locationType: 'header',
    location: 'If-Match',
  });
const invalid = (message: string, location?: string): HttpError =>
  driveError(
    400,
    message,
    location ? 'invalid' : 'badRequest',
    'global',
    location ? { locationType: 'parameter', location } : {},
  );

// ---- `fields` partial responses ----

type FieldTree = Map<string, FieldTree | true>;

/** Parse a partial-response selector: `a,b(c,d),e/f`. */
export function parseFields(spec: string): FieldTree {
  let i = 0;
  const parseList = (): FieldTree => {
    const out: FieldTree = new Map();
    for (;;) {
      let name = '';
      while (i < spec.length && !',()'.includes(spec[i] as string)) name += spec[i++];
      name = name.trim();
      let sub: FieldTree | true = true;
      if (spec[i] === '(') {
        i++;
        sub = parseList();
        if (spec[i] !== ')') throw invalid('Invalid field selection', 'fields');
        i++;
      }
      if (name !== '') {
        const parts = name.split('/');
        let node = out;
        parts.forEach((part, idx) => {
          if (idx === parts.length - 1) {
            node.set(part, sub);
          } else {
            let next = node.get(part);
            if (next === undefined || next === true) {
              next = new Map();
              node.set(part, next);
            }
            node = next;
          }
        });
      }
      if (spec[i] === ',') {
        i++;
        continue;
      }
      return out;
    }
  };
  const tree = parseList();
  if (i !== spec.length) throw invalid('Invalid field selection', 'fields');
  return tree;
}

export function applyFields(value: unknown, fields: FieldTree | true): unknown {
  if (fields === true || fields.has('*')) return value;
  if (Array.isArray(value)) return value.map((v) => applyFields(v, fields));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, sub] of fields) {
    const v = (value as Record<string, unknown>)[k];
    if (v !== undefined) out[k] = applyFields(v, sub);
  }
  return out;
}

// ---- `q` ----

type Term =
  | { kind: 'parent'; id: string }
  | { kind: 'name'; op: '=' | '!=' | 'contains'; value: string }
  | { kind: 'trashed'; value: boolean }
  | { kind: 'mimeType'; op: '=' | '!='; value: string };

export function parseQuery(q: string): Term[] {
  const terms: Term[] = [];
  const str = String.raw`'((?:[^'\\]|\\.)*)'`;
  const unescape = (s: string): string => s.replace(/\\(.)/g, '$1');
  // Split on `and` outside quoted strings.
  const parts: string[] = [];
  let cur = '';
  for (let i = 0; i < q.length; i++) {
    const ch = q[i] as string;
    if (ch === "'") {
      let j = i + 1;
      while (j < q.length && q[j] !== "'") j += q[j] === '\\' ? 2 : 1;
      cur += q.slice(i, j + 1);
      i = j;
      continue;
    }
    const m = /^\s+and\s+/i.exec(q.slice(i));
    if (m) {
      parts.push(cur);
      cur = '';
      i += m[0].length - 1;
      continue;
    }
    cur += ch;
  }
  if (cur.trim() !== '') parts.push(cur);
  for (const raw of parts) {
    const t = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = new RegExp(`^${str}\\s+in\\s+parents$`).exec(t)))
      terms.push({ kind: 'parent', id: unescape(m[1] as string) });
    else if ((m = new RegExp(`^name\\s*(=|!=|contains)\\s*${str}$`).exec(t))) {
      terms.push({ kind: 'name', op: m[1] as '=' | '!=' | 'contains', value: unescape(m[2] as string) });
    } else if ((m = /^trashed\s*=\s*(true|false)$/.exec(t)))
      terms.push({ kind: 'trashed', value: m[1] === 'true' });
    else if ((m = new RegExp(`^mimeType\\s*(=|!=)\\s*${str}$`).exec(t))) {
      terms.push({ kind: 'mimeType', op: m[1] as '=' | '!=', value: unescape(m[2] as string) });
    } else throw invalid('Invalid Value', 'q');
  }
  return terms;
}

const MetadataBody = z
  .object({
    name: z.string().optional(),
    mimeType: z.string().optional(),
    parents: z.array(z.string()).optional(),
    modifiedTime: z.string().optional(),
    description: z.string().optional(),
    trashed: z.boolean().optional(),
    appProperties: z.record(z.string()).optional(),
  })
  .passthrough();
type MetadataBody = z.infer<typeof MetadataBody>;

/** A v2 File in a files.update body: the fields the emulator applies. */
const MetadataBodyV2 = z
  .object({
    title: z.string().optional(),
    mimeType: z.string().optional(),
    description: z.string().optional(),
    modifiedDate: z.string().optional(),
    labels: z.object({ trashed: z.boolean().optional() }).passthrough().optional(),
    parents: z.array(z.object({ id: z.string() }).passthrough()).optional(),
  })
  .passthrough();

interface ResumableSession {
  id: string;
  /** The API that opened it: the final answer is a file of that version. */
  api: 'v2' | 'v3';
  /** If-Match of the initiating request, checked again when the content commits. */
  ifMatch?: string;
  /** Existing file for an update; undefined for a create. */
  fileId?: string;
  metadata: MetadataBody;
  chunks: Buffer[];
  received: number;
  total?: number;
  addParents?: string;
  removeParents?: string;
  /** `fields` of the initiating request, applied to the final response. */
  fields?: string;
}

export class GDriveEmulator extends EmulatorServer {
  readonly tree: Tree;
  private readonly sessions = new Map<string, ResumableSession>();
  private pageTokens = new Map<string, { ids: string[]; offset: number }>();
  private minPageToken = 0;
  private lastCreatedMs = 0;

  constructor(options: GDriveEmulatorOptions = {}) {
    super(options, { authorize: '/o/oauth2/v2/auth', token: '/token' });
    this.tree = new Tree({ caseInsensitive: false, rootId: ROOT_ID, dataDir: options.dataDir });
  }

  override flush(): void {
    this.tree.save();
  }

  override expireCursors(): void {
    // Page tokens are positions in the log: skip one so every token issued so far is older
    // than the oldest valid one.
    this.tree.seq += 1;
    this.minPageToken = this.tree.seq + 1;
    this.pageTokens.clear();
  }

  /** Resumable upload sessions not completed nor cancelled. */
  openSessions(): number {
    return this.sessions.size;
  }

  override stats(): Record<string, number> {
    return { openSessions: this.sessions.size };
  }

  protected override faultResponse(status: number, reason: string | undefined): { body: unknown } {
    if (status === 403) {
      const r = reason ?? 'userRateLimitExceeded';
      return {
        body: {
          error: {
            code: 403,
            message: 'User Rate Limit Exceeded',
            errors: [{ domain: 'usageLimits', reason: r, message: 'User Rate Limit Exceeded' }],
          },
        },
      };
    }
    if (status === 429) {
      const r = reason ?? 'rateLimitExceeded';
      return {
        body: {
          error: {
            code: 429,
            message: 'Rate Limit Exceeded',
            errors: [{ domain: 'usageLimits', reason: r, message: 'Rate Limit Exceeded' }],
          },
        },
      };
    }
    const message = status === 503 ? 'Service Unavailable' : 'Internal Error';
    return {
      body: {
        error: {
          code: status,
          message,
          errors: [{ domain: 'global', reason: reason ?? 'backendError', message }],
        },
      },
    };
  }

  protected override authError(): HttpError {
    return new HttpError(
      401,
      {
        error: {
          code: 401,
          message:
            'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
          errors: [
            {
              message: 'Invalid Credentials',
              domain: 'global',
              reason: 'authError',
              location: 'Authorization',
              locationType: 'header',
            },
          ],
          status: 'UNAUTHENTICATED',
        },
      },
      { 'www-authenticate': 'Bearer realm="https://accounts.google.com/"' },
    );
  }

  protected override route(x: { method: string; url: URL }): Route | undefined {
    const p = x.url.pathname;
    const m = x.method;
    const q = x.url.searchParams;
    let r: RegExpExecArray | null;
    if (p === '/drive/v3/files' && m === 'GET')
      return { endpoint: 'files.list', handle: (ex) => this.list(ex) };
    if (p === '/drive/v3/files' && m === 'POST')
      return { endpoint: 'files.create', handle: (ex) => this.createMetadataOnly(ex) };
    if (p === '/upload/drive/v3/files' && q.has('upload_id')) {
      return { endpoint: 'files.upload.resumable', noAuth: true, handle: (ex) => this.resumableChunk(ex) };
    }
    if (p === '/upload/drive/v3/files' && m === 'POST')
      return { endpoint: 'files.create', handle: (ex) => this.upload(ex) };
    if ((r = /^\/upload\/drive\/v3\/files\/([^/]+)$/.exec(p))) {
      const id = decodeURIComponent(r[1] as string);
      if (q.has('upload_id'))
        return { endpoint: 'files.upload.resumable', noAuth: true, handle: (ex) => this.resumableChunk(ex) };
      if (m === 'PATCH' || m === 'PUT')
        return { endpoint: 'files.update', handle: (ex) => this.upload(ex, id) };
    }
    if ((r = /^\/upload\/drive\/v2\/files\/([^/]+)$/.exec(p))) {
      const id = decodeURIComponent(r[1] as string);
      if (q.has('upload_id'))
        return { endpoint: 'files.upload.resumable', noAuth: true, handle: (ex) => this.resumableChunk(ex) };
      if (m === 'PUT') return { endpoint: 'v2.files.update', handle: (ex) => this.uploadV2(ex, id) };
    }
    if ((r = /^\/drive\/v2\/files\/([^/]+)$/.exec(p))) {
      const id = decodeURIComponent(r[1] as string);
      if (m === 'GET' && !q.has('alt'))
        return { endpoint: 'v2.files.get', handle: (ex) => this.getV2(ex, id) };
      if (m === 'DELETE') return { endpoint: 'v2.files.delete', handle: (ex) => this.deleteV2(ex, id) };
      if (m === 'PUT' || m === 'PATCH')
        return { endpoint: 'v2.files.update', handle: (ex) => this.updateMetadataV2(ex, id) };
    }
    if ((r = /^\/drive\/v3\/files\/([^/]+)\/copy$/.exec(p)) && m === 'POST') {
      const id = decodeURIComponent(r[1] as string);
      return { endpoint: 'files.copy', handle: (ex) => this.copy(ex, id) };
    }
    if ((r = /^\/drive\/v3\/files\/([^/]+)$/.exec(p))) {
      const id = decodeURIComponent(r[1] as string);
      if (m === 'GET')
        return {
          endpoint: q.get('alt') === 'media' ? 'files.get.media' : 'files.get',
          handle: (ex) => this.get(ex, id),
        };
      if (m === 'PATCH') return { endpoint: 'files.update', handle: (ex) => this.updateMetadata(ex, id) };
      if (m === 'DELETE') return { endpoint: 'files.delete', handle: (ex) => this.delete(ex, id) };
    }
    if (p === '/drive/v3/changes/startPageToken' && m === 'GET') {
      return {
        endpoint: 'changes.getStartPageToken',
        handle: (ex) =>
          ex.sendJson(200, { kind: 'drive#startPageToken', startPageToken: String(this.tree.seq + 1) }),
      };
    }
    if (p === '/drive/v3/changes' && m === 'GET')
      return { endpoint: 'changes.list', handle: (ex) => this.changes(ex) };
    if (p === '/drive/v3/about' && m === 'GET') {
      return {
        endpoint: 'about.get',
        handle: (ex) =>
          ex.sendJson(
            200,
            applyFields(
              {
                kind: 'drive#about',
                user: { displayName: 'Emulator', emailAddress: 'emulator@example.com' },
                storageQuota: { limit: String(15 * 2 ** 30), usage: '0' },
              },
              parseFields(ex.url.searchParams.get('fields') ?? 'kind,user,storageQuota'),
            ),
          ),
      };
    }
    return undefined;
  }

  // ---- resources ----

  private node(id: string): TreeNode {
    const n = this.tree.get(id === 'root' ? ROOT_ID : id);
    if (!n) throw notFound(id);
    return n;
  }

  /** In the trash: trashed itself, or inside a trashed folder (Drive trashes the content too). */
  isTrashed(n: TreeNode): boolean {
    for (
      let c: TreeNode | undefined = n;
      c;
      c = c.parentId === null ? undefined : this.tree.get(c.parentId)
    ) {
      if (c.meta.trashed === 'true') return true;
    }
    return false;
  }

  /** An item a request may change or delete: anything but the root folder (403 there). */
  private changeable(id: string): TreeNode {
    const n = this.node(id);
    if (n.parentId === null)
      throw driveError(
        403,
        'The user does not have sufficient permissions for this file.',
        'insufficientFilePermissions',
      );
    return n;
  }

  resource(n: TreeNode): Record<string, unknown> {
    const folder = n.kind === 'folder';
    const base: Record<string, unknown> = {
      kind: 'drive#file',
      id: n.id,
      name: n.name,
      mimeType: n.meta.mimeType ?? (folder ? FOLDER_MIME : 'application/octet-stream'),
      parents: n.parentId === null ? [] : [n.parentId],
      trashed: this.isTrashed(n),
      explicitlyTrashed: n.meta.trashed === 'true',
      createdTime: new Date(n.createdMs).toISOString(),
      modifiedTime: new Date(n.clientModifiedMs).toISOString(),
      version: String(n.version),
      ...(n.meta.description !== undefined ? { description: n.meta.description } : {}),
      ...(n.meta.appProperties ? { appProperties: JSON.parse(n.meta.appProperties) as unknown } : {}),
    };
    if (folder) return base;
    return {
      ...base,
      size: String(n.content.byteLength),
      md5Checksum: n.hashes.md5,
      sha256Checksum: n.hashes.sha256,
      headRevisionId: n.meta.headRevisionId,
      originalFilename: n.meta.originalFilename ?? n.name,
    };
  }

  /**
   * The v2 File (https://developers.google.com/drive/api/reference/rest/v2/files): the
   * same item under v2 names, with the `etag` v3 does not show.
   */
  resourceV2(n: TreeNode): Record<string, unknown> {
    const folder = n.kind === 'folder';
    const base: Record<string, unknown> = {
      kind: 'drive#file',
      id: n.id,
      etag: this.etag(n),
      title: n.name,
      mimeType: n.meta.mimeType ?? (folder ? FOLDER_MIME : 'application/octet-stream'),
      labels: {
        starred: false,
        hidden: false,
        trashed: this.isTrashed(n),
        restricted: false,
        viewed: false,
      },
      createdDate: new Date(n.createdMs).toISOString(),
      modifiedDate: new Date(n.clientModifiedMs).toISOString(),
      version: String(n.version),
      parents:
        n.parentId === null
          ? []
          : [{ kind: 'drive#parentReference', id: n.parentId, isRoot: n.parentId === ROOT_ID }],
      ...(n.meta.description !== undefined ? { description: n.meta.description } : {}),
    };
    if (folder) return base;
    return {
      ...base,
      fileSize: String(n.content.byteLength),
      md5Checksum: n.hashes.md5,
      sha256Checksum: n.hashes.sha256,
      headRevisionId: n.meta.headRevisionId,
      originalFilename: n.meta.originalFilename ?? n.name,
    };
  }

  /** The item's entity tag: a new one for every change (the tree bumps `version` on each). */
  etag(n: TreeNode): string {
    return `"${createHash('sha256').update(`${n.id}/${n.version}`).digest('base64url').slice(0, 27)}"`;
  }

  /** 412 unless an If-Match header (when given) names the item's current etag or `*`. */
  private checkIfMatch(header: string | undefined, n: TreeNode): void {
    if (header === undefined) return;
    // Quoted entity tags as sent back from the `etag` field; a bare value is taken as one tag.
    const tags = parseEntityTags(header);
    if (tags.length === 0 && header.trim() !== '') tags.push(`"${header.trim().replace(/^"|"$/g, '')}"`);
    if (!tags.includes('*') && !tags.includes(this.etag(n))) throw preconditionFailed();
  }

  private fields(x: Exchange, defaults: string): FieldTree {
    return parseFields(x.url.searchParams.get('fields') ?? defaults);
  }

  private async sendFile(x: Exchange, n: TreeNode, status = 200): Promise<void> {
    await x.sendJson(status, applyFields(this.resource(n), this.fields(x, 'kind,id,name,mimeType')));
  }

  private newRevision(n: TreeNode): void {
    n.meta.headRevisionId = '0B' + randomBytes(20).toString('base64url');
  }

  private checkParents(parents: string[] | undefined): TreeNode {
    if (parents && parents.length > 1)
      throw driveError(403, 'Increasing the number of parents is not allowed', 'cannotAddParent');
    const parent = this.node(parents?.[0] ?? 'root');
    if (parent.kind !== 'folder')
      throw driveError(400, 'The specified parent is not a folder.', 'teamDrivesParentLimit');
    return parent;
  }

  private createFile(meta: MetadataBody, content: Buffer | undefined): TreeNode {
    const parent = this.checkParents(meta.parents);
    const isFolder = meta.mimeType === FOLDER_MIME;
    if (isFolder && content && content.byteLength > 0) throw invalid('A folder cannot have content');
    const n = this.tree.create(
      parent,
      meta.name ?? 'Untitled',
      isFolder ? 'folder' : 'file',
      content ?? Buffer.alloc(0),
      {
        clientModifiedMs: meta.modifiedTime ? Date.parse(meta.modifiedTime) : undefined,
        meta: {
          ...(meta.mimeType ? { mimeType: meta.mimeType } : {}),
          ...(meta.description !== undefined ? { description: meta.description } : {}),
          ...(meta.appProperties ? { appProperties: JSON.stringify(meta.appProperties) } : {}),
        },
      },
    );
    // Creation times strictly increase, as between two requests to Drive: a loopback round
    // trip can be shorter than the millisecond createdTime resolves, and clients order
    // same-name items by it.
    n.createdMs = Math.max(n.createdMs, this.lastCreatedMs + 1);
    this.lastCreatedMs = n.createdMs;
    if (!isFolder) this.newRevision(n);
    return n;
  }

  private applyMetadata(
    n: TreeNode,
    meta: MetadataBody,
    addParents?: string | null,
    removeParents?: string | null,
  ): void {
    if (meta.parents !== undefined)
      throw driveError(
        403,
        'The parents field is not directly writable in update requests. Use the addParents and removeParents parameters instead.',
        'fieldNotWritable',
      );
    let parent = n.parentId === null ? undefined : this.tree.get(n.parentId);
    if (addParents) {
      const ids = addParents.split(',');
      if (ids.length > 1)
        throw driveError(403, 'Increasing the number of parents is not allowed', 'cannotAddParent');
      const target = this.node(ids[0] as string);
      if (target.kind !== 'folder') throw invalid('The specified parent is not a folder.', 'addParents');
      if (this.tree.isAncestor(n, target))
        throw driveError(400, 'A folder cannot be moved into itself or its descendants.', 'invalidParent');
      if (!removeParents || !removeParents.split(',').includes(n.parentId ?? '')) {
        throw driveError(403, 'Increasing the number of parents is not allowed', 'cannotAddParent');
      }
      parent = target;
    }
    const name = meta.name ?? n.name;
    if (parent && (parent.id !== n.parentId || name !== n.name)) this.tree.move(n, parent, name);
    let touched = false;
    if (meta.modifiedTime !== undefined) {
      n.clientModifiedMs = Date.parse(meta.modifiedTime);
      touched = true;
    }
    if (meta.description !== undefined) {
      n.meta.description = meta.description;
      touched = true;
    }
    if (meta.trashed !== undefined) {
      n.meta.trashed = String(meta.trashed);
      touched = true;
    }
    if (meta.appProperties) {
      n.meta.appProperties = JSON.stringify(meta.appProperties);
      touched = true;
    }
    if (touched) this.tree.touch(n);
  }

  private parseMeta(value: unknown): MetadataBody {
    const r = MetadataBody.safeParse(value ?? {});
    if (!r.success) throw invalid(`Invalid JSON payload received. ${r.error.issues[0]?.message ?? ''}`);
    return r.data;
  }

  // ---- handlers ----

  private async createMetadataOnly(x: Exchange): Promise<void> {
    const n = this.createFile(this.parseMeta(await x.json()), undefined);
    await this.sendFile(x, n);
  }

  private async copy(x: Exchange, id: string): Promise<void> {
    const src = this.node(id);
    if (src.kind === 'folder')
      throw driveError(403, 'This file cannot be copied by the user.', 'cannotCopyFile');
    const meta = this.parseMeta(await x.json());
    const parentIds = meta.parents ?? (src.parentId ? [src.parentId] : undefined);
    const n = this.createFile(
      { ...meta, parents: parentIds, name: meta.name ?? `Copy of ${src.name}`, mimeType: src.meta.mimeType },
      Buffer.from(src.content),
    );
    await this.sendFile(x, n);
  }

  /** Multipart body: metadata JSON part, then the media part. */
  private parseMultipart(x: Exchange, body: Buffer): { meta: unknown; media: Buffer } {
    const ct = x.header('content-type') ?? '';
    const m = /boundary="?([^";]+)"?/i.exec(ct);
    if (!/^multipart\/related/i.test(ct) || !m) throw invalid('Invalid multipart request with 0 mime parts.');
    const boundary = Buffer.from(`--${m[1]}`);
    const parts: Buffer[] = [];
    let at = body.indexOf(boundary);
    while (at >= 0) {
      const start = at + boundary.byteLength;
      if (body.subarray(start, start + 2).toString() === '--') break;
      const next = body.indexOf(boundary, start);
      if (next < 0) break;
      parts.push(body.subarray(start, next));
      at = next;
    }
    if (parts.length !== 2) throw invalid(`Invalid multipart request with ${parts.length} mime parts.`);
    const split = (part: Buffer): Buffer => {
      const sep = part.indexOf('\r\n\r\n');
      if (sep < 0) throw invalid('Malformed multipart body.');
      let content = part.subarray(sep + 4);
      if (content.subarray(-2).toString() === '\r\n') content = content.subarray(0, -2);
      return content;
    };
    let meta: unknown;
    try {
      meta = JSON.parse(split(parts[0] as Buffer).toString('utf8'));
    } catch {
      throw invalid('Invalid JSON payload received.');
    }
    return { meta, media: split(parts[1] as Buffer) };
  }

  /** POST /upload/drive/v3/files (create) or PATCH /upload/drive/v3/files/{id} (update). */
  private async upload(x: Exchange, fileId?: string): Promise<void> {
    const uploadType = x.url.searchParams.get('uploadType');
    const existing = fileId === undefined ? undefined : this.node(fileId);
    if (existing?.kind === 'folder') throw driveError(400, 'A folder cannot have content.', 'invalid');
    const addParents = x.url.searchParams.get('addParents');
    const removeParents = x.url.searchParams.get('removeParents');
    if (uploadType === 'resumable') {
      const meta = this.parseMeta(await x.json());
      const id = randomBytes(24).toString('base64url');
      const total = x.header('x-upload-content-length');
      this.sessions.set(id, {
        id,
        api: 'v3',
        fileId,
        metadata: meta,
        chunks: [],
        received: 0,
        total: total === undefined ? undefined : Number(total),
        addParents: addParents ?? undefined,
        removeParents: removeParents ?? undefined,
        fields: x.url.searchParams.get('fields') ?? undefined,
      });
      const loc = new URL(x.url.pathname, this.url);
      loc.searchParams.set('uploadType', 'resumable');
      loc.searchParams.set('upload_id', id);
      await x.send(200, Buffer.alloc(0), { location: loc.toString(), 'x-guploader-uploadid': id });
      return;
    }
    const body = await x.body();
    let meta: MetadataBody = {};
    let media: Buffer;
    if (uploadType === 'multipart') {
      const parts = this.parseMultipart(x, body);
      meta = this.parseMeta(parts.meta);
      media = parts.media;
    } else if (uploadType === 'media') media = body;
    else throw invalid('Invalid upload type', 'uploadType');
    const n = this.finishUpload(existing, meta, media, addParents, removeParents);
    await this.sendFile(x, n);
  }

  /** A v2 files.update body as the v3 metadata the update applies. */
  private parseMetaV2(value: unknown, x: Exchange, n: TreeNode): MetadataBody {
    const r = MetadataBodyV2.safeParse(value ?? {});
    if (!r.success) throw invalid(`Invalid JSON payload received. ${r.error.issues[0]?.message ?? ''}`);
    const v2 = r.data;
    if (v2.parents && (v2.parents.length !== 1 || v2.parents[0]?.id !== n.parentId)) {
      // v2 can move by rewriting `parents`; the emulator does not implement that.
      throw invalid('Changing parents through v2 files.update is not supported by the emulator', 'parents');
    }
    // v2 keeps modifiedDate from the body only with setModifiedDate=true; otherwise it is now.
    const setModified = x.url.searchParams.get('setModifiedDate') === 'true';
    return {
      ...(v2.title !== undefined ? { name: v2.title } : {}),
      ...(v2.description !== undefined ? { description: v2.description } : {}),
      ...(v2.labels?.trashed !== undefined ? { trashed: v2.labels.trashed } : {}),
      ...(setModified && v2.modifiedDate !== undefined ? { modifiedTime: v2.modifiedDate } : {}),
    };
  }

  private async sendFileV2(x: Exchange, n: TreeNode): Promise<void> {
    await x.sendJson(200, applyFields(this.resourceV2(n), this.fields(x, '*')));
  }

  /** GET /drive/v2/files/{id}: metadata (v2 answers the whole resource unless `fields` says). */
  private async getV2(x: Exchange, id: string): Promise<void> {
    await this.sendFileV2(x, this.node(id));
  }

  /** PUT /upload/drive/v2/files/{id}: new content (and metadata), under If-Match when given. */
  private async uploadV2(x: Exchange, id: string): Promise<void> {
    const n = this.node(id);
    if (n.kind === 'folder') throw driveError(400, 'A folder cannot have content.', 'invalid');
    const ifMatch = x.header('if-match');
    this.checkIfMatch(ifMatch, n);
    const uploadType = x.url.searchParams.get('uploadType');
    if (uploadType === 'resumable') {
      const meta = this.parseMetaV2(await x.json(), x, n);
      const session = randomBytes(24).toString('base64url');
      const total = x.header('x-upload-content-length');
      this.sessions.set(session, {
        id: session,
        api: 'v2',
        ifMatch,
        fileId: id,
        metadata: meta,
        chunks: [],
        received: 0,
        total: total === undefined ? undefined : Number(total),
        fields: x.url.searchParams.get('fields') ?? undefined,
      });
      const loc = new URL(x.url.pathname, this.url);
      loc.searchParams.set('uploadType', 'resumable');
      loc.searchParams.set('upload_id', session);
      await x.send(200, Buffer.alloc(0), { location: loc.toString(), 'x-guploader-uploadid': session });
      return;
    }
    const body = await x.body();
    let meta: MetadataBody = {};
    let media: Buffer;
    if (uploadType === 'multipart') {
      const parts = this.parseMultipart(x, body);
      meta = this.parseMetaV2(parts.meta, x, n);
      media = parts.media;
    } else if (uploadType === 'media') media = body;
    else throw invalid('Invalid upload type', 'uploadType');
    await this.sendFileV2(x, this.finishUpload(n, meta, media));
  }

  /**
   * PUT (or PATCH) /drive/v2/files/{id}: metadata only (title, description, labels.trashed —
   * a move to the trash), under If-Match when given.
   */
  private async updateMetadataV2(x: Exchange, id: string): Promise<void> {
    const n = this.changeable(id);
    this.checkIfMatch(x.header('if-match'), n);
    this.applyMetadata(n, this.parseMetaV2(await x.json(), x, n));
    await this.sendFileV2(x, n);
  }

  /** DELETE /drive/v2/files/{id}: permanently, under If-Match when given; 204. */
  private async deleteV2(x: Exchange, id: string): Promise<void> {
    const n = this.changeable(id);
    this.checkIfMatch(x.header('if-match'), n);
    this.tree.remove(n);
    await x.send(204, Buffer.alloc(0));
  }

  private finishUpload(
    existing: TreeNode | undefined,
    meta: MetadataBody,
    media: Buffer,
    addParents?: string | null,
    removeParents?: string | null,
  ): TreeNode {
    if (!existing) return this.createFile(meta, media);
    this.newRevision(existing);
    this.tree.setContent(existing, media, meta.modifiedTime ? Date.parse(meta.modifiedTime) : undefined);
    const { modifiedTime: _m, ...rest } = meta;
    this.applyMetadata(existing, rest, addParents, removeParents);
    return existing;
  }

  private rangeHeader(s: ResumableSession): Record<string, string> {
    return s.received > 0 ? { range: `bytes=0-${s.received - 1}` } : {};
  }

  private async resumableChunk(x: Exchange): Promise<void> {
    const id = x.url.searchParams.get('upload_id') ?? '';
    const s = this.sessions.get(id);
    if (!s) throw driveError(404, 'Upload session not found or expired.', 'notFound');
    if (x.method === 'DELETE') {
      this.sessions.delete(id);
      await x.send(499, Buffer.alloc(0));
      return;
    }
    if (x.method !== 'PUT' && x.method !== 'POST') throw invalid('Method not allowed for an upload session');
    const body = await x.body();
    const cr =
      x.header('content-range') ??
      (body.byteLength === 0 ? 'bytes */*' : `bytes 0-${body.byteLength - 1}/${body.byteLength}`);
    const status = /^bytes \*\/(\d+|\*)$/.exec(cr);
    const chunk = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(cr);
    let total: number | undefined;
    if (status) {
      if (status[1] !== '*') total = Number(status[1]);
    } else if (chunk) {
      const start = Number(chunk[1]);
      const end = Number(chunk[2]);
      if (chunk[3] !== '*') total = Number(chunk[3]);
      if (end - start + 1 !== body.byteLength) throw invalid('Content-Range does not match the body length');
      if (start > s.received) {
        // A gap: the client must resume from what we report.
        await x.send(308, Buffer.alloc(0), this.rangeHeader(s));
        return;
      }
      const fresh = body.subarray(s.received - start);
      const isLast = total !== undefined && end + 1 === total;
      if (!isLast && (end + 1) % CHUNK_GRANULARITY !== 0) {
        throw invalid(
          `Chunk size must be a multiple of ${CHUNK_GRANULARITY} bytes except for the last chunk`,
        );
      }
      s.chunks.push(fresh);
      s.received += fresh.byteLength;
    } else throw invalid('Invalid Content-Range', 'Content-Range');
    if (total !== undefined) {
      if (s.total !== undefined && s.total !== total)
        throw invalid('Total size differs from X-Upload-Content-Length');
      s.total = total;
    }
    if (s.total !== undefined && s.received > s.total) throw invalid('More bytes than the declared total');
    if (s.total !== undefined && s.received === s.total) {
      this.sessions.delete(id);
      const existing = s.fileId === undefined ? undefined : this.tree.get(s.fileId);
      if (s.fileId !== undefined && !existing) throw notFound(s.fileId);
      // The precondition holds for the commit, not only for opening the session.
      if (existing) this.checkIfMatch(s.ifMatch, existing);
      const n = this.finishUpload(
        existing,
        s.metadata,
        Buffer.concat(s.chunks),
        s.addParents,
        s.removeParents,
      );
      await x.sendJson(
        200,
        s.api === 'v2'
          ? applyFields(this.resourceV2(n), parseFields(s.fields ?? '*'))
          : applyFields(this.resource(n), parseFields(s.fields ?? 'kind,id,name,mimeType')),
      );
      return;
    }
    await x.send(308, Buffer.alloc(0), this.rangeHeader(s));
  }

  private async get(x: Exchange, id: string): Promise<void> {
    const n = this.node(id);
    if (x.url.searchParams.get('alt') === 'media') {
      if (n.kind === 'folder') {
        throw driveError(
          403,
          'Only files with binary content can be downloaded. Use Export with Docs Editors files.',
          'fileNotDownloadable',
          'global',
          { locationType: 'parameter', location: 'alt' },
        );
      }
      await sendContent(
        x,
        n.content,
        {
          'content-type': n.meta.mimeType ?? 'application/octet-stream',
          etag: `"${n.meta.headRevisionId}"`,
        },
        () =>
          driveError(
            416,
            'Request range not satisfiable',
            'requestedRangeNotSatisfiable',
            'global',
            {},
            { 'content-range': `bytes */${n.content.byteLength}` },
          ),
      );
      return;
    }
    await this.sendFile(x, n);
  }

  private async updateMetadata(x: Exchange, id: string): Promise<void> {
    const n = this.changeable(id);
    this.applyMetadata(
      n,
      this.parseMeta(await x.json()),
      x.url.searchParams.get('addParents'),
      x.url.searchParams.get('removeParents'),
    );
    await this.sendFile(x, n);
  }

  private async delete(x: Exchange, id: string): Promise<void> {
    const n = this.changeable(id);
    this.tree.remove(n);
    await x.send(204, Buffer.alloc(0));
  }

  private async list(x: Exchange): Promise<void> {
    const q = x.url.searchParams;
    const pageSize = q.has('pageSize') ? Number(q.get('pageSize')) : 100;
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000)
      throw invalid('Invalid Value', 'pageSize');
    const fields = this.fields(x, 'kind,incompleteSearch,nextPageToken,files(kind,id,name,mimeType)');
    let ids: string[];
    let offset = 0;
    const token = q.get('pageToken');
    if (token) {
      const saved = this.pageTokens.get(token);
      if (!saved) throw invalid('Invalid Value', 'pageToken');
      this.pageTokens.delete(token);
      ({ ids, offset } = saved);
    } else {
      const terms = parseQuery(q.get('q') ?? '');
      const parents = terms.filter((t) => t.kind === 'parent');
      let candidates: TreeNode[];
      if (parents.length > 0) {
        candidates = parents.flatMap((t) =>
          t.kind === 'parent' ? this.tree.children(t.id === 'root' ? ROOT_ID : t.id) : [],
        );
      } else candidates = [...this.tree.all()].filter((n) => n.parentId !== null);
      const matches = candidates.filter((n) => terms.every((t) => this.matches(n, t)));
      matches.sort((a, b) =>
        a.kind !== b.kind
          ? a.kind === 'folder'
            ? -1
            : 1
          : a.name < b.name
            ? -1
            : a.name > b.name
              ? 1
              : a.createdMs - b.createdMs,
      );
      ids = matches.map((n) => n.id);
    }
    const page = ids.slice(offset, offset + pageSize);
    const out: Record<string, unknown> = {
      kind: 'drive#fileList',
      incompleteSearch: false,
      files: page.flatMap((id) => {
        const n = this.tree.get(id);
        return n ? [this.resource(n)] : [];
      }),
    };
    if (offset + pageSize < ids.length) {
      const next = randomBytes(16).toString('base64url');
      this.pageTokens.set(next, { ids, offset: offset + pageSize });
      if (this.pageTokens.size > 1000) this.pageTokens.delete(this.pageTokens.keys().next().value as string);
      out.nextPageToken = next;
    }
    await x.sendJson(200, applyFields(out, fields));
  }

  private matches(n: TreeNode, t: Term): boolean {
    switch (t.kind) {
      case 'parent':
        return n.parentId === (t.id === 'root' ? ROOT_ID : t.id);
      case 'name':
        return t.op === '='
          ? n.name === t.value
          : t.op === '!='
            ? n.name !== t.value
            : n.name.includes(t.value);
      case 'trashed':
        return this.isTrashed(n) === t.value;
      case 'mimeType': {
        const mime = n.meta.mimeType ?? (n.kind === 'folder' ? FOLDER_MIME : 'application/octet-stream');
        return t.op === '=' ? mime === t.value : mime !== t.value;
      }
    }
  }

  private async changes(x: Exchange): Promise<void> {
    const q = x.url.searchParams;
    const token = q.get('pageToken');
    if (!token || !/^\d{1,15}$/.test(token))
      throw driveError(400, 'Invalid Value', 'invalid', 'global', {
        locationType: 'parameter',
        location: 'pageToken',
      });
    const from = Number(token);
    if (from > this.tree.seq + 1 || from <= this.tree.oldestSeq() || from < this.minPageToken) {
      throw driveError(400, 'Invalid Value', 'invalid', 'global', {
        locationType: 'parameter',
        location: 'pageToken',
      });
    }
    const pageSize = q.has('pageSize') ? Number(q.get('pageSize')) : 100;
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000)
      throw invalid('Invalid Value', 'pageSize');
    const includeRemoved = q.get('includeRemoved') !== 'false';
    // A moved folder is one change: what moved with it is not reported (its parents did
    // not change).
    const {
      records,
      lastSeq: last,
      more,
    } = this.tree.latestChanges(
      from - 1,
      pageSize,
      (rec) => rec.id,
      (rec) => rec.inherited === true,
    );
    const changes: unknown[] = [];
    for (const rec of records) {
      const n = this.tree.get(rec.id);
      const time = new Date().toISOString();
      if (!n) {
        if (includeRemoved)
          changes.push({ kind: 'drive#change', changeType: 'file', time, removed: true, fileId: rec.id });
      } else {
        changes.push({
          kind: 'drive#change',
          changeType: 'file',
          time,
          removed: false,
          fileId: n.id,
          file: this.resource(n),
        });
      }
    }
    const out: Record<string, unknown> = { kind: 'drive#changeList', changes };
    if (more) out.nextPageToken = String(last + 1);
    else out.newStartPageToken = String(last + 1);
    await x.sendJson(
      200,
      applyFields(
        out,
        this.fields(
          x,
          'kind,nextPageToken,newStartPageToken,changes(kind,changeType,time,removed,fileId,file(kind,id,name,mimeType))',
        ),
      ),
    );
  }
}
