/**
 * The Dropbox emulator's items: the tree (case-insensitive, case-preserving), revisions,
 * an item as Dropbox metadata, path lookup and name rules, and the one commit rule every
 * write goes through (add / overwrite / update with strict_conflict). Argument parsing for
 * RPC and content endpoints lives here too. uploads.ts, listing.ts and ../dropbox.ts build
 * on this class.
 */
import { z } from 'zod';
import { EmulatorServer, HttpError, type Exchange } from '../http.ts';
import { DropboxContentHasher } from '../hashes.ts';
import { Tree, type TreeNode, foldName } from '../tree.ts';
import {
  type DropboxEmulatorOptions,
  CommitInfo,
  DISALLOWED_NAMES,
  iso,
  routeError,
  writeConflict,
  badRequest,
} from './protocol.ts';

export abstract class DropboxModel extends EmulatorServer {
  readonly tree: Tree;
  private revCounter = 0x100000000;
  protected readonly waiters = new Set<() => void>();
  protected readonly opts: DropboxEmulatorOptions;
  /**
   * Longpoll timeouts are multiplied by this (options.longpollTimeScale; default 1). A test
   * may change it while running: a wait for a change must not end before a slow write lands.
   */
  longpollTimeScale: number;

  constructor(options: DropboxEmulatorOptions = {}) {
    super(options, {
      authorize: '/oauth2/authorize',
      token: '/oauth2/token',
      extraTokenFields: { account_id: 'dbid:AAemulator', uid: '12345' },
    });
    this.opts = options;
    this.longpollTimeScale = options.longpollTimeScale ?? 1;
    this.tree = new Tree({
      caseInsensitive: true,
      rootId: 'id:root',
      idPrefix: 'id:',
      dataDir: options.dataDir,
    });
    for (const n of this.tree.all()) {
      const rev = n.meta.rev ? parseInt(n.meta.rev, 16) : 0;
      if (rev > this.revCounter) this.revCounter = rev;
    }
  }

  protected contentArg(endpoint: string, x: Exchange): unknown {
    const raw = x.header('dropbox-api-arg') ?? x.url.searchParams.get('arg') ?? undefined;
    if (raw === undefined)
      throw badRequest(endpoint, 'Must provide HTTP header "Dropbox-API-Arg" or URL parameter "arg".');
    if (/[^\x20-\x7e]/.test(raw)) {
      throw badRequest(endpoint, 'HTTP header "Dropbox-API-Arg": could not decode input as JSON');
    }
    try {
      return JSON.parse(raw) as unknown;
    } catch {
      throw badRequest(endpoint, 'HTTP header "Dropbox-API-Arg": could not decode input as JSON');
    }
  }

  protected parse<T extends z.ZodTypeAny>(schema: T, value: unknown, endpoint: string): z.infer<T> {
    const r = schema.safeParse(value);
    if (!r.success) {
      const issue = r.error.issues[0];
      throw badRequest(
        endpoint,
        `request body: ${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid'}`,
      );
    }
    return r.data as z.infer<T>;
  }

  // ---- metadata ----

  protected nextRev(): string {
    this.revCounter += 1;
    return this.revCounter.toString(16).padStart(12, '0');
  }

  metadata(node: TreeNode): Record<string, unknown> {
    const pathDisplay = this.tree.pathOf(node);
    if (node.kind === 'folder') {
      return {
        '.tag': 'folder',
        name: node.name,
        path_lower: foldName(pathDisplay),
        path_display: pathDisplay,
        id: node.id,
      };
    }
    return {
      '.tag': 'file',
      name: node.name,
      path_lower: foldName(pathDisplay),
      path_display: pathDisplay,
      id: node.id,
      client_modified: iso(node.clientModifiedMs),
      server_modified: iso(node.modifiedMs),
      rev: node.meta.rev,
      size: node.content.byteLength,
      is_downloadable: true,
      content_hash: this.tree.dropboxHash(node),
    };
  }

  /** Resolve a Dropbox path argument ('/a/b', 'id:…', 'rev:…'); '' is the root. */
  protected lookup(path: string, endpoint: string): TreeNode | undefined {
    if (path.startsWith('id:')) return this.tree.get(path);
    if (path.startsWith('rev:')) {
      for (const n of this.tree.all()) if (n.meta.rev === path.slice(4)) return n;
      return undefined;
    }
    if (path !== '' && !path.startsWith('/'))
      throw badRequest(
        endpoint,
        `request body: path: '${path}' did not match pattern '(/(.|[\\r\\n])*)?|id:.*|(ns:[0-9]+(/.*)?)'`,
      );
    if (path.endsWith('/') && path !== '/')
      throw badRequest(
        endpoint,
        `request body: path: '${path}' did not match pattern '(/(.|[\\r\\n])*)?|id:.*|(ns:[0-9]+(/.*)?)'`,
      );
    return this.tree.resolve(path.normalize('NFC'));
  }

  protected splitPath(path: string, endpoint: string): { parent: string; name: string } {
    if (!path.startsWith('/') || path === '/' || path.endsWith('/')) {
      throw badRequest(
        endpoint,
        `request body: path: '${path}' did not match pattern '(/(.|[\\r\\n])*)|(ns:[0-9]+(/.*)?)|(id:.*)'`,
      );
    }
    const p = path.normalize('NFC');
    const i = p.lastIndexOf('/');
    return { parent: p.slice(0, i), name: p.slice(i + 1) };
  }

