/**
 * Electron main: thin. Single-instance lock, the agent (engine + local UI server) in this
 * process, the tray (state from ../common/tray-state.ts: its menu, and a click opens the
 * compact popover, renderer/tray.html, drawing the same model), the status window loading the
 * renderer build with the preload, start-at-login, and a shutdown that lets the engine
 * finish its current write.
 */
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { pathToFileURL } from 'node:url';
import { type RunningAgent, keyFileSecretStore, loadCloudClients, startAgent } from '@weft/core';
import {
  app,
  BrowserWindow,
  dialog,
  ipcMain,
  Menu,
  type MenuItemConstructorOptions,
  nativeImage,
  Notification,
  safeStorage,
  shell,
  Tray,
} from 'electron';
import { type CostView, type FolderStatusDto, STATUS_EVENT } from '../common/api.ts';
import {
  type TrayAction,
  type TrayMenuItem,
  trayMenu,
  trayNotifications,
  trayState,
} from '../common/tray-state.ts';
import { applyStartAtLogin, gracefulQuit, singleInstance, withStartAtLogin } from './app-lifecycle.ts';
import { isRendererPage, registerFolderPicker, registerIpc, registerTrayActions } from './ipc.ts';
import { safeSecretStore } from './safe-secret-store.ts';

const rendererDir = nodePath.join(__dirname, '..', 'renderer');
const stateDir = process.env.WEFT_STATE_DIR ?? nodePath.join(os.homedir(), '.weft', 'desktop');
const folder = process.env.WEFT_FOLDER ?? nodePath.join(os.homedir(), 'Weft');
/**
 * The server: $WEFT_SERVER, else the enrolment of an earlier run (the agent reads it), else
 * none yet: the window's Accounts screen enrols the device.
 */
const server = process.env.WEFT_SERVER || undefined;

let agent: RunningAgent | undefined;
let tray: Tray | undefined;
let win: BrowserWindow | undefined;
let popover: BrowserWindow | undefined;

function toMenu(items: readonly TrayMenuItem[], run: (a: TrayAction) => void): MenuItemConstructorOptions[] {
  return items.map((i): MenuItemConstructorOptions => {
    switch (i.kind) {
      case 'separator':
        return { type: 'separator' };
      case 'label':
        return { label: i.label, enabled: false };
      case 'submenu':
        return { label: i.label, submenu: toMenu(i.items, run) };
      case 'item':
        return { label: i.label, enabled: i.enabled, click: () => run(i.action) };
    }
  });
}

function openWindow(): void {
  if (win) {
    win.show();
    win.focus();
    return;
  }
  win = new BrowserWindow({
    width: 900,
    height: 700,
    title: 'Weft',
    webPreferences: {
      preload: nodePath.join(__dirname, 'preload.cjs'),
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
    },
  });
  win.webContents.setWindowOpenHandler(({ url }) => {
    if (/^https?:/.test(url)) void shell.openExternal(url);
    // The header's "Compact view" link: the tray popover.
    else if (isRendererPage(pathToFileURL(nodePath.join(rendererDir, 'tray.html')).href)(url))
      togglePopover();
    return { action: 'deny' };
  });
  // The window shows the packaged renderer only (screens change by #hash, not navigation).
  win.webContents.on('will-navigate', (event) => event.preventDefault());
  win.on('closed', () => (win = undefined));
  void win.loadFile(nodePath.join(rendererDir, 'index.html'));
}

/** The compact popover by the tray icon (tray.html); a click elsewhere hides it. */
function togglePopover(): void {
  if (popover?.isVisible()) return popover.hide();
  if (!popover) {
    popover = new BrowserWindow({
      width: 380,
      height: 520,
      show: false,
      frame: false,
      resizable: false,
      skipTaskbar: true,
      alwaysOnTop: true,
      title: 'Weft',
      webPreferences: {
        preload: nodePath.join(__dirname, 'preload.cjs'),
        contextIsolation: true,
        sandbox: true,
        nodeIntegration: false,
      },
    });
    popover.webContents.setWindowOpenHandler(() => ({ action: 'deny' }));
    popover.webContents.on('will-navigate', (event) => event.preventDefault());
    popover.on('blur', () => popover?.hide());
    popover.on('closed', () => (popover = undefined));
    void popover.loadFile(nodePath.join(rendererDir, 'tray.html'));
  }
  // Under (or, with the taskbar at the bottom, above) the tray icon.
  const icon = tray?.getBounds();
  if (icon && icon.width > 0) {
    const [w, h] = popover.getSize() as [number, number];
    const x = Math.round(icon.x + icon.width / 2 - w / 2);
    const y = icon.y > h ? icon.y - h : icon.y + icon.height;
    popover.setPosition(Math.max(0, x), Math.max(0, y));
  }
  popover.show();
  popover.focus();
}

