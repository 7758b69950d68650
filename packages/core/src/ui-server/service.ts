/**
 * The agent's implementation of the desktop UI API (@weft/ui-contract): status, pause,
 * conflicts, settings, accounts (Weft storage enrolment; clouds through OAuth PKCE with a
 * loopback redirect, tokens in the secret store), storage split, and cross-cloud sharing
 * through the proxy's share API. Pause, resume, "sync now" and the conflict and mass-delete
 * answers are in sync-control.ts; History in versions-view.ts; Settings' folders in
 * folders-view.ts.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import {
  type Account,
  ApiError,
  type ApiHandlers,
  type CloudProvider,
  type Devices,
  type FolderStatusDto,
  type Settings,
  type Sharing,
  AccountSchema,
} from '@weft/ui-contract';
import type { TokenStore } from '@weft/providers';
import { type OAuthClientConfig, authorizeWithLoopback } from '@weft/providers/oauth';
import { type ReplicaChoice, shareInviteTokenFromLink } from '@weft/wire/shares';
import { z } from 'zod';
import type { Engine } from '../engine.ts';
import { Emitter, type Disposable } from '../lifecycle.ts';
import { OfflineError, type ProxyClient, RemoteError } from '../remote/proxy-client.ts';
import { serverStatus } from '../remote/server-pool.ts';
import { type SecretStore, secretTokenStore } from '../secret-store.ts';
import { applySelection, selectiveView } from './selective-view.ts';
import { type ShareBackend, ShareApiError } from './share-client.ts';
import { toShare } from './share-words.ts';
import { versionHandlers } from './versions-view.ts';
import { storageHealthHandlers } from './storage-health-view.ts';
import type { SyncedFolders } from '../synced-folders.ts';
import { combinedStatus, folderHandlers } from './folders-view.ts';
import { syncControlHandlers } from './sync-control.ts';
import {
  ACCOUNTS_FILE,
  CLOUD_NAMES,
  NO_SESSION,
  SETTINGS_FILE,
  costStorageHandlers,
  defaultShares,
  folderPath,
  loadSettings,
  notEnrolledStatus,
  toStatusDto,
  writePrivate,
} from './service-common.ts';

export { availabilityText, toShare } from './share-words.ts';
export { copyIsMine } from './sync-control.ts';
export { loadSettings, notEnrolledStatus, toStatusDto } from './service-common.ts';

/** The engine and its server, once this device is enrolled with Weft storage. */
export interface UiSession {
  readonly engine: Engine;
  readonly client: ProxyClient;
  readonly server: string;
  readonly user: string;
  readonly deviceName: string;
  /** The device token (for the share API). */
  readonly token: string;
}

export interface EnrolRequest {
  readonly server: string;
  readonly user: string;
  readonly deviceName: string;
  readonly adminToken?: string;
  readonly invite?: string;
}

export interface UiServiceOptions {
  readonly folder: string;
  readonly stateDir: string;
  /** The current session; undefined until the device is enrolled. */
  readonly session: () => UiSession | undefined;
  /** Enrol with a server and start syncing (the Accounts screen's Weft storage form). */
  readonly enrol?: (request: EnrolRequest) => Promise<UiSession>;
  /**
   * Sign this computer out: stop the engine and forget the device token (the folder and its
   * files stay). Called after the server revoked the token, or when this computer was removed.
   */
  readonly signOut?: () => Promise<void>;
  /** Default names for the enrolment form. */
  readonly defaultUser?: string;
  readonly defaultDeviceName?: string;
  /** Where cloud tokens go (`cloud-<provider>`): Electron safeStorage or the agent's key-file store. */
  readonly secrets: SecretStore;
  /** OAuth clients per cloud; a cloud without one cannot be connected. */
  readonly oauth?: Partial<Record<CloudProvider, OAuthClientConfig>>;
  /** The proxy's share API for a session. Default: over HTTP with the device token. */
  readonly shares?: (session: UiSession) => ShareBackend;
  readonly now?: () => number;
  /** Called after the settings were saved, so that they apply at once (no restart). */
  readonly onSettings?: (settings: Settings) => void;
  /** Where "download this version" saves copies (default: ~/Downloads; versions-view.ts). */
  readonly downloadsDir?: string;
  /** Show a folder in the file manager; resolves false when that failed. Absent: cannot. */
  readonly openPath?: (path: string) => Promise<boolean>;
  /** The folders synced beside the main one (absent: the main folder only). */
  readonly folders?: SyncedFolders;
}

