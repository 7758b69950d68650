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
import { z } from 'zod';
import { HttpError, type Exchange, type Route } from './http.ts';
import { type TreeNode, foldName } from './tree.ts';
import { Path, routeError, lookupError, writeConflict, badRequest } from './dropbox/protocol.ts';
import { DropboxListing } from './dropbox/listing.ts';

export { headerSafeJson, routeError, type DropboxEmulatorOptions } from './dropbox/protocol.ts';

/**
 * Split along the API's route groups: dropbox/protocol.ts (schemas, errors),
 * dropbox/model.ts (items, metadata, the commit rule), dropbox/uploads.ts (upload, sessions,
 * batches, download), dropbox/listing.ts (list_folder, cursors, longpoll); this class holds
 * the route table, the fault and auth answers, and delete, move, copy and create_folder.
 */
export class DropboxEmulator extends DropboxListing {
  override flush(): void {
    this.tree.save();
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
