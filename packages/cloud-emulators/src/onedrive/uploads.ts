/**
 * The OneDrive emulator's uploads: simple upload (`PUT …:/content`) and upload sessions
 * (`uploadUrl` on the transfer host, fragments in order in multiples of 320 KiB, 202 with
 * `nextExpectedRanges`, 201/200 on completion, 416 out of order, GET status, DELETE cancel).
 */
import { randomBytes } from 'node:crypto';
import { type Exchange } from '../http.ts';
import { type TreeNode } from '../tree.ts';
import { FRAGMENT, graphError, notFound, type UploadSession, SessionBody } from './protocol.ts';
import { OneDriveModel } from './model.ts';

export abstract class OneDriveUploads extends OneDriveModel {
  protected readonly sessions = new Map<string, UploadSession>();

  openSessions(): number {
    return this.sessions.size;
  }

  override stats(): Record<string, number> {
    return { openSessions: this.sessions.size };
  }

  /**
   * Where an upload's content goes: a path under a folder (created as needed), or an
   * existing item addressed by id (`/items/{id}/content`, a file only), whose content it replaces.
   */
  private uploadTarget(t: { base: string; rel: string | undefined }): { parent: TreeNode; name: string } {
    if (t.rel !== undefined) return this.parentFor(t, true);
    const n = this.mustResolve(t);
    if (n.kind !== 'file' || n.parentId === null)
      throw graphError(400, 'invalidRequest', 'Cannot upload content to a folder');
    return { parent: this.tree.get(n.parentId) as TreeNode, name: n.name };
  }

  protected async simpleUpload(x: Exchange, t: { base: string; rel: string | undefined }): Promise<void> {
    const data = await x.body();
    const max = this.opts.maxSimpleUploadBytes ?? 250 * 1000 * 1000;
    if (data.byteLength > max)
      throw graphError(413, 'requestEntityTooLarge', 'Use an upload session for files this large');
    const { parent, name } = this.uploadTarget(t);
    const { node, created } = this.store(parent, name, data, this.conflictParam(x, 'replace'), x);
    await x.sendJson(created ? 201 : 200, this.item(node));
  }

  // ---- upload sessions ----

  protected async createSession(x: Exchange, t: { base: string; rel: string | undefined }): Promise<void> {
    const r = SessionBody.safeParse((await x.json()) ?? {});
    if (!r.success) throw graphError(400, 'invalidRequest', 'Invalid request body');
    const { parent, name } = this.uploadTarget(t);
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

  protected sessionStatus(s: UploadSession): Record<string, unknown> {
    return {
      expirationDateTime: new Date(s.expires).toISOString(),
      nextExpectedRanges: [`${s.received}-${s.total === undefined ? '' : s.total - 1}`],
    };
  }

  protected async sessionRequest(x: Exchange, id: string): Promise<void> {
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
}
