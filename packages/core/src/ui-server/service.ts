/**
 * The agent's implementation of the desktop UI API (@weft/desktop/common): status, pause,
 * conflicts, settings, accounts (OAuth PKCE with a loopback redirect), storage split.
 * Cross-cloud sharing is declared unavailable until the agent supports it.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import {
  type Account,
  ApiError,
  type ApiHandlers,
  type CloudProvider,
  DEFAULT_SETTINGS,
  type FolderStatusDto,
  type Settings,
  SettingsSchema,
  AccountSchema,
} from '@weft/desktop/common';
import {
  type OAuthClientConfig,
  type TokenStore,
  authorizeWithLoopback,
  memoryTokenStore,
} from '@weft/providers';
import { z } from 'zod';
import { sanitizeDevice } from '../conflict-name.ts';
import type { Engine } from '../engine.ts';
import { type Disposable } from '../lifecycle.ts';
import type { ProxyClient } from '../remote/proxy-client.ts';
import type { FolderStatus } from '../status.ts';

export interface UiServiceOptions {
  readonly engine: Engine;
  readonly client: ProxyClient;
  readonly folder: string;
  readonly stateDir: string;
  readonly server: string;
  readonly user: string;
  readonly deviceName: string;
  /** OAuth clients per cloud; a cloud without one cannot be connected. */
  readonly oauth?: Partial<Record<CloudProvider, OAuthClientConfig>>;
  /**
   * Where each cloud's tokens go. The desktop app passes an Electron safeStorage store;
   * without one, tokens stay in memory only (never in plain files).
   */
  readonly tokenStore?: (provider: CloudProvider) => TokenStore;
  readonly now?: () => number;
}

export interface UiService extends Disposable {
  readonly handlers: ApiHandlers;
  /** The status as the UI sees it. */
  status(): FolderStatusDto;
  /** Settings as saved (read at agent start for ignore patterns and mass-delete limits). */
  settings(): Settings;
}

const SETTINGS_FILE = 'settings.json';
const ACCOUNTS_FILE = 'accounts.json';
const CLOUD_NAMES: Record<CloudProvider, string> = {
  dropbox: 'Dropbox',
  gdrive: 'Google Drive',
  onedrive: 'OneDrive',
};

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
    massDeletePending: s.state === 'paused' && /would delete/.test(s.error ?? ''),
  };
}

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

async function writePrivate(file: string, data: unknown): Promise<void> {
  const tmp = `${file}.tmp`;
  await fsp.writeFile(tmp, JSON.stringify(data, null, 2), { mode: 0o600 });
  await fsp.rename(tmp, file);
}

