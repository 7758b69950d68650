/**
 * The headless agent: one engine per synced folder (the main folder, and those added in
 * Settings: synced-folders.ts), enrolled with a proxy, plus a small local
 * HTTP server for the UI and `weft status` (127.0.0.1 only, random port). Every route needs
 * the session cookie of a one-time login link (the browser the agent opened) or the per-run
 * secret from the 0600 `agent.json` (local tools); see ui-server/http.ts.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as http from 'node:http';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import {
  type DeviceCredentials,
  enrolDevice,
  forgetDevice,
  loadDevice,
  saveDevice,
} from './device-credentials.ts';
import { Engine } from './engine.ts';
import { ProxyClient } from './remote/proxy-client.ts';
import { type ServerWatch, loadServerPool, watchServers } from './remote/server-watch.ts';
import { type SecretStore, keyFileSecretStore } from './secret-store.ts';
import type { FolderStatus } from './status.ts';
import type { CloudProvider } from '@weft/ui-contract';
import type { OAuthClientConfig } from '@weft/providers';
import {
  type UiService,
  type UiSession,
  createUiHttpHandler,
  createUiService,
  loadSettings,
} from './ui-server/index.ts';
import { LAUNCHER_FILE, openLoginInBrowser, systemOpen, systemOpenFolder } from './ui-server/browser-open.ts';
import { privateDir, writePrivateFile } from './private-file.ts';
import { DAY_MS, TrashJanitor, automaticTrashCap } from './trash-purge.ts';
import { withoutFolderRoots } from './remote/scoped-store.ts';
import { SyncedFolders } from './synced-folders.ts';
import { withTrace } from './trace-file.ts';

export interface AgentOptions {
  readonly folder: string;
  /**
   * The Weft storage server. Absent (the desktop app's first run): the enrolment from an
   * earlier run, else the agent waits for one from the UI's Accounts screen.
   */
  readonly server?: string;
  /** Where the journal, trash and device credentials live. Default: ~/.weft/agent-<hash>. */
  readonly stateDir: string;
  readonly deviceName?: string;
  readonly user?: string;
  /** A device token already issued; otherwise enrol with adminToken or invite. */
  readonly token?: string;
  readonly adminToken?: string;
  readonly invite?: string;
  /** Port for the status server; 0 = any free port. */
  readonly statusPort?: number;
  readonly watch?: boolean;
  readonly settleMs?: number;
  /** Bandwidth limits in bytes per second (0 or absent: none; else the UI settings apply). */
  readonly uploadBytesPerSecond?: number;
  readonly downloadBytesPerSecond?: number;
  /**
   * The desktop renderer build to serve at `/` (index.html, app.js, app.css). Default:
   * $WEFT_UI_DIR, else apps/desktop/dist/renderer of this checkout when built; without one
   * the plain status page is served.
   */
  readonly uiDir?: string;
  /** OAuth clients for connecting clouds from the UI (the emulators' in tests). */
  readonly oauth?: Partial<Record<CloudProvider, OAuthClientConfig>>;
  /**
   * Where the device token and cloud tokens are kept: Electron passes safeStorage; default:
   * `<stateDir>/secrets`, encrypted with a per-install key file (see secret-store.ts).
   */
  readonly secrets?: SecretStore;
  /**
   * How openInBrowser hands the launcher page's file address to a browser. Default: the
   * desktop's opener (xdg-open, open, explorer).
   */
  readonly openBrowser?: (fileUrl: string) => void;
  /**
   * How the UI's "Open folder" shows the synced folder (resolves false when it could not).
   * Default: the desktop's opener.
   */
  readonly openPath?: (path: string) => Promise<boolean>;
  /**
   * How often the proxy instances are asked for their list and timed (several instances:
   * remote/server-watch.ts). Default 10 s.
   */
  readonly serverProbeMs?: number;
}

/** The renderer build next to this checkout, if it has been built. */
export function defaultUiDir(): string | undefined {
  const fromEnv = process.env.WEFT_UI_DIR;
  if (fromEnv) return fromEnv;
  const dir = nodePath.resolve(import.meta.dirname, '../../../apps/desktop/dist/renderer');
  return existsSync(nodePath.join(dir, 'index.html')) ? dir : undefined;
}