async function main(): Promise<void> {
  if (!singleInstance(app, openWindow)) return;
  await app.whenReady();
  const secrets = safeSecretStore(
    safeStorage,
    nodePath.join(stateDir, 'secrets'),
    keyFileSecretStore({ dir: nodePath.join(stateDir, 'secrets') }),
  );
  agent = await startAgent({
    folder,
    ...(server ? { server } : {}),
    stateDir,
    uiDir: rendererDir,
    ...(process.env.WEFT_ADMIN_TOKEN ? { adminToken: process.env.WEFT_ADMIN_TOKEN } : {}),
    ...(process.env.WEFT_INVITE ? { invite: process.env.WEFT_INVITE } : {}),
    ...(process.env.WEFT_USER ? { user: process.env.WEFT_USER } : {}),
    ...(process.env.WEFT_DEVICE ? { deviceName: process.env.WEFT_DEVICE } : {}),
    secrets,
    // Cloud sign-in: environment or $WEFT_HOME/clouds.json (docs/clouds.md); a malformed
    // value ends the app with the variable named.
    oauth: loadCloudClients().oauth,
  });
  const running = agent;
  // IPC answers the packaged renderer page only; it needs no secret (see main/ipc.ts).
  const isWindow = isRendererPage(pathToFileURL(nodePath.join(rendererDir, 'index.html')).href);
  const isPopover = isRendererPage(pathToFileURL(nodePath.join(rendererDir, 'tray.html')).href);
  const trusted = (url: string): boolean => isWindow(url) || isPopover(url);
  // Start at login is applied here as well as saved (only Electron can do it).
  const handlers = {
    ...running.ui.handlers,
    setSettings: withStartAtLogin(app, running.ui.handlers.setSettings),
    // shell.openPath answers '' when it opened the folder, else what went wrong.
    openFolder: async () => ({ opened: (await shell.openPath(folder)) === '' }),
  };
  const unregister = registerIpc(ipcMain, handlers, trusted);
  // The popover's "Open folder" and "Open Weft window" (run below, as the menu's are).
  const unregisterTray = registerTrayActions(ipcMain, trusted, (type) => {
    popover?.hide();
    run({ type });
  });
  // Settings → Add folder → "Choose…": the system's folder dialog.
  const unregisterPicker = registerFolderPicker(ipcMain, isWindow, async () => {
    const owner = BrowserWindow.getFocusedWindow();
    const options = {
      properties: ['openDirectory', 'createDirectory'] as ('openDirectory' | 'createDirectory')[],
    };
    const r = owner ? await dialog.showOpenDialog(owner, options) : await dialog.showOpenDialog(options);
    return r.canceled ? null : (r.filePaths[0] ?? null);
  });
  const settings = await handlers.getSettings({});
  applyStartAtLogin(app, settings.startAtLogin);

  tray = new Tray(nativeImage.createEmpty());
  let prev: FolderStatusDto | undefined;
  // The month's bill in the tray menu, read every 10 minutes (docs/cost.md).
  let cost: CostView | undefined;
  const readCost = (): void => {
    handlers.getCost({}).then(
      (c) => {
        cost = c;
        refresh();
      },
      () => undefined,
    );
  };
  const run = (a: TrayAction): void => {
    switch (a.type) {
      case 'openFolder':
        void shell.openPath(folder);
        break;
      case 'openStatus':
        openWindow();
        break;
      case 'pause':
        void handlers.pause({ duration: a.duration }).catch(() => undefined);
        break;
      case 'resume':
        void handlers.resume({}).catch(() => undefined);
        break;
      case 'openFile':
        void shell.openPath(nodePath.join(a.root ?? folder, ...a.path.split('/')));
        break;
      case 'quit':
        app.quit();
        break;
    }
  };
  const refresh = (): void => {
    const s = running.ui.status();
    const t = trayState(s, Date.now());
    tray?.setToolTip(t.tooltip);
    tray?.setImage(nativeImage.createFromPath(nodePath.join(__dirname, '..', 'icons', `tray-${t.icon}.png`)));
    tray?.setContextMenu(Menu.buildFromTemplate(toMenu(trayMenu(s, Date.now(), cost), run)));
    for (const n of trayNotifications(prev, s)) new Notification(n).show();
    prev = s;
    win?.webContents.send(STATUS_EVENT, s);
    popover?.webContents.send(STATUS_EVENT, s);
  };
  const sub = running.ui.onStatus(refresh);
  refresh();
  readCost();
  const costTimer = setInterval(readCost, 10 * 60_000);
  tray.on('click', togglePopover);

  app.on('window-all-closed', () => {
    /* stay in the tray */
  });
  gracefulQuit(app, {
    beforeStop: () => {
      clearInterval(costTimer);
      sub.dispose();
      unregister();
      unregisterTray();
      unregisterPicker();
      popover?.destroy();
      tray?.destroy();
    },
    // The engine finishes its current write before stop() resolves.
    stop: () => running.stop(),
    onError: (e) => process.stderr.write(`weft: ${e instanceof Error ? e.message : String(e)}\n`),
  });
  if (!running.enrolled) openWindow();
}

void main().catch((e: unknown) => {
  process.stderr.write(`weft: ${e instanceof Error ? e.message : String(e)}\n`);
  app.exit(1);
});
