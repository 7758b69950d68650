/**
 * The Drive client the adapter's parts share: the googleapis clients (v3, and v2 for
 * etags), the token, one call wrapper that classifies errors and refreshes a refused token
 * once, raw requests through the auth client (resumable uploads), and the Drive item
 * helpers (listing a folder, the owner of a name among duplicates, the item as an Entry).
 */
import { createRequire } from 'node:module';
import type { drive_v2, drive_v3, google as Google } from 'googleapis';
import { throwIfAborted } from '../../body.ts';
import { normalizePath } from '../../paths.ts';
import type { Entry } from '../../provider.ts';
import { type AccessTokenSource, toTokenSource } from '../../oauth/token-source.ts';
import { ChunkRetry, type ChunkRetryOptions } from '../chunk-retry.ts';
import { classifyGDrive, type GaxiosLike } from './errors.ts';

/** `maxRetryAfterMs` caps the wait a resumable upload's refused chunk honours (default 60 s). */
export interface GDriveProviderOptions extends ChunkRetryOptions {
  readonly token: string | AccessTokenSource;
  /** Folder id the provider's root lives under. Default 'root' (My Drive). */
  readonly rootFolderId?: string;
  /** Path of the provider's root below rootFolderId, created when missing ('' = rootFolderId itself). */
  readonly root?: string;
  /** API root, e.g. the emulator's URL. Default https://www.googleapis.com/. */
  readonly rootUrl?: string;
  /** Writes above this use a resumable upload, in chunks of this size (a multiple of 256 KiB). Default 8 MiB. */
  readonly chunkSize?: number;
  /**
   * remove() (and a move or copy that replaces a file) sends the item to Drive's trash, as
   * Drive's own apps do, where it can be restored for 30 days. false: delete permanently.
   * Default true.
   */
  readonly useTrash?: boolean;
}

export const FOLDER_MIME = 'application/vnd.google-apps.folder';
export const FILE_FIELDS =
  'id,name,mimeType,parents,trashed,size,sha256Checksum,md5Checksum,headRevisionId,modifiedTime,createdTime';
/** The v2 fields a conditional write reads and answers with (v2 names). */
export const V2_FIELDS =
  'id,title,mimeType,parents(id),labels(trashed),fileSize,sha256Checksum,md5Checksum,headRevisionId,modifiedDate,createdDate,etag,version';

export type DriveFile = drive_v3.Schema$File;
export type DriveFileV2 = drive_v2.Schema$File;

/** A v2 file in the v3 shape the rest of the adapter reads. */
export function fromV2(f: DriveFileV2): DriveFile {
  return {
    id: f.id,
    name: f.title,
    mimeType: f.mimeType,
    parents: (f.parents ?? []).flatMap((r) => (r.id ? [r.id] : [])),
    trashed: f.labels?.trashed ?? false,
    size: f.fileSize,
    sha256Checksum: f.sha256Checksum,
    md5Checksum: f.md5Checksum,
    headRevisionId: f.headRevisionId,
    modifiedTime: f.modifiedDate,
    createdTime: f.createdDate,
  };
}

/**
 * googleapis, loaded on first use: importing it takes about a second (every Google API's
 * client), which every process and test file importing @weft/providers paid at start while
 * only a Drive provider needs it. `require` where there is one (the desktop app's CommonJS
 * bundle, where esbuild bundles it), else a require made for this ES module.
 */
let googleModule: typeof Google | undefined;
function google(): typeof Google {
  if (!googleModule) {
    // A literal require('googleapis') call, so that esbuild sees and bundles it.
    let mod: unknown;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    if (typeof require === 'function') mod = require('googleapis');
    else mod = createRequire(import.meta.url)('googleapis');
    googleModule = (mod as { google: typeof Google }).google;
  }
  return googleModule;
}

function escapeQ(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/'/g, "\\'");
}

/** The name as a path segment, or undefined when it contains '/' or breaks the path rules. */
export function validName(name: string | null | undefined): string | undefined {
  if (!name || name.includes('/')) return undefined;
  try {
    const n = normalizePath(name);
    return n === name.normalize('NFC') ? n : undefined;
  } catch {
    return undefined;
  }
}

/** The item that owns a name among duplicates: the oldest (createdTime, then id). */
export function owner(files: DriveFile[]): DriveFile | undefined {
  let best: DriveFile | undefined;
  for (const f of files) {
    if (!best) best = f;
    else {
      const a = f.createdTime ?? '';
      const b = best.createdTime ?? '';
      if (a < b || (a === b && (f.id ?? '') < (best.id ?? ''))) best = f;
    }
  }
  return best;
}

export function toEntry(p: string, f: DriveFile): Entry {
  if (f.mimeType === FOLDER_MIME) {
    return {
      path: p,
      kind: 'dir',
      size: 0,
      modifiedMs: f.modifiedTime ? Date.parse(f.modifiedTime) : 0,
      revision: '',
    };
  }
  return {
    path: p,
    kind: 'file',
    size: Number(f.size ?? 0),
    modifiedMs: f.modifiedTime ? Date.parse(f.modifiedTime) : 0,
    revision: f.headRevisionId ?? '',
    ...(f.sha256Checksum ? { hash: { algorithm: 'sha256', value: f.sha256Checksum } } : {}),
  };
}

