/**
 * `npm start -- --demo-clouds`: Weft with pretend clouds, to try connecting a cloud and
 * sharing a folder without any account.
 *
 * Starts the local Dropbox, Google Drive and OneDrive emulators (@weft/cloud-emulators) and
 * points sign-in at them (the same settings parser as real client IDs, cloud-clients.ts),
 * a proxy server whose share mirror reaches the emulators, and two local people on it: you
 * (your window, your folder) and Bob (a second agent with its own folder and window), both
 * windows in the browser. The
 * "Dropbox" already holds a folder `Team plans` to share. Everything of the demo's own lives
 * in `<home>/demo`, made afresh at every start (the emulators keep nothing); the two synced
 * folders are kept.
 *
 * scripts/start.ts calls startDemo(); e2e/test/demo-clouds.test.ts calls the same function.
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { rootCertificates } from 'node:tls';
import {
  DropboxEmulator,
  GDriveEmulator,
  OneDriveEmulator,
  createLocalCertificate,
} from '@weft/cloud-emulators';
import { type CloudClients, MAX_LOGIN_TTL_MS, cloudClientsFrom } from '@weft/core';
import { type OpenedUi, openDesktopUi } from '@weft/desktop';
import { DropboxProvider } from '@weft/providers';
import { privateDir, writePrivateFile } from '@weft/providers/private-files';
import { type RunningProxyServer, startProxyServer } from '@weft/proxy-server';

/** The folder waiting in the pretend Dropbox, and the file in it. */
export const DEMO_SHARED_FOLDER = 'Team plans';
export const DEMO_WELCOME_FILE = 'Welcome to the demo.txt';
const MARKER = 'weft-demo.json';

export interface DemoOptions {
  /** WEFT_HOME: the demo's state goes to `<home>/demo`. */
  readonly home: string;
  /** Your synced folder. */
  readonly folder: string;
  /** Bob's synced folder. */
  readonly bobFolder: string;
  /** Your user name on the demo's proxy (Bob is `bob`). */
  readonly user: string;
  readonly deviceName: string;
  /** 'auto': both windows in the browser (see below); 'none': serve only. */
  readonly open: 'auto' | 'none';
  /** A renderer build to serve (tests); default: built by openDesktopUi. */
  readonly uiDir?: string;
  /** How a browser is opened (tests pass a no-op). */
  readonly openBrowser?: (fileUrl: string) => void;
  readonly settleMs?: number;
}

export interface RunningDemo {
  readonly proxy: RunningProxyServer;
  readonly you: OpenedUi;
  readonly bob: OpenedUi;
  readonly bobUser: string;
  readonly emulators: {
    readonly dropbox: DropboxEmulator;
    readonly gdrive: GDriveEmulator;
    readonly onedrive: OneDriveEmulator;
  };
  /** The sign-in settings the agents were given (as from WEFT_* variables). */
  readonly clouds: CloudClients;
  /** `<home>/demo`. */
  readonly dir: string;
  stop(): Promise<void>;
}

/**
 * Let this process's fetch (Node's built-in undici) trust `caPem` besides the usual roots:
 * the OneDrive emulator is HTTPS only (the Graph SDK wants it) with a throwaway CA, and
 * NODE_EXTRA_CA_CERTS is read only when Node starts. The dispatcher fetch uses is replaced
 * with one of the same class whose TLS connections also accept that CA.
 */
export async function trustCaInThisProcess(caPem: string): Promise<void> {
  const slot = Symbol.for('undici.globalDispatcher.1');
  const g = globalThis as unknown as Record<symbol, unknown>;
  // fetch makes its dispatcher on first use; a request to a closed port does that.
  if (g[slot] === undefined) await fetch('http://127.0.0.1:9/').catch(() => undefined);
  const current = g[slot];
  if (typeof current !== 'object' || current === null)
    throw new Error('cannot trust the demo CA: fetch has no dispatcher');
  const Dispatcher = (current as { constructor: new (o: unknown) => unknown }).constructor;
  g[slot] = new Dispatcher({ connect: { ca: [...rootCertificates, caPem] } });
}