export async function createUiService(options: UiServiceOptions): Promise<UiService> {
  const { engine } = options;
  const now = options.now ?? Date.now;
  let settings = await loadSettings(options.stateDir);
  const accountsFile = nodePath.join(options.stateDir, ACCOUNTS_FILE);
  const clouds = new Map<CloudProvider, Account>();
  try {
    const saved = z.array(AccountSchema).parse(JSON.parse(await fsp.readFile(accountsFile, 'utf8')));
    // Memory-only tokens do not survive a restart, so neither does the account then.
    for (const a of saved) if (a.kind !== 'weft' && options.tokenStore) clouds.set(a.kind, a);
  } catch {
    /* none yet */
  }
  const aborts = new Set<AbortController>();
  const memoryStores = new Map<CloudProvider, TokenStore>();
  const status = (): FolderStatusDto => toStatusDto(engine.getStatus());
  const saveAccounts = (): Promise<void> =>
    writePrivate(
      accountsFile,
      [...clouds.values()].filter((a) => a.state === 'connected'),
    );
  const accounts = (): Account[] => [
    {
      kind: 'weft',
      state: 'connected',
      label: `${options.user || 'this device'} on ${options.server}`,
      detail: `Device “${options.deviceName}”, folder ${options.folder}`,
    },
    ...[...clouds.values()],
  ];
  const unavailable = (): never => {
    throw new ApiError('unavailable', 'Cross-cloud shared folders are not available in this version yet.');
  };

  const handlers: ApiHandlers = {
    getStatus: async () => status(),
    pause: async ({ duration }) => {
      engine.pause(duration === '1h' ? now() + 3_600_000 : undefined);
      return status();
    },
    resume: async () => {
      engine.resume();
      return status();
    },
    syncNow: async () => {
      // The pass runs on; progress arrives on the status stream.
      void engine.syncNow().catch(() => undefined);
      return status();
    },
    resolveConflict: async ({ path, keep }) => {
      const current = engine.getStatus();
      const c = current.conflicts.find((x) => x.path === path);
      if (!c) throw new ApiError('bad-request', `no conflict at ${path}`);
      const me = await options.client.whoami().catch(() => undefined);
      const copyMine = copyIsMine(c.copyPath, [options.deviceName, me?.deviceName ?? '', me?.deviceId ?? '']);
      const abs = (p: string): string => nodePath.join(options.folder, ...p.split('/'));
      if (keep !== 'both' && c.copyPath !== c.path) {
        const keepCopy = keep === 'mine' ? copyMine : !copyMine;
        if (keepCopy) await fsp.rename(abs(c.copyPath), abs(c.path));
        else await fsp.rm(abs(c.copyPath), { force: true });
      }
      engine.status.update({ conflicts: engine.getStatus().conflicts.filter((x) => x.path !== path) });
      engine.markDirty([c.path, c.copyPath]);
      return status();
    },
    resolveMassDelete: async ({ answer }) => {
      await engine.resolveMassDelete(answer);
      return status();
    },
    getStorage: async () => {
      const list = await options.client.list('', true);
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
    getSettings: async () => settings,
    setSettings: async (patch) => {
      settings = { ...settings, ...patch };
      await writePrivate(nodePath.join(options.stateDir, SETTINGS_FILE), settings);
      return settings;
    },
    listAccounts: async () => ({ accounts: accounts() }),
    connectCloud: async ({ provider }) => {
      const config = options.oauth?.[provider];
      if (!config)
        throw new ApiError('unavailable', `${CLOUD_NAMES[provider]} sign-in is not set up for this build.`);
      const store = options.tokenStore?.(provider) ?? memoryTokenStore();
      if (!options.tokenStore) memoryStores.set(provider, store);
      const abort = new AbortController();
      aborts.add(abort);
      clouds.set(provider, { kind: provider, state: 'connecting', label: CLOUD_NAMES[provider] });
      let announce!: (url: string) => void;
      const opened = new Promise<string>((resolve) => (announce = resolve));
      const flow = authorizeWithLoopback(config, store, {
        openBrowser: (url) => announce(url),
        signal: abort.signal,
        timeoutMs: 600_000,
      });
      flow.then(
        () => {
          clouds.set(provider, {
            kind: provider,
            state: 'connected',
            label: CLOUD_NAMES[provider],
            connectedAtMs: now(),
          });
          void saveAccounts().catch(() => undefined);
        },
        (e: unknown) => {
          clouds.set(provider, {
            kind: provider,
            state: 'error',
            label: CLOUD_NAMES[provider],
            detail: e instanceof Error ? e.message : String(e),
          });
        },
      );
      flow.finally(() => aborts.delete(abort)).catch(() => undefined);
      const authorizeUrl = await Promise.race([opened, flow.then(() => '')]);
      if (!authorizeUrl) throw new ApiError('failed', 'sign-in ended before it started');
      return { authorizeUrl };
    },
    disconnect: async ({ kind }) => {
      if (kind === 'weft')
        throw new ApiError('unavailable', 'Weft storage is this device’s home; it cannot be removed here.');
      clouds.delete(kind);
      memoryStores.delete(kind);
      await saveAccounts();
      return { accounts: accounts() };
    },
    getSharing: async () => ({
      available: false,
      reason: 'Cross-cloud shared folders are not available in this version yet.',
      shares: [],
    }),
    shareFolder: async () => unavailable(),
    acceptInvite: async () => unavailable(),
    leaveShare: async () => unavailable(),
  };

  return {
    handlers,
    status,
    settings: () => settings,
    dispose() {
      for (const a of aborts) a.abort();
      aborts.clear();
    },
  };
}
