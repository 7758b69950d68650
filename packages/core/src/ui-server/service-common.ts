/**
 * Parts of the agent's UI service (service.ts) that need none of its state: the saved
 * settings file, the status as the UI sees it, folder names as people type them, and the
 * cost and storage-split screens.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import {
  ApiError,
  type ApiHandlers,
  type CloudProvider,
  DEFAULT_SETTINGS,
  emptyFolderStatus,
  type FolderStatusDto,
  type Settings,
  SettingsSchema,
} from '@weft/ui-contract';
import type { FolderStatus } from '../status.ts';
import { httpShareBackend, type ShareBackend } from './share-client.ts';
import type { UiSession } from './service.ts';

export const SETTINGS_FILE = 'settings.json';
export const ACCOUNTS_FILE = 'accounts.json';
export const CLOUD_NAMES: Record<CloudProvider, string> = {
  dropbox: 'Dropbox',
  gdrive: 'Google Drive',
  onedrive: 'OneDrive',
};

const NOT_ENROLLED = 'This computer is not connected to Weft storage yet. Connect it under Accounts.';
export const NO_SESSION = 'Connect Weft storage first (Accounts).';

/** What the status screen shows before enrolment. */
export function notEnrolledStatus(folder: string): FolderStatusDto {
  return { ...emptyFolderStatus(folder), state: 'offline', error: NOT_ENROLLED };
}

/** A folder as people type it ('/Team/Plans/') as a provider path ('Team/Plans'). */
export function folderPath(folder: string): string {
  const p = folder
    .trim()
    .replace(/\\/g, '/')
    .replace(/^\/+|\/+$/g, '');
  if (p === '') throw new ApiError('bad-request', 'Name a folder (a whole cloud cannot be shared).');
  return p;
}

/** Saved settings, defaults for anything missing or invalid. */
export async function loadSettings(stateDir: string): Promise<Settings> {
  try {
    const raw: unknown = JSON.parse(await fsp.readFile(nodePath.join(stateDir, SETTINGS_FILE), 'utf8'));
    const parsed = SettingsSchema.partial().safeParse(raw);
    return { ...DEFAULT_SETTINGS, ...(parsed.success ? parsed.data : {}) };
  } catch {
    return { ...DEFAULT_SETTINGS };
  }
}

export function toStatusDto(s: FolderStatus): FolderStatusDto {
  return {
    ...s,
    transfers: s.transfers.map((t) => ({ ...t, etaSeconds: t.etaSeconds })),
    recent: [...s.recent],
    conflicts: [...s.conflicts],
    warnings: [...s.warnings],
    storedAs: s.storedAs && s.storedAs.length > 0 ? s.storedAs.map((x) => ({ ...x })) : undefined,
    massDeletePending: s.state === 'paused' && /would delete/.test(s.error ?? ''),
    storage: s.storage
      ? {
          usedBytes: s.storage.usedBytes,
          limitBytes: s.storage.limitBytes,
          checkedAtMs: s.storage.checkedAtMs,
          ...(s.storage.full ? { full: { ...s.storage.full } } : {}),
        }
      : undefined,
  };
}

export async function writePrivate(file: string, data: unknown): Promise<void> {
  const tmp = `${file}.tmp`;
  await fsp.writeFile(tmp, JSON.stringify(data, null, 2), { mode: 0o600 });
  await fsp.rename(tmp, file);
}

export function defaultShares(s: UiSession): ShareBackend {
  // Where the agent is now: after a failover the share API goes to the same instance.
  return httpShareBackend({ server: () => s.client.baseUrl, token: s.token });
}

/** The cost screen and the storage split (Weft storage's tiers). */
export function costStorageHandlers(deps: {
  readonly session: () => UiSession | undefined;
  /** The session, or the UI's "connect first" refusal. */
  readonly required: () => UiSession;
}): Pick<ApiHandlers, 'getCost' | 'getStorage'> {
  return {
    getCost: async () => {
      const s = deps.session();
      if (!s) return { available: false, reason: NO_SESSION };
      try {
        const c = await s.client.cost();
        const pick = (b: typeof c.mine) => ({ soFar: b.soFar, projected: b.projected });
        return {
          available: true,
          month: c.month,
          elapsed: c.elapsed,
          tables: c.tables,
          mine: pick(c.mine),
          proxy: pick(c.proxy),
          requests: c.mine.requests,
          egressBytes: c.mine.egressBytes,
          history: c.history,
        };
      } catch (e) {
        return { available: false, reason: e instanceof Error ? e.message : String(e) };
      }
    },
    getStorage: async () => {
      const list = await deps.required().client.list('', true);
      const split = {
        filesystemTierBytes: 0,
        filesystemTierFiles: 0,
        objectTierBytes: 0,
        objectTierFiles: 0,
      };
      for (const e of list.entries) {
        if (e.kind !== 'file') continue;
        if (e.tier === 'large') {
          split.objectTierBytes += e.size;
          split.objectTierFiles++;
        } else {
          split.filesystemTierBytes += e.size;
          split.filesystemTierFiles++;
        }
      }
      return split;
    },
  };
}