export interface UiService extends Disposable {
  readonly handlers: ApiHandlers;
  /** The status as the UI sees it. */
  status(): FolderStatusDto;
  /** Status changes, also across enrolment (the engine appears then). */
  onStatus(listener: () => void): Disposable;
  /** Settings as saved (read at agent start for ignore patterns and mass-delete limits). */
  settings(): Settings;
}

export async function createUiService(options: UiServiceOptions): Promise<UiService> {
  const now = options.now ?? Date.now;
  let settings = await loadSettings(options.stateDir);
  const accountsFile = nodePath.join(options.stateDir, ACCOUNTS_FILE);
  const tokenStore = (provider: CloudProvider): TokenStore =>
    secretTokenStore(options.secrets, `cloud-${provider}`);
  const clouds = new Map<CloudProvider, Account>();
  try {
    const saved = z.array(AccountSchema).parse(JSON.parse(await fsp.readFile(accountsFile, 'utf8')));
    // An account is listed again only if its tokens survived (a memory-only store loses them).
    for (const a of saved)
      if (
        a.kind !== 'weft' &&
        (await tokenStore(a.kind)
          .load()
          .catch(() => undefined))
      )
        clouds.set(a.kind, a);
  } catch {
    /* none yet */
  }
  const aborts = new Set<AbortController>();
  const changed = new Emitter<void>();
  let engineSub: Disposable | undefined;
  let serverSub: Disposable | undefined;
  const follow = (): void => {
    engineSub?.dispose();
    serverSub?.dispose();
    engineSub = options.session()?.engine.status.onChange(() => changed.fire());
    // The instance it talks to is on the status too (several proxy instances: issue #18).
    serverSub = options.session()?.client?.servers?.onMove(() => changed.fire());
  };
  follow();
  const foldersSub = options.folders?.onChange(() => changed.fire());
  const session = (): UiSession => {
    const s = options.session();
    if (!s) throw new ApiError('unavailable', NO_SESSION);
    return s;
  };
  const engine = (): Engine => session().engine;
  const status = (): FolderStatusDto => {
    const s = options.session();
    const all = combinedStatus(
      s ? toStatusDto(s.engine.getStatus()) : notEnrolledStatus(options.folder),
      options.folders,
    );
    const pool = s?.client?.servers; // a test session may have no client
    return pool ? { ...all, server: serverStatus(pool) } : all;
  };
  const saveAccounts = (): Promise<void> =>
    writePrivate(
      accountsFile,
      [...clouds.values()].filter((a) => a.state === 'connected'),
    );
  const accounts = (): Account[] => {
    const s = options.session();
    const removed = s?.engine.getStatus().state === 'removed';
    return [
      ...(s
        ? [
            {
              kind: 'weft' as const,
              state: removed ? ('error' as const) : ('connected' as const),
              label: `${s.user || 'this device'} on ${s.server}`,
              detail: removed
                ? `${s.engine.getStatus().error ?? 'This computer was removed from your Weft account'}. Connect it again to sync.`
                : `Device “${s.deviceName}”, folder ${options.folder}`,
            },
          ]
        : []),
      ...[...clouds.values()],
    ];
  };
  let backend: { session: UiSession; api: ShareBackend } | undefined;
  const shares = (): ShareBackend => {
    const s = session();
    if (backend?.session !== s) backend = { session: s, api: (options.shares ?? defaultShares)(s) };
    return backend.api;
  };
  /** Share API refusals in the UI's terms. */
  const shareCall = async <T>(run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (e) {
      if (!(e instanceof ShareApiError)) throw e;
      if (e.status === 0) throw new ApiError('unavailable', e.message);
      if (e.status === 404 && e.code === undefined)
        throw new ApiError('unavailable', 'This Weft server does not offer shared folders.');
      throw new ApiError(e.status < 500 ? 'bad-request' : 'failed', e.message);
    }
  };
  const sharing = async (): Promise<Sharing> => {
    const s = options.session();
    if (!s) return { available: false, reason: NO_SESSION, shares: [] };
    try {
      const list = await shareCall(() => shares().listShares());
      return { available: true, shares: list.map((x) => toShare(x, s.user)) };
    } catch (e) {
      if (e instanceof ApiError && e.code === 'unavailable')
        return { available: false, reason: e.message, shares: [] };
      throw e;
    }
  };
  /** Where a replica goes: Weft storage, or the proxy's copy of one of this user's clouds. */
  const replica = async (cloud: Account['kind'], folder: string): Promise<ReplicaChoice> => {
    const root = folderPath(folder);
    if (cloud === 'weft') return { cloud: 'weft', root };
    const api = shares();
    const known = (await shareCall(() => api.listAccounts())).filter((a) => a.provider === cloud);
    const latest = known.sort((a, b) => b.connectedMs - a.connectedMs)[0];
    if (latest) return { cloud: 'account', accountId: latest.id, root };
    const tokens = clouds.get(cloud)?.state === 'connected' ? await tokenStore(cloud).load() : undefined;
    if (!tokens) throw new ApiError('bad-request', `Connect ${CLOUD_NAMES[cloud]} under Accounts first.`);
    const account = await shareCall(() =>
      api.connectAccount({ provider: cloud, label: CLOUD_NAMES[cloud], tokens }),
    );
    return { cloud: 'account', accountId: account.id, root };
  };

  /** Stop the engine and forget this computer's enrolment (the files stay). */
  const signOut = async (): Promise<void> => {
    if (!options.signOut) throw new ApiError('unavailable', 'Signing out is not possible here.');
    backend = undefined;
    await options.signOut();
    follow();
    changed.fire();
  };
  const devices = async (): Promise<Devices> => {
    const s = options.session();
    if (!s) return { available: false, reason: NO_SESSION, devices: [] };
    if (s.engine.getStatus().state === 'removed')
      return { available: false, reason: s.engine.getStatus().error ?? 'Removed', devices: [] };
    try {
      const { devices: list } = await s.client.listDevices();
      return {
        available: true,
        devices: list.map((d) => ({
          id: d.id,
          name: d.name,
          createdMs: d.createdMs,
          ...(d.lastSeenMs !== null ? { lastSeenMs: d.lastSeenMs } : {}),
          current: d.current,
        })),
      };
    } catch (e) {
      if (e instanceof OfflineError)
        return { available: false, reason: 'Cannot reach the Weft server.', devices: [] };
      if (e instanceof RemoteError && e.status === 404 && e.code === 'NOT_FOUND')
        return { available: false, reason: 'This Weft server does not list devices.', devices: [] };
      throw e;
    }
  };

  const inviteToken = (invite: string): string => {
    const token = shareInviteTokenFromLink(invite);
    if (!token) throw new ApiError('bad-request', 'That is not a Weft invitation (weft://share/…).');
    return token;
  };

  const handlers: ApiHandlers = {
    ...storageHealthHandlers({ session: options.session }),
    ...versionHandlers({
      session: options.session,
      ...(options.downloadsDir ? { downloadsDir: options.downloadsDir } : {}),
      ...(options.folders ? { folders: options.folders } : {}),
    }),
    ...folderHandlers({
      folders: options.folders,
      mainStatus: () => options.session()?.engine.getStatus(),
      changed: () => changed.fire(),
    }),
    getStatus: async () => status(),
    ...syncControlHandlers({
      engine,
      folder: options.folder,
      folders: options.folders,
      session,
      now,
      status,
    }),
    ...costStorageHandlers({ session: options.session, required: session }),
    getSettings: async () => settings,
    setSettings: async (patch) => {
      settings = { ...settings, ...patch };
      await writePrivate(nodePath.join(options.stateDir, SETTINGS_FILE), settings);
      options.onSettings?.(settings);
      return settings;
    },
    getSelectiveSync: async ({ parent }) =>
      selectiveView(options.session()?.engine, parent ?? '', NO_SESSION),
    setSelectiveSync: async ({ excluded, parent }) =>
      applySelection(options.session()?.engine, excluded, parent ?? '', NO_SESSION),
    listAccounts: async () => ({ accounts: accounts() }),
    connectWeft: async ({ server, user, deviceName, enrolment }) => {
      const current = options.session();
      if (current && current.engine.getStatus().state !== 'removed')
        throw new ApiError('bad-request', 'This computer is already connected to Weft storage.');
      // Removed from its account: the old enrolment is dead; forget it, then enrol again.
      if (current) await signOut();
      if (!options.enrol) throw new ApiError('unavailable', 'Enrolment is not possible here.');
      try {
        await options.enrol({
          server,
          user: user ?? options.defaultUser ?? 'me',
          deviceName: deviceName ?? options.defaultDeviceName ?? 'this computer',
          ...(enrolment.kind === 'adminToken'
            ? { adminToken: enrolment.adminToken }
            : { invite: enrolment.invite }),
        });
      } catch (e) {
        throw new ApiError(
          'failed',
          `Could not connect to ${server}: ${e instanceof Error ? e.message : String(e)}`,
        );
      }
      follow();
      changed.fire();
      return { accounts: accounts() };
    },
    connectCloud: async ({ provider }) => {
      const config = options.oauth?.[provider];
      if (!config)
        throw new ApiError('unavailable', `${CLOUD_NAMES[provider]} sign-in is not set up for this build.`);
      const store = tokenStore(provider);
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
      // The server's copy of the tokens (given for sharing) goes first; it is refused while
      // the account keeps a share's folder, and then nothing changes here either.
      if (options.session()) {
        const api = shares();
        // A server without the share API holds no tokens; an unreachable one might.
        const held = await shareCall(() =>
          api.listAccounts().catch((e: unknown) => {
            if (e instanceof ShareApiError && e.status === 404 && e.code === undefined) return [];
            throw e;
          }),
        );
        for (const a of held.filter((x) => x.provider === kind)) {
          await shareCall(() => api.disconnectAccount(a.id)).catch((e: unknown) => {
            if (!(e instanceof ApiError && e.code === 'bad-request')) throw e;
            throw new ApiError(
              'bad-request',
              `${CLOUD_NAMES[kind]} keeps the folder of a shared folder; leave that share first (${e instanceof Error ? e.message : String(e)}).`,
            );
          });
        }
      }
      clouds.delete(kind);
      await options.secrets.delete(`cloud-${kind}`);
      await saveAccounts();
      return { accounts: accounts() };
    },
    listDevices: () => devices(),
    removeDevice: async ({ id }) => {
      const s = session();
      const mine = s.engine.getStatus().state === 'removed';
      if (!mine) {
        const list = await devices();
        if (!list.available)
          throw new ApiError('unavailable', list.reason ?? 'Devices cannot be listed now.');
        const target = list.devices.find((d) => d.id === id);
        if (!target) throw new ApiError('bad-request', 'There is no such device on your account.');
        try {
          await s.client.revokeDevice(id);
        } catch (e) {
          if (e instanceof OfflineError)
            throw new ApiError('unavailable', 'Cannot reach the Weft server; try again.');
          // Already removed meanwhile (by another device): the result is the same.
          if (!(e instanceof RemoteError && (e.status === 404 || e.code === 'DEVICE_REVOKED'))) throw e;
        }
        if (!target.current) return devices();
      }
      // This computer (or, once removed from the account, whatever was asked): sign out.
      await signOut();
      return devices();
    },
    getSharing: () => sharing(),
    shareFolder: async ({ name, cloud, folder }) => {
      const choice = await replica(cloud, folder);
      const api = shares();
      const created = await shareCall(() => api.createShare({ name, replica: choice }));
      const invite = await shareCall(() => api.createInvite(created.id));
      return { shareId: created.id, invite: invite.link, expiresMs: invite.expiresMs };
    },
    createInvite: async ({ id }) => {
      const invite = await shareCall(() => shares().createInvite(id));
      return { shareId: invite.shareId, invite: invite.link, expiresMs: invite.expiresMs };
    },
    previewInvite: async ({ invite }) => {
      const p = await shareCall(() => shares().preview(inviteToken(invite)));
      return {
        name: p.name,
        owner: p.owner,
        invitedBy: p.invitedBy,
        expiresMs: p.expiresMs,
        members: p.members.map((m) => ({ name: m.member, cloud: m.cloud })),
      };
    },
    acceptInvite: async ({ invite, cloud, folder }) => {
      const token = inviteToken(invite);
      const choice = await replica(cloud, folder);
      await shareCall(() => shares().accept({ token, replica: choice }));
      return sharing();
    },
    openFolder: async () => ({ opened: options.openPath ? await options.openPath(options.folder) : false }),
    leaveShare: async ({ id }) => {
      await shareCall(() => shares().leave(id));
      return sharing();
    },
  };

  return {
    handlers,
    status,
    settings: () => settings,
    onStatus: (listener) => changed.on(() => listener()),
    dispose() {
      for (const a of aborts) a.abort();
      aborts.clear();
      engineSub?.dispose();
      serverSub?.dispose();
      foldersSub?.dispose();
      changed.dispose();
    },
  };
}