/** `<home>/demo`, emptied when an earlier demo made it; anything else there is left alone. */
async function freshDemoDir(home: string): Promise<string> {
  await privateDir(home);
  const dir = nodePath.join(home, 'demo');
  const entries = await fsp.readdir(dir).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return undefined;
    throw e;
  });
  if (entries && entries.length > 0) {
    if (!entries.includes(MARKER))
      throw new Error(`${dir} exists and was not made by the Weft demo; move it away first`);
    await fsp.rm(dir, { recursive: true, force: true });
  }
  await privateDir(dir);
  await writePrivateFile(nodePath.join(dir, MARKER), JSON.stringify({ startedMs: Date.now() }));
  return dir;
}

/** Pretend client IDs, of the shapes the real consoles issue (checked by cloudClientsFrom). */
function demoCloudClients(dropbox: string, gdrive: string, onedrive: string): CloudClients {
  return cloudClientsFrom({
    WEFT_DROPBOX_APP_KEY: 'weftdemoappkey',
    // Two people sign in to the pretend Dropbox on one computer: any free port each.
    WEFT_DROPBOX_REDIRECT_PORT: '0',
    WEFT_DROPBOX_AUTHORIZE_URL: `${dropbox}/oauth2/authorize`,
    WEFT_DROPBOX_TOKEN_URL: `${dropbox}/oauth2/token`,
    WEFT_GOOGLE_CLIENT_ID: '000000000000-weftdemo.apps.googleusercontent.com',
    WEFT_GOOGLE_CLIENT_SECRET: 'weft-demo-secret',
    WEFT_GOOGLE_AUTHORIZE_URL: `${gdrive}/o/oauth2/v2/auth`,
    WEFT_GOOGLE_TOKEN_URL: `${gdrive}/token`,
    WEFT_ONEDRIVE_CLIENT_ID: '00000000-0000-4000-8000-00000000de70',
    WEFT_ONEDRIVE_AUTHORIZE_URL: `${onedrive}/common/oauth2/v2.0/authorize`,
    WEFT_ONEDRIVE_TOKEN_URL: `${onedrive}/common/oauth2/v2.0/token`,
  });
}

