/**
 * The UI calls that act on the sync engines themselves: pause, resume, "sync now", resolving
 * a conflict and answering the mass-delete guard — on the main folder's engine and on those of
 * the folders added in Settings (folders-view.ts).
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { ApiError, type ApiHandlers, type FolderStatusDto } from '@weft/ui-contract';
import { sanitizeDevice } from '../conflict-name.ts';
import type { Engine } from '../engine.ts';
import type { SyncedFolders } from '../synced-folders.ts';
import { allEngines, engineOf } from './folders-view.ts';
import type { UiSession } from './service.ts';

/**
 * Whose version the conflicted copy holds: the copy's name says which device wrote it (the
 * server names it after the writer as it knows it; the engine after the other device).
 */
export function copyIsMine(copyPath: string, myNames: string | readonly string[]): boolean {
  const m = / \(conflicted copy \d{4}-\d{2}-\d{2} \d{6} from ([^()/]*?)(?: \d+)?\)(?:\.[^./]*)?$/.exec(
    copyPath,
  );
  if (m === null) return false;
  const names = typeof myNames === 'string' ? [myNames] : myNames;
  return names.some((n) => n !== '' && m[1] === sanitizeDevice(n));
}

export interface SyncControlOptions {
  /** The main folder's engine (throws when this computer is not connected). */
  readonly engine: () => Engine;
  /** The main folder on this computer. */
  readonly folder: string;
  readonly folders: SyncedFolders | undefined;
  /** The current session (throws when there is none). */
  readonly session: () => UiSession;
  readonly now: () => number;
  /** The status as the UI sees it (the answer of every call here). */
  readonly status: () => FolderStatusDto;
}

export function syncControlHandlers(
  o: SyncControlOptions,
): Pick<ApiHandlers, 'pause' | 'resume' | 'syncNow' | 'resolveConflict' | 'resolveMassDelete'> {
  return {
    pause: async ({ duration }) => {
      for (const e of allEngines(o.engine(), o.folders))
        e.pause(duration === '1h' ? o.now() + 3_600_000 : undefined);
      return o.status();
    },
    resume: async () => {
      for (const e of allEngines(o.engine(), o.folders)) e.resume();
      return o.status();
    },
    syncNow: async () => {
      for (const e of allEngines(o.engine(), o.folders)) {
        // Weft storage full: "check again" reads usage first (uploads resume if there is room).
        if (e.storage.isFull) await e.storage.check();
        // The pass runs on; progress arrives on the status stream.
        void e.syncNow().catch(() => undefined);
      }
      return o.status();
    },
    resolveConflict: async ({ path, keep, folder }) => {
      const { client, deviceName } = o.session();
      const where = engineOf({ engine: o.engine(), path: o.folder }, o.folders, folder);
      const { engine: inFolder } = where;
      const current = inFolder.getStatus();
      const c = current.conflicts.find((x) => x.path === path);
      if (!c) throw new ApiError('bad-request', `no conflict at ${path}`);
      const me = await client.whoami().catch(() => undefined);
      const copyMine = copyIsMine(c.copyPath, [deviceName, me?.deviceName ?? '', me?.deviceId ?? '']);
      const abs = (p: string): string => nodePath.join(where.path, ...p.split('/'));
      if (keep !== 'both' && c.copyPath !== c.path) {
        const keepCopy = keep === 'mine' ? copyMine : !copyMine;
        if (keepCopy) await fsp.rename(abs(c.copyPath), abs(c.path));
        else await fsp.rm(abs(c.copyPath), { force: true });
      }
      inFolder.status.update({ conflicts: inFolder.getStatus().conflicts.filter((x) => x.path !== path) });
      inFolder.markDirty([c.path, c.copyPath]);
      return o.status();
    },
    resolveMassDelete: async ({ answer }) => {
      // The folder holding a pass that would delete many files (the main one first).
      const all = allEngines(o.engine(), o.folders);
      const held = all.find(
        (e) => e.getStatus().state === 'paused' && /would delete/.test(e.getStatus().error ?? ''),
      );
      await (held ?? o.engine()).resolveMassDelete(answer);
      return o.status();
    },
  };
}
