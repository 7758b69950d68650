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
import { randomBytes } from 'node:crypto';
import { HttpError, type Route, type Exchange, sendContent } from './http.ts';
import type { TreeNode } from './tree.ts';
import {
  applyFields,
  driveError,
  FOLDER_MIME,
  invalid,
  parseFields,
  parseQuery,
  ROOT_ID,
  type Term,
} from './gdrive/protocol.ts';
import { GDriveUploads } from './gdrive/uploads.ts';

export {
  FOLDER_MIME,
  applyFields,
  parseFields,
  parseQuery,
  type GDriveEmulatorOptions,
} from './gdrive/protocol.ts';

/**
 * Files are split along the API's route groups: gdrive/protocol.ts (errors, `fields`, `q`,
 * bodies), gdrive/model.ts (items as resources, metadata, etags), gdrive/uploads.ts
 * (media, multipart, resumable, v2 conditional writes); this class holds the route table,
 * files.get/list/update/delete, the change feed and the fault and auth answers.
 */
export class GDriveEmulator extends GDriveUploads {
  private pageTokens = new Map<string, { ids: string[]; offset: number }>();
  private minPageToken = 0;

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
