/**
 * Dropbox API v2 emulator: the api, content and notify hosts served on one port (the
 * route is the same path on every host). Follows the HTTP documentation at
 * https://www.dropbox.com/developers/documentation/http/documentation :
 * - RPC endpoints take JSON bodies; content endpoints take the argument in the
 *   `Dropbox-API-Arg` header (JSON, non-ASCII escaped as \uXXXX) or the `arg` query
 *   parameter, and return metadata in the `Dropbox-API-Result` header for downloads.
 * - Route errors are 409 with `{error_summary, error}` where `error` is the Stone union
 *   (`{".tag": "path", "path": {".tag": "not_found"}}`); bad arguments are 400 text;
 *   auth failures 401 `{error_summary, error: {".tag": "invalid_access_token"}}`;
 *   throttling 429 with Retry-After and a RateLimitError body.
 * - Paths are case-insensitive and case-preserving; `path_lower` is the lookup key.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import {
  type EmulatorOptions,
  EmulatorServer,
  type Exchange,
  HttpError,
  type Route,
  sendContent,
} from './http.ts';
import { DropboxContentHasher } from './hashes.ts';
import { Tree, type TreeNode, foldName } from './tree.ts';

export interface DropboxEmulatorOptions extends EmulatorOptions {
  /** Multiply longpoll timeouts by this (tests use a small factor). Default 1. */
  readonly longpollTimeScale?: number;
  /** `backoff` (seconds) in longpoll answers, asking clients to wait before the next call. Default none. */
  readonly longpollBackoffSeconds?: number;
  /** list_folder page size when the caller gives no limit. Default 500. */
  readonly defaultListLimit?: number;
}

const Path = z.string();
const WriteModeSchema = z.union([
  z.literal('add'),
  z.literal('overwrite'),
  z.object({ '.tag': z.literal('add') }),
  z.object({ '.tag': z.literal('overwrite') }),
  z.object({ '.tag': z.literal('update'), update: z.string().min(9) }),
]);
const CommitInfo = z.object({
  path: Path,
  mode: WriteModeSchema.default('add'),
  autorename: z.boolean().default(false),
  client_modified: z.string().optional(),
  mute: z.boolean().optional(),
  strict_conflict: z.boolean().default(false),
  content_hash: z.string().optional(),
});
const Cursor = z.object({ session_id: z.string(), offset: z.number().int().min(0) });
const FinishArg = z.object({ cursor: Cursor, commit: CommitInfo, content_hash: z.string().optional() });

interface Session {
  id: string;
  chunks: Buffer[];
  offset: number;
  closed: boolean;
  finished: boolean;
}

interface ListCursor {
  /** path_lower of the listed folder ('' for the root). */
  p: string;
  r: boolean;
  /** Change-log position once the snapshot is done. */
  s: number;
  /** Snapshot key and offset while paging through the initial listing. */
  k?: string;
  o?: number;
  /** Expiry epoch. */
  e: number;
  l: number;
}

const DISALLOWED_NAMES = new Set([
  'desktop.ini',
  'thumbs.db',
  '.ds_store',
  'icon\r',
  '.dropbox',
  '.dropbox.attr',
]);

function iso(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** A 409 route error: `tags` is the chain of union tags, `error` the Stone-encoded union. */
export function routeError(tags: string[], error: unknown): HttpError {
  return new HttpError(409, {
    error_summary: `${tags.join('/')}/.${randomBytes(2).toString('hex')}`,
    error,
  });
}

function lookupError(outer: string, tag: string): HttpError {
  return routeError([outer, tag], { '.tag': outer, [outer]: { '.tag': tag } });
}

function writeConflict(outer: string, kind: 'file' | 'folder' | 'file_ancestor'): HttpError {
  return routeError([outer, 'conflict', kind], {
    '.tag': outer,
    [outer]: { '.tag': 'conflict', conflict: { '.tag': kind } },
  });
}

function badRequest(endpoint: string, message: string): HttpError {
  return new HttpError(400, `Error in call to API function "${endpoint}": ${message}`);
}

/** Escape a JSON text for an HTTP header the way Dropbox does (non-ASCII as \uXXXX). */
export function headerSafeJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'),
  );
}