export async function startDemo(o: DemoOptions): Promise<RunningDemo> {
  const dir = await freshDemoDir(o.home);
  const stack: (() => Promise<void>)[] = [];
  const stop = async (): Promise<void> => {
    for (const f of stack.splice(0).reverse()) await f().catch(() => undefined);
  };
  try {
    const tlsDir = nodePath.join(dir, 'tls');
    await privateDir(tlsDir);
    const tls = createLocalCertificate(tlsDir);
    await trustCaInThisProcess(tls.ca);
    const dropbox = await new DropboxEmulator().start();
    stack.push(() => dropbox.close());
    const gdrive = await new GDriveEmulator().start();
    stack.push(() => gdrive.close());
    const onedrive = await new OneDriveEmulator({ tls: { cert: tls.cert, key: tls.key } }).start();
    stack.push(() => onedrive.close());
    // Something to share: the folder a person would already have in their Dropbox.
    await new DropboxProvider({ token: dropbox.accessToken, baseUrl: dropbox.url }).write(
      `${DEMO_SHARED_FOLDER}/${DEMO_WELCOME_FILE}`,
      Buffer.from(
        'This file is in your pretend Dropbox. Share this folder from Weft’s Sharing screen,\n' +
          'accept the invitation in Bob’s window, and it reaches Bob’s pretend Google Drive.\n',
      ),
    );
    const clouds = demoCloudClients(dropbox.url, gdrive.url, onedrive.url);

    const adminToken = 'wfa_' + randomBytes(24).toString('base64url');
    const proxy = await startProxyServer({
      dataDir: nodePath.join(dir, 'proxy'),
      adminTokenSha256: createHash('sha256').update(adminToken).digest('hex'),
      port: 0,
      logLevel: 'warn',
      shares: {
        oauth: clouds.proxy,
        endpoints: { dropbox: dropbox.url, gdrive: gdrive.url, onedrive: onedrive.apiOrigin },
        pollIntervalMs: 1000,
      },
    });
    stack.push(() => proxy.close());

    const common = {
      server: proxy.url,
      adminToken,
      oauth: clouds.oauth,
      ...(o.uiDir ? { uiDir: o.uiDir } : {}),
      ...(o.openBrowser ? { openBrowser: o.openBrowser } : {}),
      ...(o.settleMs !== undefined ? { settleMs: o.settleMs } : {}),
    };
    const you = await openDesktopUi({
      ...common,
      // The browser even where Electron is installed: the desktop app runs its own agent,
      // which would not get the pretend clouds' sign-in nor trust their certificate.
      open: o.open === 'auto' ? 'browser' : 'none',
      folder: o.folder,
      stateDir: nodePath.join(dir, 'you'),
      user: o.user,
      deviceName: o.deviceName,
    });
    stack.push(() => you.stop());
    const bobUser = o.user === 'bob' ? 'bob2' : 'bob';
    const bob = await openDesktopUi({
      ...common,
      open: 'none',
      folder: o.bobFolder,
      stateDir: nodePath.join(dir, 'bob'),
      user: bobUser,
      deviceName: 'Bob’s computer',
    });
    stack.push(() => bob.stop());
    // Bob's window: a browser tab beside yours (cookies are kept apart by port).
    if (o.open === 'auto') await bob.agent?.openInBrowser();
    return { proxy, you, bob, bobUser, emulators: { dropbox, gdrive, onedrive }, clouds, dir, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** What `npm start -- --demo-clouds` does: start the demo, say where everything is, stop on Ctrl+C. */
export async function runDemoFromStart(o: {
  readonly home: string;
  readonly say: (line: string) => void;
}): Promise<RunningDemo> {
  const me =
    os
      .userInfo()
      .username.toLowerCase()
      .replace(/[^a-z0-9_.-]/g, '') || 'me';
  const noOpen = process.env.WEFT_NO_OPEN === '1' || process.env.WEFT_NO_OPEN === 'true';
  const demo = await startDemo({
    home: o.home,
    // Folders of their own (WEFT_FOLDER, your real one, is not used: it would be synced to
    // the demo's throwaway server).
    folder: process.env.WEFT_DEMO_FOLDER ?? nodePath.join(os.homedir(), 'Weft-demo'),
    bobFolder: process.env.WEFT_DEMO_BOB_FOLDER ?? nodePath.join(os.homedir(), 'Weft-demo-bob'),
    user: me,
    deviceName: 'this computer',
    open: noOpen ? 'none' : 'auto',
  });
  const { say } = o;
  const windowOf = (ui: OpenedUi): string =>
    ui.openedWith === 'electron'
      ? 'the desktop app (in the tray)'
      : ui.openedWith === 'browser' || !ui.agent
        ? `${ui.url} (opened in your browser)`
        : `${ui.agent.loginUrl(MAX_LOGIN_TTL_MS)} (one-time sign-in link, 10 minutes)`;
  say('Weft demo: pretend clouds and a second person, no accounts needed.');
  say(`Your folder:   ${demo.you.agent?.engine.getStatus().folder ?? ''}`);
  say(`Your window:   ${windowOf(demo.you)}`);
  say(`Bob's folder:  ${demo.bob.agent?.engine.getStatus().folder ?? ''}`);
  say(`Bob's window:  ${windowOf(demo.bob)}`);
  say(`Pretend clouds: Dropbox ${demo.emulators.dropbox.url}, Google Drive ${demo.emulators.gdrive.url},`);
  say(`                OneDrive ${demo.emulators.onedrive.url} (its certificate: ${demo.dir}/tls/ca.pem)`);
  say(`Try: Accounts → Connect Dropbox; Sharing → share "${DEMO_SHARED_FOLDER}" from Dropbox;`);
  say('     in Bob’s window: Accounts → Connect Google Drive, Sharing → accept the invitation.');
  say(`Proxy server:  ${demo.proxy.url} (demo data in ${demo.dir}, made afresh at each start)`);
  say('Press Ctrl+C to stop.');
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void demo.stop().then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  return demo;
}