export class DriveApi {
  readonly drive: drive_v3.Drive;
  /** Drive v2, for what only it has: etags and If-Match (conditional writes). */
  readonly driveV2: drive_v2.Drive;
  readonly rootUrl: string;
  /** Waits between a resumable upload's chunk attempts. */
  readonly chunkRetry: ChunkRetry;
  private readonly auth: InstanceType<typeof Google.auth.OAuth2>;
  private readonly tokens: AccessTokenSource;

  constructor(
    /** The provider's name, the prefix of every error message. */
    readonly name: string,
    private readonly options: GDriveProviderOptions,
  ) {
    this.tokens = toTokenSource(options.token);
    this.rootUrl = (options.rootUrl ?? 'https://www.googleapis.com/').replace(/\/?$/, '/');
    this.chunkRetry = new ChunkRetry(options);
    const g = google();
    this.auth = new g.auth.OAuth2();
    this.drive = g.drive({
      version: 'v3',
      auth: this.auth,
      rootUrl: this.rootUrl,
      retry: false,
    } as drive_v3.Options);
    this.driveV2 = g.drive({
      version: 'v2',
      auth: this.auth,
      rootUrl: this.rootUrl,
      retry: false,
    } as drive_v2.Options);
  }

  /** Media calls need rootUrl per call; every call gets a fresh token first. */
  async opts(signal?: AbortSignal): Promise<{ rootUrl: string; signal?: AbortSignal }> {
    this.auth.setCredentials({ access_token: await this.tokens.getAccessToken(signal) });
    return signal ? { rootUrl: this.rootUrl, signal } : { rootUrl: this.rootUrl };
  }

  async call<T>(
    where: string,
    fn: () => Promise<{ data: T }>,
    signal?: AbortSignal,
    retried = false,
  ): Promise<T> {
    throwIfAborted(signal);
    try {
      return (await fn()).data;
    } catch (e) {
      if (signal?.aborted) throw e;
      const status = (e as GaxiosLike).response?.status;
      if (status === 401 && !retried && this.tokens.invalidate) {
        // The token was refused (expired early, revoked): refresh once and try again.
        this.tokens.invalidate();
        await this.opts(signal);
        return this.call(where, fn, signal, true);
      }
      throw classifyGDrive(e, `${this.name}: ${where}`);
    }
  }

  /** One request through the auth client (Authorization set by it), answered as a fetch Response. */
  async request(
    url: string,
    method: string,
    data: unknown,
    headers: Record<string, string>,
    signal?: AbortSignal,
  ): Promise<Response> {
    await this.opts(signal);
    const res = await this.auth.request<string>({
      url,
      method: method as 'PUT',
      headers:
        data !== undefined && !Buffer.isBuffer(data)
          ? { 'content-type': 'application/json; charset=UTF-8', ...headers }
          : headers,
      data: data === undefined ? undefined : Buffer.isBuffer(data) ? data : JSON.stringify(data),
      responseType: 'text',
      validateStatus: () => true,
      retry: false,
      ...(signal ? { signal } : {}),
    });
    const h = new Headers();
    const raw = res.headers as unknown as Headers | Record<string, string>;
    if (typeof (raw as Headers).get === 'function') (raw as Headers).forEach((v, k) => h.set(k, v));
    else for (const [k, v] of Object.entries(raw)) h.set(k, String(v));
    const empty = res.status === 204 || res.status === 205 || res.status === 304;
    return new Response(empty ? null : (res.data ?? ''), { status: res.status, headers: h });
  }

  /** The items in a folder (of one name, when `name` is given), trashed ones left out. */
  async children(parentId: string, name: string | undefined, signal?: AbortSignal): Promise<DriveFile[]> {
    const q =
      `'${escapeQ(parentId)}' in parents and trashed = false` +
      (name === undefined ? '' : ` and name = '${escapeQ(name)}'`);
    const out: DriveFile[] = [];
    let pageToken: string | undefined;
    do {
      const o = await this.opts(signal);
      const page = await this.call(
        'files.list',
        () =>
          this.drive.files.list(
            { q, pageSize: 1000, pageToken, fields: `nextPageToken,files(${FILE_FIELDS})` },
            o,
          ),
        signal,
      );
      out.push(...(page.files ?? []));
      pageToken = page.nextPageToken ?? undefined;
    } while (pageToken);
    return out;
  }

  /** The item that owns `name` in a folder, or undefined. */
  async child(parentId: string, name: string, signal?: AbortSignal): Promise<DriveFile | undefined> {
    return owner(await this.children(parentId, name, signal));
  }

  /** Delete an item permanently (not through the trash). */
  async delete(fileId: string, where: string, signal?: AbortSignal): Promise<void> {
    const o = await this.opts(signal);
    await this.call(where, () => this.drive.files.delete({ fileId }, o), signal);
  }

  /** An item removed for the caller: to the trash (useTrash, the default), else deleted. */
  async discard(fileId: string, signal?: AbortSignal): Promise<void> {
    if (this.options.useTrash ?? true) {
      const o = await this.opts(signal);
      await this.call(
        'files.update (trash)',
        () => this.drive.files.update({ fileId, requestBody: { trashed: true }, fields: 'id' }, o),
        signal,
      );
    } else await this.delete(fileId, 'files.delete', signal);
  }
}