export class DropboxEmulator extends EmulatorServer {
  readonly tree: Tree;
  private readonly sessions = new Map<string, Session>();
  private readonly snapshots = new Map<string, { entries: unknown[]; seq: number }>();
  private epoch = 1;
  private revCounter = 0x100000000;
  private readonly waiters = new Set<() => void>();
  private readonly opts: DropboxEmulatorOptions;
  private batchInFlight = 0;
  maxBatchesInFlight = 0;

  constructor(options: DropboxEmulatorOptions = {}) {
    super(options, {
      authorize: '/oauth2/authorize',
      token: '/oauth2/token',
      extraTokenFields: { account_id: 'dbid:AAemulator', uid: '12345' },
    });
    this.opts = options;
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

  override flush(): void {
    this.tree.save();
  }

  override expireCursors(): void {
    this.epoch += 1;
    this.snapshots.clear();
  }

  /** Upload sessions started but never finished. */
  openSessions(): number {
    let n = 0;
    for (const s of this.sessions.values()) if (!s.finished) n++;
    return n;
  }

  override stats(): Record<string, number> {
    return { openSessions: this.openSessions(), maxBatchesInFlight: this.maxBatchesInFlight };
  }

  protected override faultResponse(
    status: number,
    reason: string | undefined,
    retryAfterSeconds: number | undefined,
  ): { body: unknown } {
    if (status === 429) {
      const tag = reason ?? 'too_many_requests';
      return {
        body: {
          error_summary: `${tag}/..`,
          error: { reason: { '.tag': tag }, retry_after: retryAfterSeconds ?? 1 },
        },
      };
    }
    if (status === 409 && reason !== undefined) {
      // A route error, e.g. reason 'insufficient_space' on an upload: the account is full.
      return {
        body: {
          error_summary: `path/${reason}/..`,
          error: { '.tag': 'path', reason: { '.tag': reason } },
        },
      };
    }
    return { body: { error_summary: 'internal_error/..', error: { '.tag': 'internal_error' } } };
  }

  protected override authError(expired: boolean): HttpError {
    const tag = expired ? 'expired_access_token' : 'invalid_access_token';
    return new HttpError(401, { error_summary: `${tag}/..`, error: { '.tag': tag } });
  }

  protected override route(x: { method: string; url: URL }): Route | undefined {
    const m = /^\/2\/(.+)$/.exec(x.url.pathname);
    if (!m || x.method !== 'POST') return undefined;
    const endpoint = m[1] as string;
    const rpc = (fn: (arg: unknown, x: Exchange) => unknown | Promise<unknown>): Route => ({
      endpoint,
      handle: async (ex) => {
        const arg = await ex.json();
        await ex.sendJson(200, (await fn(arg, ex)) ?? null);
      },
    });
    const content = (fn: (arg: unknown, x: Exchange) => Promise<void>, noAuth = false): Route => ({
      endpoint,
      noAuth,
      handle: async (ex) => fn(this.contentArg(endpoint, ex), ex),
    });
    switch (endpoint) {
      case 'files/upload':
        return content(async (arg, ex) => ex.sendJson(200, this.upload(arg, await ex.body())));
      case 'files/upload_session/start':
        return content(async (arg, ex) => ex.sendJson(200, this.sessionStart(arg, await ex.body())));
      case 'files/upload_session/append_v2':
        return content(async (arg, ex) => ex.sendJson(200, this.sessionAppend(arg, await ex.body())));
      case 'files/upload_session/finish':
        return content(async (arg, ex) => ex.sendJson(200, this.sessionFinish(arg, await ex.body())));
      case 'files/upload_session/finish_batch_v2':
        return rpc((arg) => this.finishBatch(arg));
      case 'files/upload_session/finish_batch':
        return rpc((arg) => ({ '.tag': 'complete', ...this.finishBatch(arg) }));
      case 'files/upload_session/finish_batch/check':
        return rpc(() => {
          throw routeError(['invalid_async_job_id'], { '.tag': 'invalid_async_job_id' });
        });
      case 'files/download':
        return content((arg, ex) => this.download(arg, ex));
      case 'files/get_metadata':
        return rpc((arg) => this.getMetadata(arg));
      case 'files/list_folder':
        return rpc((arg) => this.listFolder(arg));
      case 'files/list_folder/continue':
        return rpc((arg) => this.listContinue(arg));
      case 'files/list_folder/get_latest_cursor':
        return rpc((arg) => this.latestCursor(arg));
      case 'files/list_folder/longpoll':
        return {
          endpoint,
          noAuth: true,
          handle: async (ex) => ex.sendJson(200, await this.longpoll(await ex.json())),
        };
      case 'files/delete_v2':
        return rpc((arg) => this.delete(arg));
      case 'files/move_v2':
        return rpc((arg) => this.relocate(arg, 'move'));
      case 'files/copy_v2':
        return rpc((arg) => this.relocate(arg, 'copy'));
      case 'files/create_folder_v2':
        return rpc((arg) => this.createFolder(arg));
      default:
        return undefined;
    }
  }

  private contentArg(endpoint: string, x: Exchange): unknown {
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

  private parse<T extends z.ZodTypeAny>(schema: T, value: unknown, endpoint: string): z.infer<T> {
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

  private nextRev(): string {
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
  private lookup(path: string, endpoint: string): TreeNode | undefined {
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

  private splitPath(path: string, endpoint: string): { parent: string; name: string } {
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
  private ensureFolder(parent: string, outer: string): TreeNode {
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
  private findFolder(parent: string): TreeNode | undefined {
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

  private checkName(name: string, outer: string): void {
    if (DISALLOWED_NAMES.has(name.toLowerCase()) || name.includes('\\') || name.includes('\0')) {
      throw routeError([outer, 'disallowed_name'], { '.tag': outer, [outer]: { '.tag': 'disallowed_name' } });
    }
  }

  /** Apply a commit (files/upload, finish, finish_batch). `outer` wraps WriteErrors for the route. */
  private commit(
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

  private upload(arg: unknown, data: Buffer): unknown {
    const commit = this.parse(CommitInfo, arg, 'files/upload');
    if (data.byteLength > 150 * 1024 * 1024) {
      throw routeError(['payload_too_large'], { '.tag': 'payload_too_large' });
    }
    const node = this.commit(commit, data, 'files/upload', ({ tags, error }) =>
      tags[0] === 'content_hash_mismatch'
        ? routeError(tags, error)
        : routeError(['path', ...tags], { '.tag': 'path', reason: error, upload_session_id: '' }),
    );
    return this.metadata(node);
  }

  private sessionStart(arg: unknown, data: Buffer): unknown {
    const a = this.parse(
      z.object({
        close: z.boolean().default(false),
        session_type: z.unknown().optional(),
        content_hash: z.string().optional(),
      }),
      arg ?? {},
      'files/upload_session/start',
    );
    if (
      a.content_hash !== undefined &&
      new DropboxContentHasher().update(data).digestHex() !== a.content_hash
    ) {
      throw routeError(['content_hash_mismatch'], { '.tag': 'content_hash_mismatch' });
    }
    const id = 'pid_upload_session:' + randomBytes(18).toString('base64url');
    this.sessions.set(id, { id, chunks: [data], offset: data.byteLength, closed: a.close, finished: false });
    return { session_id: id };
  }

  private session(
    cursor: z.infer<typeof Cursor>,
    wrap: (tag: Record<string, unknown>, tags: string[]) => HttpError,
  ): Session {
    const s = this.sessions.get(cursor.session_id);
    if (!s) throw wrap({ '.tag': 'not_found' }, ['not_found']);
    if (s.finished) throw wrap({ '.tag': 'not_found' }, ['not_found']);
    if (cursor.offset !== s.offset) {
      throw wrap({ '.tag': 'incorrect_offset', correct_offset: s.offset }, ['incorrect_offset']);
    }
    return s;
  }

  private sessionAppend(arg: unknown, data: Buffer): unknown {
    const a = this.parse(
      z.object({ cursor: Cursor, close: z.boolean().default(false), content_hash: z.string().optional() }),
      arg,
      'files/upload_session/append_v2',
    );
    const s = this.session(a.cursor, (error, tags) => routeError(tags, error));
    if (s.closed) throw routeError(['closed'], { '.tag': 'closed' });
    if (
      a.content_hash !== undefined &&
      new DropboxContentHasher().update(data).digestHex() !== a.content_hash
    ) {
      throw routeError(['content_hash_mismatch'], { '.tag': 'content_hash_mismatch' });
    }
    s.chunks.push(data);
    s.offset += data.byteLength;
    s.closed = a.close;
    return null;
  }

  private finishOne(a: z.infer<typeof FinishArg>, data: Buffer, endpoint: string): TreeNode {
    const s = this.session(a.cursor, (error, tags) =>
      routeError(['lookup_failed', ...tags], { '.tag': 'lookup_failed', lookup_failed: error }),
    );
    if (s.closed && data.byteLength > 0) {
      throw routeError(['lookup_failed', 'closed'], {
        '.tag': 'lookup_failed',
        lookup_failed: { '.tag': 'closed' },
      });
    }
    const all = Buffer.concat([...s.chunks, data]);
    const commit = { ...a.commit, content_hash: a.content_hash ?? a.commit.content_hash };
    const node = this.commit(commit, all, endpoint, ({ tags, error }) =>
      tags[0] === 'content_hash_mismatch'
        ? routeError(tags, error)
        : routeError(['path', ...tags], { '.tag': 'path', path: error }),
    );
    s.finished = true;
    this.sessions.delete(s.id);
    return node;
  }

  private sessionFinish(arg: unknown, data: Buffer): unknown {
    const a = this.parse(FinishArg, arg, 'files/upload_session/finish');
    return this.metadata(this.finishOne(a, data, 'files/upload_session/finish'));
  }

  private finishBatch(arg: unknown): { entries: unknown[] } {
    const a = this.parse(
      z.object({ entries: z.array(FinishArg).max(1000) }),
      arg,
      'files/upload_session/finish_batch_v2',
    );
    this.batchInFlight += 1;
    this.maxBatchesInFlight = Math.max(this.maxBatchesInFlight, this.batchInFlight);
    try {
      const entries = a.entries.map((e) => {
        const s = this.sessions.get(e.cursor.session_id);
        if (s && !s.closed) {
          return {
            '.tag': 'failure',
            failure: { '.tag': 'lookup_failed', lookup_failed: { '.tag': 'not_closed' } },
          };
        }
        try {
          // FileMetadata's fields inline in the union member, tagged 'success'.
          const meta = this.metadata(
            this.finishOne(e, Buffer.alloc(0), 'files/upload_session/finish_batch_v2'),
          );
          return { ...meta, '.tag': 'success' };
        } catch (err) {
          if (err instanceof HttpError && err.status === 409) {
            return { '.tag': 'failure', failure: (err.body as { error: unknown }).error };
          }
          throw err;
        }
      });
      return { entries };
    } finally {
      this.batchInFlight -= 1;
    }
  }

  private async download(arg: unknown, x: Exchange): Promise<void> {
    const a = this.parse(z.object({ path: Path, rev: z.string().optional() }), arg, 'files/download');
    const node = this.lookup(a.rev ? `rev:${a.rev}` : a.path, 'files/download');
    if (!node) throw lookupError('path', 'not_found');
    if (node.kind !== 'file') throw lookupError('path', 'not_file');
    await sendContent(x, node.content, {
      'content-type': 'application/octet-stream',
      'dropbox-api-result': headerSafeJson(this.metadata(node)),
      etag: `W/"${node.meta.rev}"`,
    });
  }

  private getMetadata(arg: unknown): unknown {
    const a = this.parse(z.object({ path: Path }).passthrough(), arg, 'files/get_metadata');
    if (a.path === '')
      throw badRequest('files/get_metadata', 'request body: path: The root folder is unsupported.');
    const node = this.lookup(a.path, 'files/get_metadata');
    if (!node) throw lookupError('path', 'not_found');
    return this.metadata(node);
  }

  // ---- listing and the change feed ----

  private encodeCursor(c: ListCursor): string {
    return 'AAE' + Buffer.from(JSON.stringify(c)).toString('base64url');
  }

  private decodeCursor(raw: string, endpoint: string): ListCursor {
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

  private folderFor(path: string, endpoint: string): TreeNode {
    const node = this.lookup(path, endpoint);
    if (!node) throw lookupError('path', 'not_found');
    if (node.kind !== 'folder') throw lookupError('path', 'not_folder');
    return node;
  }

  private inScope(recordPath: string, c: ListCursor): boolean {
    const p = foldName(recordPath);
    if (c.p === '') return c.r || p.lastIndexOf('/') === 0;
    if (!p.startsWith(c.p + '/')) return false;
    return c.r || p.lastIndexOf('/') === c.p.length;
  }

  private listFolder(arg: unknown): unknown {
    const a = this.parse(
      z
        .object({
          path: Path,
          recursive: z.boolean().default(false),
          limit: z.number().int().min(1).max(2000).optional(),
        })
        .passthrough(),
      arg,
      'files/list_folder',
    );
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

  private page(c: ListCursor): { entries: unknown[]; cursor: string; has_more: boolean } {
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

  private checkCursor(c: ListCursor): void {
    if (c.e !== this.epoch || (c.k === undefined && c.s < this.tree.oldestSeq())) {
      throw routeError(['reset'], { '.tag': 'reset' });
    }
    const folder = c.p === '' ? this.tree.root : this.tree.resolve(c.p);
    if (!folder) throw lookupError('path', 'not_found');
  }

  private listContinue(arg: unknown): unknown {
    const a = this.parse(z.object({ cursor: z.string().min(1) }), arg, 'files/list_folder/continue');
    const c = this.decodeCursor(a.cursor, 'files/list_folder/continue');
    this.checkCursor(c);
    return this.page(c);
  }

  private latestCursor(arg: unknown): unknown {
    const a = this.parse(
      z
        .object({
          path: Path,
          recursive: z.boolean().default(false),
          limit: z.number().int().min(1).max(2000).optional(),
        })
        .passthrough(),
      arg,
      'files/list_folder/get_latest_cursor',
    );
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

  private hasChanges(c: ListCursor): boolean {
    for (let i = this.tree.log.length - 1; i >= 0; i--) {
      const rec = this.tree.log[i];
      if (!rec || rec.seq <= c.s) break;
      if (this.inScope(rec.path, c)) return true;
    }
    return false;
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  private async longpoll(arg: unknown): Promise<unknown> {
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
    const ms = a.timeout * 1000 * (this.opts.longpollTimeScale ?? 1);
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

  // ---- write operations ----

  private delete(arg: unknown): unknown {
    const a = this.parse(z.object({ path: Path, parent_rev: z.string().optional() }), arg, 'files/delete_v2');
    if (a.path === '' || a.path === '/')
      throw badRequest('files/delete_v2', 'request body: path: root is not allowed');
    const node = this.lookup(a.path, 'files/delete_v2');
    if (!node) throw lookupError('path_lookup', 'not_found');
    if (a.parent_rev !== undefined && (node.kind !== 'file' || node.meta.rev !== a.parent_rev)) {
      // The service answers a stale parent_rev as a failed lookup of that revision.
      throw lookupError('path_lookup', 'not_found');
    }
    const meta = this.metadata(node);
    this.tree.remove(node);
    this.wake();
    return { metadata: meta };
  }

  private relocate(arg: unknown, op: 'move' | 'copy'): unknown {
    const endpoint = `files/${op}_v2`;
    const a = this.parse(
      z.object({ from_path: Path, to_path: Path, autorename: z.boolean().default(false) }).passthrough(),
      arg,
      endpoint,
    );
    const src = this.lookup(a.from_path, endpoint);
    if (!src || src.parentId === null) throw lookupError('from_lookup', 'not_found');
    const { parent, name } = this.splitPath(a.to_path, endpoint);
    const destParentExisting = this.tree.resolve(parent);
    if (
      destParentExisting &&
      (destParentExisting.id === src.id || this.tree.isAncestor(src, destParentExisting))
    ) {
      if (op === 'move' && src.kind === 'folder') {
        throw routeError(['cant_move_folder_into_itself'], { '.tag': 'cant_move_folder_into_itself' });
      }
      throw routeError(['duplicated_or_nested_paths'], { '.tag': 'duplicated_or_nested_paths' });
    }
    if (!destParentExisting && src.kind === 'folder') {
      const fromLower = foldName(this.tree.pathOf(src));
      if (foldName(parent).startsWith(fromLower + '/') || foldName(parent) === fromLower) {
        throw routeError(['cant_move_folder_into_itself'], { '.tag': 'cant_move_folder_into_itself' });
      }
    }
    const folder = this.ensureFolder(parent, 'to');
    const existing = this.tree.childrenNamed(folder.id, name)[0];
    let targetName = name;
    if (existing && existing.id !== src.id) {
      if (!a.autorename) throw writeConflict('to', existing.kind === 'file' ? 'file' : 'folder');
      for (let i = 1; ; i++) {
        const candidate = `${name} (${i})`;
        if (this.tree.childrenNamed(folder.id, candidate).length === 0) {
          targetName = candidate;
          break;
        }
      }
    }
    if (op === 'move') {
      this.tree.move(src, folder, targetName);
      this.wake();
      return { metadata: this.metadata(src) };
    }
    const copyInto = (n: TreeNode, into: TreeNode, as: string): TreeNode => {
      const c = this.tree.create(into, as, n.kind, Buffer.from(n.content), {
        clientModifiedMs: n.clientModifiedMs,
        meta: n.kind === 'file' ? { rev: this.nextRev() } : {},
      });
      if (n.kind === 'folder') for (const k of this.tree.children(n.id)) copyInto(k, c, k.name);
      return c;
    };
    const copied = copyInto(src, folder, targetName);
    this.wake();
    return { metadata: this.metadata(copied) };
  }

  private createFolder(arg: unknown): unknown {
    const a = this.parse(
      z.object({ path: Path, autorename: z.boolean().default(false) }),
      arg,
      'files/create_folder_v2',
    );
    const { parent, name } = this.splitPath(a.path, 'files/create_folder_v2');
    this.checkName(name, 'path');
    const folder = this.ensureFolder(parent, 'path');
    const existing = this.tree.childrenNamed(folder.id, name)[0];
    if (existing && !a.autorename) throw writeConflict('path', existing.kind === 'file' ? 'file' : 'folder');
    let targetName = name;
    if (existing) {
      for (let i = 1; ; i++) {
        const candidate = `${name} (${i})`;
        if (this.tree.childrenNamed(folder.id, candidate).length === 0) {
          targetName = candidate;
          break;
        }
      }
    }
    const node = this.tree.create(folder, targetName, 'folder');
    this.wake();
    return { metadata: this.metadata(node) };
  }
}
