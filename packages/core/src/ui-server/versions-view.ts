/**
 * The History screen's side of the agent (docs/desktop.md "Version history and deleted
 * files"): a file's versions and a folder's deleted files as Weft storage keeps them
 * (`GET /v1/versions`, `GET /v1/deleted`), restore (a normal write on the server, which the
 * change feed brings to every device, this one included) and "download this version" (a
 * copy saved in the Downloads folder; the synced file is left alone). A folder added in
 * Settings (`syncedFolder`, its name) has its files under its own root on the server
 * (`.weft/folders/<name>`, remote/scoped-store.ts): paths go out with that root in front and
 * come back without it, so the screen shows them as they are in that folder.
 */
import { createWriteStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { ApiError, type ApiHandlers } from '@weft/ui-contract';
import { OfflineError, RemoteError } from '../remote/proxy-client.ts';
import { FOLDER_ROOTS_DIR } from '../remote/scoped-store.ts';
import type { SyncedFolders } from '../synced-folders.ts';
import type { UiSession } from './service.ts';

type VersionHandlers = Pick<
  ApiHandlers,
  'fileHistory' | 'deletedFiles' | 'restoreVersion' | 'downloadVersion'
>;

export interface VersionViewOptions {
  readonly session: () => UiSession | undefined;
  /** Where "download this version" saves (default: $WEFT_DOWNLOADS_DIR, else ~/Downloads). */
  readonly downloadsDir?: string;
  /** The folders added in Settings (absent: the main folder only). */
  readonly folders?: Pick<SyncedFolders, 'list'>;
}

const NO_SESSION = 'Connect Weft storage first (Accounts).';
const OFFLINE = 'Cannot reach the Weft server.';

/** A path as typed or shown ('/a/b.txt', 'a\\b.txt') in the server's form ('a/b.txt'). */
function remotePath(p: string): string {
  return p.replace(/\\/g, '/').replace(/^\/+|\/+$/g, '');
}

/** A remote refusal in words the screen shows as is. */
function why(e: unknown): string {
  if (e instanceof OfflineError) return OFFLINE;
  if (e instanceof RemoteError) {
    if (e.code === 'NOT_FOUND') return 'Weft storage keeps no version of this.';
    if (e.code === 'INVALID_PATH') return `Not a path in your Weft folder: ${e.message}`;
    if (e.status === 404) return 'This Weft server does not keep versions.';
    return e.message;
  }
  return e instanceof Error ? e.message : String(e);
}

/** `p` (relative to a synced folder) as a path of the whole storage, under `root`. */
function inRoot(root: string, p: string): string {
  return root === '' ? p : p === '' ? root : `${root}/${p}`;
}

/** A path of the whole storage as the synced folder at `root` sees it. */
function fromRoot(root: string, p: string): string {
  if (root === '') return p;
  if (p === root) return '';
  return p.startsWith(`${root}/`) ? p.slice(root.length + 1) : p;
}

function stamp(ms: number): string {
  const d = new Date(ms);
  const p = (n: number): string => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

/** `report.pdf` saved at `ms` → `report (version of 2026-11-24 120301).pdf`. */
export function versionFileName(path: string, ms: number): string {
  const base = nodePath.posix.basename(path);
  const dot = base.lastIndexOf('.');
  const [stem, ext] = dot > 0 ? [base.slice(0, dot), base.slice(dot)] : [base, ''];
  return `${stem} (version of ${stamp(ms)})${ext}`;
}

export function versionHandlers(o: VersionViewOptions): VersionHandlers {
  const session = (): UiSession => {
    const s = o.session();
    if (!s) throw new ApiError('unavailable', NO_SESSION);
    return s;
  };
  const refused = (e: unknown): never => {
    if (e instanceof RemoteError && e.status < 500 && e.status !== 401)
      throw new ApiError('bad-request', why(e));
    throw new ApiError(e instanceof OfflineError ? 'unavailable' : 'failed', why(e));
  };
  /** The server root of a synced folder named so ('' / absent: the main folder, the whole storage). */
  const rootOf = (syncedFolder: string | undefined): string => {
    if (syncedFolder === undefined || syncedFolder === '') return '';
    const f = o.folders?.list().find((x) => !x.primary && x.name === syncedFolder);
    if (!f) throw new ApiError('bad-request', `There is no synced folder named “${syncedFolder}”.`);
    return f.remoteRoot;
  };
  return {
    fileHistory: async ({ path, syncedFolder }) => {
      const s = o.session();
      if (!s) return { available: false, reason: NO_SESSION };
      try {
        const root = rootOf(syncedFolder);
        const r = await s.client.versions(inRoot(root, remotePath(path)));
        return {
          available: true,
          path: fromRoot(root, r.path),
          retentionDays: r.retentionDays,
          versions: r.versions.map((v) => ({
            id: v.id,
            current: v.current,
            deleted: v.deleted,
            ...(v.writtenMs !== null ? { savedMs: v.writtenMs } : {}),
            ...(v.deviceName !== null ? { device: v.deviceName } : {}),
            size: v.size,
            ...(v.replacedMs !== null ? { replacedMs: v.replacedMs } : {}),
            ...(v.expiresMs !== null ? { expiresMs: v.expiresMs } : {}),
          })),
        };
      } catch (e) {
        return { available: false, reason: why(e) };
      }
    },
    deletedFiles: async ({ folder, syncedFolder }) => {
      const s = o.session();
      if (!s) return { available: false, reason: NO_SESSION };
      try {
        const root = rootOf(syncedFolder);
        const r = await s.client.deletedFiles(inRoot(root, remotePath(folder)));
        // The main folder's deleted files are not those of the added folders' roots.
        const hidden = (p: string): boolean => root === '' && p.startsWith(`${FOLDER_ROOTS_DIR}/`);
        return {
          available: true,
          folder: fromRoot(root, r.path),
          truncated: r.truncated,
          retentionDays: r.retentionDays,
          files: r.files
            .filter((f) => !hidden(f.path))
            .map((f) => ({
              path: fromRoot(root, f.path),
              version: f.version,
              deletedMs: f.deletedMs,
              ...(f.deletedByName !== null ? { device: f.deletedByName } : {}),
              size: f.size,
              expiresMs: f.expiresMs,
            })),
        };
      } catch (e) {
        if (e instanceof RemoteError && e.code === 'NOT_A_FOLDER')
          return { available: false, reason: 'That is a file, not a folder.' };
        return { available: false, reason: why(e) };
      }
    },
    restoreVersion: async ({ path, version, syncedFolder }) => {
      const s = session();
      const root = rootOf(syncedFolder);
      const p = remotePath(path);
      const r = await s.client.restoreVersion(inRoot(root, p), version).catch(refused);
      if (r.status === 'error') throw new ApiError('failed', r.error.message);
      if (r.status === 'conflict') {
        const copy = fromRoot(root, r.conflict.conflictPath);
        return {
          path: copy,
          message: `“${p}” changed meanwhile; the restored version was saved as “${copy}”.`,
        };
      }
      return { path: p, message: `Restored “${p}”. Your devices get it at their next sync.` };
    },
    downloadVersion: async ({ path, version, syncedFolder }) => {
      const s = session();
      const p = inRoot(rootOf(syncedFolder), remotePath(path));
      const dir =
        o.downloadsDir ?? process.env.WEFT_DOWNLOADS_DIR ?? nodePath.join(os.homedir(), 'Downloads');
      const history = await s.client.versions(p).catch(refused);
      const v = history.versions.find((x) => x.id === version);
      if (!v) throw new ApiError('bad-request', 'Weft storage no longer keeps that version.');
      await fsp.mkdir(dir, { recursive: true });
      const name = versionFileName(p, v.writtenMs ?? v.replacedMs ?? v.mtimeMs);
      const dot = name.lastIndexOf('.');
      let target = nodePath.join(dir, name);
      for (let i = 2; await exists(target); i++)
        target = nodePath.join(
          dir,
          dot > 0 ? `${name.slice(0, dot)} ${i}${name.slice(dot)}` : `${name} ${i}`,
        );
      const got = await s.client.downloadVersion(p, version).catch(refused);
      const tmp = `${target}.weft-part`;
      try {
        await pipeline(Readable.from(got.body), createWriteStream(tmp, { flags: 'wx' }));
        await fsp.rename(tmp, target);
      } catch (e) {
        await fsp.rm(tmp, { force: true });
        throw new ApiError(
          'failed',
          `Could not save the version: ${e instanceof Error ? e.message : String(e)}`,
        );
      }
      return { savedTo: target, message: `Saved as ${target}` };
    },
  };
}

async function exists(p: string): Promise<boolean> {
  try {
    await fsp.lstat(p);
    return true;
  } catch {
    return false;
  }
}