  /** Find or create the folders leading to `parent`; a file in the way is a conflict. */
  protected ensureFolder(parent: string, outer: string): TreeNode {
    let cur = this.tree.root;
    if (parent === '') return cur;
    for (const seg of parent.slice(1).split('/')) {
      const next = this.tree.childrenNamed(cur.id, seg)[0];
      if (next && next.kind === 'file') throw writeConflict(outer, 'file_ancestor');
      cur = next ?? this.tree.create(cur, seg, 'folder');
    }
    return cur;
  }

  /** The folder at `parent` if it exists; undefined when missing; a file in the way throws. */
  protected findFolder(parent: string): TreeNode | undefined {
    let cur = this.tree.root;
    if (parent === '') return cur;
    for (const seg of parent.slice(1).split('/')) {
      const next = this.tree.childrenNamed(cur.id, seg)[0];
      if (!next) return undefined;
      if (next.kind === 'file') throw writeConflict('path', 'file_ancestor');
      cur = next;
    }
    return cur;
  }

  protected checkName(name: string, outer: string): void {
    if (DISALLOWED_NAMES.has(name.toLowerCase()) || name.includes('\\') || name.includes('\0')) {
      throw routeError([outer, 'disallowed_name'], { '.tag': outer, [outer]: { '.tag': 'disallowed_name' } });
    }
  }

  /** Apply a commit (files/upload, finish, finish_batch). `outer` wraps WriteErrors for the route. */
  protected commit(
    commit: z.infer<typeof CommitInfo>,
    data: Buffer,
    endpoint: string,
    wrap: (inner: { tags: string[]; error: Record<string, unknown> }) => HttpError,
  ): TreeNode {
    const { parent, name } = this.splitPath(commit.path, endpoint);
    const fail = (tags: string[], error: Record<string, unknown>): HttpError => wrap({ tags, error });
    if (DISALLOWED_NAMES.has(name.toLowerCase()))
      throw fail(['disallowed_name'], { '.tag': 'disallowed_name' });
    if (commit.content_hash !== undefined) {
      const got = new DropboxContentHasher().update(data).digestHex();
      if (got !== commit.content_hash)
        throw fail(['content_hash_mismatch'], { '.tag': 'content_hash_mismatch' });
    }
    const mode = typeof commit.mode === 'string' ? { '.tag': commit.mode } : commit.mode;
    const clientModified = commit.client_modified ? Date.parse(commit.client_modified) : undefined;
    // Parent folders: a file in the way is conflict/file_ancestor. Missing ones are only
    // created once the commit cannot fail any more (a failed commit changes nothing).
    let folder: TreeNode;
    try {
      const found = this.findFolder(parent);
      if (!found && mode['.tag'] === 'update' && commit.strict_conflict) {
        throw fail(['conflict', 'file'], { '.tag': 'conflict', conflict: { '.tag': 'file' } });
      }
      folder = found ?? this.ensureFolder(parent, 'path');
    } catch (e) {
      if (
        e instanceof HttpError &&
        e.status === 409 &&
        !String((e.body as { error_summary?: string }).error_summary).includes('file_ancestor')
      )
        throw e;
      throw fail(['conflict', 'file_ancestor'], {
        '.tag': 'conflict',
        conflict: { '.tag': 'file_ancestor' },
      });
    }
    let targetName = name;
    const conflictOr = (kind: 'file' | 'folder'): string => {
      if (!commit.autorename) {
        throw fail(['conflict', kind], { '.tag': 'conflict', conflict: { '.tag': kind } });
      }
      const dot = name.lastIndexOf('.');
      const stem = dot > 0 ? name.slice(0, dot) : name;
      const ext = dot > 0 ? name.slice(dot) : '';
      for (let i = 1; ; i++) {
        const candidate = `${stem} (${i})${ext}`;
        if (this.tree.childrenNamed(folder.id, candidate).length === 0) return candidate;
      }
    };
    const existing = this.tree.childrenNamed(folder.id, name)[0];
    if (existing?.kind === 'folder') targetName = conflictOr('folder');
    else if (existing) {
      const identical = existing.content.equals(data);
      if (mode['.tag'] === 'add') {
        if (identical) return existing; // not a conflict: the same content is already there
        targetName = conflictOr('file');
      } else if (mode['.tag'] === 'update') {
        if (existing.meta.rev !== (mode as { update: string }).update) {
          if (identical) return existing;
          targetName = conflictOr('file');
        } else {
          if (identical) return existing;
          existing.meta.rev = this.nextRev();
          this.tree.setContent(existing, data, clientModified);
          this.wake();
          return existing;
        }
      } else {
        if (identical) return existing; // Dropbox keeps the revision when nothing changed
        existing.meta.rev = this.nextRev();
        this.tree.setContent(existing, data, clientModified);
        this.wake();
        return existing;
      }
    } else if (mode['.tag'] === 'update' && commit.strict_conflict) {
      throw fail(['conflict', 'file'], { '.tag': 'conflict', conflict: { '.tag': 'file' } });
    }
    const node = this.tree.create(folder, targetName, 'file', data, {
      clientModifiedMs: clientModified,
      meta: { rev: this.nextRev() },
    });
    this.wake();
    return node;
  }

  protected wake(): void {
    for (const w of [...this.waiters]) w();
  }
}
