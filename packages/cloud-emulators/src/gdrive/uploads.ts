/**
 * The Drive emulator's upload routes: files.create and files.update with content
 * (uploadType media, multipart, resumable), the v2 files.get/update/delete a client uses for
 * conditional writes under If-Match, and the resumable sessions (chunks of a multiple of
 * 256 KiB, 308 Resume Incomplete with `Range`, status queries, cancel).
 */
import { randomBytes } from 'node:crypto';
import type { Exchange } from '../http.ts';
import type { TreeNode } from '../tree.ts';
import { GDriveModel } from './model.ts';
import {
  applyFields,
  CHUNK_GRANULARITY,
  driveError,
  invalid,
  type MetadataBody,
  MetadataBodyV2,
  notFound,
  parseFields,
  type ResumableSession,
} from './protocol.ts';

export abstract class GDriveUploads extends GDriveModel {
  protected readonly sessions = new Map<string, ResumableSession>();

  /** Resumable upload sessions not completed nor cancelled. */
  openSessions(): number {
    return this.sessions.size;
  }

  override stats(): Record<string, number> {
    return { openSessions: this.sessions.size };
  }

  /** Multipart body: metadata JSON part, then the media part. */
  protected parseMultipart(x: Exchange, body: Buffer): { meta: unknown; media: Buffer } {
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

  /**
   * Open a resumable session for an initiating request (either API): its total from
   * X-Upload-Content-Length, its `fields`; answered with the session's Location.
   */
  private async openSession(
    x: Exchange,
    s: Omit<ResumableSession, 'id' | 'chunks' | 'received' | 'total' | 'fields'>,
  ): Promise<void> {
    const id = randomBytes(24).toString('base64url');
    const total = x.header('x-upload-content-length');
    this.sessions.set(id, {
      ...s,
      id,
      chunks: [],
      received: 0,
      total: total === undefined ? undefined : Number(total),
      fields: x.url.searchParams.get('fields') ?? undefined,
    });
    const loc = new URL(x.url.pathname, this.url);
    loc.searchParams.set('uploadType', 'resumable');
    loc.searchParams.set('upload_id', id);
    await x.send(200, Buffer.alloc(0), { location: loc.toString(), 'x-guploader-uploadid': id });
  }

  /** The body of a one-request upload: media alone, or multipart (metadata read by `parse`). */
  private async simpleBody(
    x: Exchange,
    uploadType: string | null,
    parse: (meta: unknown) => MetadataBody,
  ): Promise<{ meta: MetadataBody; media: Buffer }> {
    const body = await x.body();
    if (uploadType === 'multipart') {
      const parts = this.parseMultipart(x, body);
      return { meta: parse(parts.meta), media: parts.media };
    }
    if (uploadType === 'media') return { meta: {}, media: body };
    throw invalid('Invalid upload type', 'uploadType');
  }

  /** POST /upload/drive/v3/files (create) or PATCH /upload/drive/v3/files/{id} (update). */
  protected async upload(x: Exchange, fileId?: string): Promise<void> {
    const uploadType = x.url.searchParams.get('uploadType');
    const existing = fileId === undefined ? undefined : this.node(fileId);
    if (existing?.kind === 'folder') throw driveError(400, 'A folder cannot have content.', 'invalid');
    const addParents = x.url.searchParams.get('addParents');
    const removeParents = x.url.searchParams.get('removeParents');
    if (uploadType === 'resumable') {
      await this.openSession(x, {
        api: 'v3',
        fileId,
        metadata: this.parseMeta(await x.json()),
        addParents: addParents ?? undefined,
        removeParents: removeParents ?? undefined,
      });
      return;
    }
    const { meta, media } = await this.simpleBody(x, uploadType, (v) => this.parseMeta(v));
    const n = this.finishUpload(existing, meta, media, addParents, removeParents);
    await this.sendFile(x, n);
  }

  /** A v2 files.update body as the v3 metadata the update applies. */
  protected parseMetaV2(value: unknown, x: Exchange, n: TreeNode): MetadataBody {
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

  protected async sendFileV2(x: Exchange, n: TreeNode): Promise<void> {
    await x.sendJson(200, applyFields(this.resourceV2(n), this.fields(x, '*')));
  }

  /** GET /drive/v2/files/{id}: metadata (v2 answers the whole resource unless `fields` says). */
  protected async getV2(x: Exchange, id: string): Promise<void> {
    await this.sendFileV2(x, this.node(id));
  }

  /** PUT /upload/drive/v2/files/{id}: new content (and metadata), under If-Match when given. */
  protected async uploadV2(x: Exchange, id: string): Promise<void> {
    const n = this.node(id);
    if (n.kind === 'folder') throw driveError(400, 'A folder cannot have content.', 'invalid');
    const ifMatch = x.header('if-match');
    this.checkIfMatch(ifMatch, n);
    const uploadType = x.url.searchParams.get('uploadType');
    if (uploadType === 'resumable') {
      await this.openSession(x, {
        api: 'v2',
        ifMatch,
        fileId: id,
        metadata: this.parseMetaV2(await x.json(), x, n),
      });
      return;
    }
    const { meta, media } = await this.simpleBody(x, uploadType, (v) => this.parseMetaV2(v, x, n));
    await this.sendFileV2(x, this.finishUpload(n, meta, media));
  }

  /**
   * PUT (or PATCH) /drive/v2/files/{id}: metadata only (title, description, labels.trashed —
   * a move to the trash), under If-Match when given.
   */
  protected async updateMetadataV2(x: Exchange, id: string): Promise<void> {
    const n = this.changeable(id);
    this.checkIfMatch(x.header('if-match'), n);
    this.applyMetadata(n, this.parseMetaV2(await x.json(), x, n));
    await this.sendFileV2(x, n);
  }

  /** DELETE /drive/v2/files/{id}: permanently, under If-Match when given; 204. */
  protected async deleteV2(x: Exchange, id: string): Promise<void> {
    const n = this.changeable(id);
    this.checkIfMatch(x.header('if-match'), n);
    this.tree.remove(n);
    await x.send(204, Buffer.alloc(0));
  }

  protected finishUpload(
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

  protected rangeHeader(s: ResumableSession): Record<string, string> {
    return s.received > 0 ? { range: `bytes=0-${s.received - 1}` } : {};
  }

  protected async resumableChunk(x: Exchange): Promise<void> {
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
}
