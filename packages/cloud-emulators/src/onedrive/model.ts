/**
 * The OneDrive emulator's items: the tree (case-insensitive), an item as a Graph driveItem
 * (eTag, cTag, hashes, folder sizes), path and id addressing, name rules, If-Match, and
 * the one store rule every write goes through (conflictBehavior fail / replace / rename,
 * missing parents created). uploads.ts and ../onedrive.ts build on this class.
 */
import { createHash } from 'node:crypto';
import { EmulatorServer, parseEntityTags, type Exchange } from '../http.ts';
import { Tree, type TreeNode } from '../tree.ts';
import {
  type OneDriveEmulatorOptions,
  DRIVE_ID,
  ROOT_ID,
  INVALID_NAME,
  RESERVED,
  graphError,
  notFound,
} from './protocol.ts';

export abstract class OneDriveModel extends EmulatorServer {
  readonly tree: Tree;
  protected readonly opts: OneDriveEmulatorOptions;

  constructor(options: OneDriveEmulatorOptions) {
    super(options, {
      authorize: '/common/oauth2/v2.0/authorize',
      token: '/common/oauth2/v2.0/token',
      ...(options.rotateRefreshTokens ? { rotateRefreshTokens: true } : {}),
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

  protected get transferOrigin(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  // ---- items ----

  protected etag(n: TreeNode): string {
    return `"{${n.id}},${n.version}"`;
  }

  protected ctag(n: TreeNode): string {
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

  protected folderSize(n: TreeNode): number {
    let total = 0;
    for (const k of this.tree.subtree(n)) if (k.kind === 'file') total += k.content.byteLength;
    return total;
  }

  protected resolve(t: { base: string; rel: string | undefined }): TreeNode | undefined {
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

  protected mustResolve(t: { base: string; rel: string | undefined }): TreeNode {
    const n = this.resolve(t);
    if (!n) throw notFound();
    return n;
  }

  protected checkName(name: string): void {
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
  protected parentFor(
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

  protected checkIfMatch(x: Exchange, n: TreeNode | undefined): void {
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

  protected uniqueName(parent: TreeNode, name: string): string {
    const dot = name.lastIndexOf('.');
    const stem = dot > 0 ? name.slice(0, dot) : name;
    const ext = dot > 0 ? name.slice(dot) : '';
    for (let i = 1; ; i++) {
      const candidate = `${stem} ${i}${ext}`;
      if (this.tree.childrenNamed(parent.id, candidate).length === 0) return candidate;
    }
  }

  /** Store content at parent/name under a conflict behaviour; returns the item and whether it was created. */
  protected store(
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

  protected conflictParam(
    x: Exchange,
    fallback: 'fail' | 'replace' | 'rename',
  ): 'fail' | 'replace' | 'rename' {
    const v = x.url.searchParams.get('@microsoft.graph.conflictBehavior');
    if (v === null) return fallback;
    if (v !== 'fail' && v !== 'replace' && v !== 'rename')
      throw graphError(400, 'invalidRequest', 'Invalid conflictBehavior');
    return v;
  }
}
