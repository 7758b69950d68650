/**
 * Several synced folders in the UI (docs/desktop.md "Several synced folders"): the status
 * of all of them together, each folder's own line, and Settings' list, add and remove.
 */
import {
  ApiError,
  type ApiHandlers,
  type FolderStatusDto,
  type SyncedFolder,
  type SyncedFolders as SyncedFoldersView,
} from '@weft/ui-contract';
import type { Engine } from '../engine.ts';
import type { FolderStatus } from '../status.ts';
import { FolderError, type SyncedFolderInfo, type SyncedFolders } from '../synced-folders.ts';

/** Which state the whole shows when folders differ: the first in this list that any folder is in. */
const PRECEDENCE: readonly FolderStatusDto['state'][] = [
  'removed',
  'error',
  'full',
  'offline',
  'syncing',
  'scanning',
  'paused',
  'idle',
];

const NOT_STARTED = 'Connect Weft storage first (Accounts).';

/** One folder's line in Settings and in the status. */
export function folderLine(
  f: SyncedFolderInfo,
  status: Pick<FolderStatus, 'state' | 'error' | 'files' | 'pendingOperations'> | undefined,
  failure?: string,
): SyncedFolder {
  const error = failure ?? status?.error;
  return {
    id: f.id,
    path: f.path,
    name: f.name,
    remoteRoot: f.remoteRoot,
    primary: f.primary,
    state: failure ? 'error' : (status?.state ?? 'offline'),
    ...(error ? { error } : status ? {} : { error: NOT_STARTED }),
    files: status?.files ?? 0,
    pendingOperations: status?.pendingOperations ?? 0,
  };
}

/**
 * The main folder's status with the other folders added in: the state is the most pressing
 * of any folder's, counts are summed, transfers, activity and conflicts of the other folders
 * are listed with their folder's name, and `folders` has each folder's own line.
 */
export function combinedStatus(main: FolderStatusDto, folders: SyncedFolders | undefined): FolderStatusDto {
  if (!folders) return main;
  const mainInfo = folders.list()[0];
  const others = folders.statuses();
  const lines = [
    ...(mainInfo ? [folderLine(mainInfo, main)] : []),
    ...others.map((o) => folderLine(o.folder, o.status, o.failure)),
  ];
  if (others.length === 0) return { ...main, folders: lines };
  const live = others.filter((o) => o.status !== undefined) as {
    folder: SyncedFolderInfo;
    status: FolderStatus;
  }[];
  const states = [main.state, ...lines.slice(1).map((l) => l.state)];
  const state = PRECEDENCE.find((s) => states.includes(s)) ?? main.state;
  // The message of the folder whose state the whole shows (the main one's when it is that one).
  const first = lines.find((l) => l.state === state && l.error !== undefined);
  const error = first && !first.primary ? `${first.name}: ${first.error}` : main.error;
  const sum = (pick: (s: FolderStatus) => number): number => live.reduce((n, o) => n + pick(o.status), 0);
  const recent = [
    ...main.recent,
    ...live.flatMap((o) => o.status.recent.map((r) => ({ ...r, folder: o.folder.name }))),
  ].sort((a, b) => b.atMs - a.atMs);
  return {
    ...main,
    state,
    ...(error ? { error } : {}),
    files: main.files + sum((s) => s.files),
    pendingOperations: main.pendingOperations + sum((s) => s.pendingOperations),
    bytesUploaded: main.bytesUploaded + sum((s) => s.bytesUploaded),
    bytesDownloaded: main.bytesDownloaded + sum((s) => s.bytesDownloaded),
    transfers: [
      ...main.transfers,
      ...live.flatMap((o) => o.status.transfers.map((t) => ({ ...t, folder: o.folder.name }))),
    ],
    recent: recent.slice(0, Math.max(main.recent.length, 200)),
    conflicts: [
      ...main.conflicts,
      ...live.flatMap((o) => o.status.conflicts.map((c) => ({ ...c, folder: o.folder.name }))),
    ],
    warnings: [
      ...main.warnings,
      ...live.flatMap((o) => o.status.warnings.map((w) => `${o.folder.name}: ${w}`)),
    ],
    massDeletePending:
      main.massDeletePending === true ||
      live.some((o) => o.status.state === 'paused' && /would delete/.test(o.status.error ?? '')),
    folders: lines,
  };
}

/** Settings' folder list, add and remove. */
export function folderHandlers(o: {
  readonly folders: SyncedFolders | undefined;
  readonly mainStatus: () =>
    Pick<FolderStatus, 'state' | 'error' | 'files' | 'pendingOperations'> | undefined;
  readonly changed: () => void;
}): Pick<ApiHandlers, 'listFolders' | 'addFolder' | 'removeFolder'> {
  const view = (): SyncedFoldersView => {
    const set = o.folders;
    if (!set) return { folders: [] };
    const main = set.list()[0];
    return {
      folders: [
        ...(main ? [folderLine(main, o.mainStatus())] : []),
        ...set.statuses().map((s) => folderLine(s.folder, s.status, s.failure)),
      ],
    };
  };
  const need = (): SyncedFolders => {
    if (!o.folders) throw new ApiError('unavailable', 'This Weft cannot sync more than one folder.');
    return o.folders;
  };
  const refused = (e: unknown): never => {
    if (e instanceof FolderError) throw new ApiError('bad-request', e.message);
    throw e;
  };
  return {
    listFolders: async () => view(),
    addFolder: async ({ path, name }) => {
      await need().add(path, name).catch(refused);
      o.changed();
      return view();
    },
    removeFolder: async ({ id }) => {
      await need().remove(id).catch(refused);
      o.changed();
      return view();
    },
  };
}

/** Every engine, the main one first (pause, resume and "sync now" act on all of them). */
export function allEngines(main: Engine, folders: SyncedFolders | undefined): Engine[] {
  return [main, ...(folders?.running().map((r) => r.engine) ?? [])];
}

/** The engine and local folder a conflict or mass delete of `folder` (a name; absent: main) is in. */
export function engineOf(
  main: { engine: Engine; path: string },
  folders: SyncedFolders | undefined,
  folder: string | undefined,
): { engine: Engine; path: string } {
  if (folder === undefined || folder === '') return main;
  const hit = folders?.running().find((r) => !r.folder.primary && r.folder.name === folder);
  if (!hit) throw new ApiError('bad-request', `There is no synced folder named ${folder}.`);
  return { engine: hit.engine, path: hit.folder.path };
}
