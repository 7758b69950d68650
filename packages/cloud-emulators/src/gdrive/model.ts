/**
 * The Drive emulator's items: the tree, an item as a v3 and a v2 resource, etags and
 * If-Match, creating items and applying metadata (name, parents, trash, times), and the
 * two handlers that only touch metadata (files.create without content, files.copy). The
 * upload routes (uploads.ts) and the rest of the API (../gdrive.ts) build on this class.
 */
import { createHash, randomBytes } from 'node:crypto';
import { EmulatorServer, type Exchange, parseEntityTags } from '../http.ts';
import { Tree, type TreeNode } from '../tree.ts';
import {
  applyFields,
  driveError,
  type FieldTree,
  FOLDER_MIME,
  type GDriveEmulatorOptions,
  invalid,
  MetadataBody,
  notFound,
  parseFields,
  preconditionFailed,
  ROOT_ID,
} from './protocol.ts';

export abstract class GDriveModel extends EmulatorServer {
  readonly tree: Tree;
  private lastCreatedMs = 0;

  constructor(options: GDriveEmulatorOptions = {}) {
    super(options, { authorize: '/o/oauth2/v2/auth', token: '/token' });
    this.tree = new Tree({ caseInsensitive: false, rootId: ROOT_ID, dataDir: options.dataDir });
  }

  // ---- resources ----

  protected node(id: string): TreeNode {
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
  protected changeable(id: string): TreeNode {
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
  protected checkIfMatch(header: string | undefined, n: TreeNode): void {
    if (header === undefined) return;
    // Quoted entity tags as sent back from the `etag` field; a bare value is taken as one tag.
    const tags = parseEntityTags(header);
    if (tags.length === 0 && header.trim() !== '') tags.push(`"${header.trim().replace(/^"|"$/g, '')}"`);
    if (!tags.includes('*') && !tags.includes(this.etag(n))) throw preconditionFailed();
  }

  protected fields(x: Exchange, defaults: string): FieldTree {
    return parseFields(x.url.searchParams.get('fields') ?? defaults);
  }

  protected async sendFile(x: Exchange, n: TreeNode, status = 200): Promise<void> {
    await x.sendJson(status, applyFields(this.resource(n), this.fields(x, 'kind,id,name,mimeType')));
  }

  protected newRevision(n: TreeNode): void {
    n.meta.headRevisionId = '0B' + randomBytes(20).toString('base64url');
  }

  protected checkParents(parents: string[] | undefined): TreeNode {
    if (parents && parents.length > 1)
      throw driveError(403, 'Increasing the number of parents is not allowed', 'cannotAddParent');
    const parent = this.node(parents?.[0] ?? 'root');
    if (parent.kind !== 'folder')
      throw driveError(400, 'The specified parent is not a folder.', 'teamDrivesParentLimit');
    return parent;
  }

  protected createFile(meta: MetadataBody, content: Buffer | undefined): TreeNode {
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

  protected applyMetadata(
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

  protected parseMeta(value: unknown): MetadataBody {
    const r = MetadataBody.safeParse(value ?? {});
    if (!r.success) throw invalid(`Invalid JSON payload received. ${r.error.issues[0]?.message ?? ''}`);
    return r.data;
  }

  // ---- handlers ----

  protected async createMetadataOnly(x: Exchange): Promise<void> {
    const n = this.createFile(this.parseMeta(await x.json()), undefined);
    await this.sendFile(x, n);
  }

  protected async copy(x: Exchange, id: string): Promise<void> {
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
}