export interface RunningAgent {
  /** False until the device is enrolled (then engine and client exist). */
  readonly enrolled: boolean;
  /** The engine; throws before enrolment. */
  readonly engine: Engine;
  readonly client: ProxyClient;
  readonly statusUrl: string;
  /**
   * The per-run secret for local tools (`x-weft-secret`; also in the 0600
   * <stateDir>/agent.json). Never put in a page: browsers sign in with loginUrl().
   */
  readonly secret: string;
  /**
   * A one-time login link for the UI (`<statusUrl>login?token=…`): valid once, for ttlMs
   * (default 60 s, at most 10 minutes); the browser that opens it gets a session cookie.
   */
  loginUrl(ttlMs?: number): string;
  /**
   * Open the UI in the system browser with a fresh login link, passed through a 0600
   * launcher page (never on a command line, where other users could read it).
   */
  openInBrowser(): Promise<void>;
  /** The desktop UI API implementation (also used by Electron main over IPC). */
  readonly ui: UiService;
  /** The synced folders beside the main one (Settings → Folders). */
  readonly folders: SyncedFolders;
  stop(): Promise<void>;
}

const normalServer = (url: string): string => url.replace(/\/+$/, '');

export async function startAgent(options: AgentOptions): Promise<RunningAgent> {
  await privateDir(options.stateDir);
  const secrets = options.secrets ?? keyFileSecretStore({ dir: nodePath.join(options.stateDir, 'secrets') });
  let device = await loadDevice(options.stateDir, secrets);
  if (device && options.server && device.server !== normalServer(options.server)) device = undefined;
  const deviceName = options.deviceName ?? device?.deviceName ?? os.hostname().slice(0, 60);
  if (!device && options.server) {
    if (options.token) {
      device = {
        server: normalServer(options.server),
        user: options.user ?? '',
        deviceName,
        token: options.token,
      };
      await saveDevice(options.stateDir, secrets, device);
    } else if (options.adminToken || options.invite) {
      device = await enrolDevice(options.stateDir, secrets, {
        server: options.server,
        user: options.user ?? 'me',
        deviceName,
        ...(options.adminToken ? { adminToken: options.adminToken } : {}),
        ...(options.invite ? { invite: options.invite } : {}),
      });
    } else {
      throw new Error(
        `not enrolled with ${options.server}: pass an admin token, an invite or a device token`,
      );
    }
  }
  // Limits from the command line win; otherwise those saved from the desktop UI's settings.
  let settings = await loadSettings(options.stateDir);
  const uploadBytesPerSecond = options.uploadBytesPerSecond || settings.uploadLimitKiBps * 1024;
  const downloadBytesPerSecond = options.downloadBytesPerSecond || settings.downloadLimitKiBps * 1024;
  let session: UiSession | undefined;
  const trashPolicy = (trashDir: string) => async () => ({
    maxAgeMs: settings.trashKeepDays * DAY_MS,
    maxBytes:
      settings.trashLimitMiB > 0 ? settings.trashLimitMiB * 1024 * 1024 : await automaticTrashCap(trashDir),
  });
  // The folders added in Settings: each its own engine, journal, trash and server root.
  const folders = await SyncedFolders.load({
    stateDir: options.stateDir,
    mainFolder: options.folder,
    engineOptions: () => ({
      ignore: settings.ignorePatterns,
      massDeleteFraction: settings.massDeletePercent / 100,
      massDeleteCount: settings.massDeleteCount,
      watch: options.watch ?? true,
      settleMs: options.settleMs,
    }),
    onEngine: (_id, _engine, stateDir) => {
      const dir = nodePath.join(stateDir, 'trash');
      const janitor = new TrashJanitor({ dir, policy: trashPolicy(dir) });
      void janitor.start();
      return { dispose: () => void janitor.stop() };
    },
  });
  // The proxy instances this device may talk to, kept in <stateDir>/servers.json.
  let serverWatch: ServerWatch | undefined;
  const open = async (d: DeviceCredentials): Promise<UiSession> => {
    const client = new ProxyClient({
      baseUrl: d.server,
      servers: await loadServerPool(options.stateDir, { home: d.server }),
      token: d.token,
      ...(uploadBytesPerSecond ? { uploadBytesPerSecond } : {}),
      ...(downloadBytesPerSecond ? { downloadBytesPerSecond } : {}),
    });
    const engine = await Engine.open({
      ignore: settings.ignorePatterns,
      massDeleteFraction: settings.massDeletePercent / 100,
      massDeleteCount: settings.massDeleteCount,
      folder: options.folder,
      stateDir: options.stateDir,
      // The whole of Weft storage but the other synced folders' roots (scoped-store.ts).
      client: withoutFolderRoots(client),
      deviceName: d.deviceName,
      watch: options.watch ?? true,
      settleMs: options.settleMs,
      ...withTrace(),
    });
    await engine.start();
    await serverWatch?.stop();
    serverWatch = watchServers(client, {
      stateDir: options.stateDir,
      ...(options.serverProbeMs !== undefined ? { probeEveryMs: options.serverProbeMs } : {}),
    });
    serverWatch?.start();
    session = { engine, client, server: d.server, user: d.user, deviceName: d.deviceName, token: d.token };
    await folders.open({ client, deviceName: d.deviceName });
    return session;
  };
  if (device) await open(device);

  const secret = randomBytes(32).toString('base64url');
  let enrolling: Promise<UiSession> | undefined;
  const ui = await createUiService({
    folder: options.folder,
    stateDir: options.stateDir,
    session: () => session,
    // The Accounts screen's Weft storage form (first run only: the engine starts then).
    enrol: (request) =>
      (enrolling ??= enrolDevice(options.stateDir, secrets, request)
        .then(open)
        .finally(() => (enrolling = undefined))),
    // Removing this computer from the Accounts screen (or after the server revoked it).
    signOut: async () => {
      const old = session;
      session = undefined;
      await serverWatch?.stop();
      await folders.close();
      await old?.engine.stop();
      await forgetDevice(options.stateDir, secrets);
    },
    defaultUser: options.user ?? 'me',
    defaultDeviceName: deviceName,
    secrets,
    ...(options.oauth ? { oauth: options.oauth } : {}),
    openPath: options.openPath ?? systemOpenFolder,
    folders,
    // Bandwidth limits apply at once (command-line limits still win).
    onSettings: (s) => {
      settings = s;
      for (const { engine } of folders.running()) engine.setIgnorePatterns(s.ignorePatterns);
      session?.client.setLimits({
        uploadBytesPerSecond: options.uploadBytesPerSecond || s.uploadLimitKiBps * 1024,
        downloadBytesPerSecond: options.downloadBytesPerSecond || s.downloadLimitKiBps * 1024,
      });
      session?.engine.setIgnorePatterns(s.ignorePatterns);
    },
  });
  // The local trash (replaced and deleted files) is purged by age and size: now, hourly, and
  // after a sync pass that trashed something; the limits are read from the settings each time.
  const trashDir = nodePath.join(options.stateDir, 'trash');
  const janitor = new TrashJanitor({ dir: trashDir, policy: trashPolicy(trashDir) });
  void janitor.start();
  let lastState = ui.status().state;
  // Looked at once per turn of the event loop, not per change: a bundle's outcome changes the
  // status once per file, and building the whole status for each was 4 s of a 100,000-file
  // drop's main thread (issue #16).
  let stateCheck: NodeJS.Immediate | undefined;
  const passEnds = ui.onStatus(() => {
    stateCheck ??= setImmediate(() => {
      stateCheck = undefined;
      const state = ui.status().state;
      if (state === 'idle' && lastState !== 'idle') void janitor.afterPass();
      lastState = state;
    });
  });
  const uiDir = options.uiDir ?? defaultUiDir();
  const uiHttp = createUiHttpHandler({
    handlers: ui.handlers,
    secret,
    ...(uiDir ? { staticDir: uiDir } : {}),
    plainPage: () => {
      const engine = session?.engine;
      return engine
        ? statusPage(engine.getStatus())
        : '<!doctype html><html lang="en"><title>Weft</title><p>Not connected to Weft storage yet.</p></html>';
    },
    onStatus: (listener) => ui.onStatus(listener),
    status: ui.status,
  });
  const server = http.createServer((req, res) => {
    void handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  // Every route, and its guards (Host, Origin, session or secret), is in the UI handler.
  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    if (await uiHttp.handle(req, res)) return;
    res.writeHead(404, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify({ error: 'not found' }));
  };
  await new Promise<void>((resolve) => server.listen(options.statusPort ?? 0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const statusUrl = `http://127.0.0.1:${port}/`;
  await writePrivateFile(
    nodePath.join(options.stateDir, 'agent.json'),
    JSON.stringify({ statusUrl, secret, pid: process.pid, folder: options.folder }, null, 2),
  );
  const loginUrl = (ttlMs?: number): string => `${statusUrl}login?token=${uiHttp.issueLoginToken(ttlMs)}`;
  const current = (): UiSession => {
    if (!session) throw new Error('this agent is not enrolled with Weft storage yet');
    return session;
  };
  return {
    get enrolled() {
      return session !== undefined;
    },
    get engine() {
      return current().engine;
    },
    get client() {
      return current().client;
    },
    statusUrl,
    secret,
    loginUrl,
    async openInBrowser() {
      await openLoginInBrowser(loginUrl(), options.stateDir, options.openBrowser ?? systemOpen);
    },
    ui,
    folders,
    async stop() {
      passEnds.dispose();
      if (stateCheck !== undefined) clearImmediate(stateCheck);
      await janitor.stop();
      uiHttp.dispose();
      ui.dispose();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
      await enrolling?.catch(() => undefined);
      await serverWatch?.stop();
      await folders.close();
      await session?.engine.stop();
      await fsp.rm(nodePath.join(options.stateDir, 'agent.json'), { force: true });
      await fsp.rm(nodePath.join(options.stateDir, LAUNCHER_FILE), { force: true });
    },
  };
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A plain status page (the desktop renderer replaces it). */
export function statusPage(s: FolderStatus): string {
  const rows = s.recent
    .slice(0, 50)
    .map(
      (a) =>
        `<tr><td>${new Date(a.atMs).toISOString()}</td><td>${escapeHtml(a.kind)}</td><td>${escapeHtml(a.path)}</td></tr>`,
    )
    .join('');
  const transfers = s.transfers
    .map(
      (t) =>
        `<li>${escapeHtml(t.path)} — <progress max="${t.bytesTotal}" value="${t.bytesDone}"></progress> ${Math.round((t.bytesDone / Math.max(1, t.bytesTotal)) * 100)}%</li>`,
    )
    .join('');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="2">
<title>Weft — ${escapeHtml(s.state)}</title>
<style>body{font:15px system-ui,sans-serif;margin:2rem;max-width:60rem}table{border-collapse:collapse}td{padding:.2rem .6rem;border-bottom:1px solid #ddd}</style>
</head><body><h1>Weft</h1>
<p>Folder <code>${escapeHtml(s.folder)}</code>: <strong>${escapeHtml(s.state === 'idle' && s.pendingOperations === 0 ? 'up to date' : s.state)}</strong>${s.error ? ` — ${escapeHtml(s.error)}` : ''}</p>
<p>${s.files} files · ${s.pendingOperations} waiting · ${s.conflicts.length} conflicts · saved ${s.savings.deltaBytesSaved} bytes by delta, ${s.savings.requestsSavedByBundling} requests by bundling, ${s.savings.operationsEliminated} operations eliminated</p>
<h2>Transfers</h2><ul>${transfers || '<li>none</li>'}</ul>
<h2>Recent activity</h2><table>${rows || '<tr><td>nothing yet</td></tr>'}</table>
</body></html>`;
}
