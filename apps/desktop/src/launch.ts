/**
 * Open the Weft UI: build the renderer, start `weft agent` serving it on 127.0.0.1, then
 * open the desktop app when Electron is installed (with its binary) or the system browser
 * otherwise. This is what `npm start` calls.
 *
 * The browser gets in with a one-time login link (through a 0600 launcher page, see
 * RunningAgent.openInBrowser), never with the agent's secret; the desktop app's window
 * talks to its own in-process agent over IPC and needs no secret at all.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as nodePath from 'node:path';
import { pathToFileURL } from 'node:url';
import { type AgentOptions, type RunningAgent, startAgent } from '@weft/core';
import { buildElectron, buildRenderer } from './build.ts';

export interface OpenUiOptions extends AgentOptions {
  /** 'auto' (default): Electron when its binary is present, else the browser; 'none': just serve. */
  readonly open?: 'auto' | 'browser' | 'electron' | 'none';
}

export interface OpenedUi {
  /**
   * The UI's address (empty when the desktop app runs it). It needs a signed-in browser:
   * `agent.loginUrl()` gives a one-time link.
   */
  readonly url: string;
  /** The agent serving the UI; undefined when the desktop app runs its own. */
  readonly agent: RunningAgent | undefined;
  readonly openedWith: 'electron' | 'browser' | 'none';
  stop(): Promise<void>;
}

/** Path of the Electron binary when the `electron` package and its download are present. */
export function electronBinary(): string | undefined {
  try {
    const req = createRequire(import.meta.url);
    const pkgDir = nodePath.dirname(req.resolve('electron/package.json'));
    const pathFile = nodePath.join(pkgDir, 'path.txt');
    if (!existsSync(pathFile)) return undefined;
    const bin = req('electron') as unknown;
    return typeof bin === 'string' && existsSync(bin) ? bin : undefined;
  } catch {
    return undefined;
  }
}

export async function openDesktopUi(options: OpenUiOptions): Promise<OpenedUi> {
  const mode = options.open ?? 'auto';
  const electron = mode === 'auto' || mode === 'electron' ? electronBinary() : undefined;
  if (electron) {
    const out = await buildElectron();
    await buildRenderer(nodePath.join(out, '..', 'renderer'));
    // Electron runs its own agent in the main process; this one is not needed.
    const child = spawn(electron, [nodePath.join(out, 'main.cjs')], {
      stdio: 'inherit',
      env: {
        ...process.env,
        WEFT_FOLDER: options.folder,
        WEFT_STATE_DIR: options.stateDir,
        ...(options.server ? { WEFT_SERVER: options.server } : {}),
        ...(options.adminToken ? { WEFT_ADMIN_TOKEN: options.adminToken } : {}),
        ...(options.invite ? { WEFT_INVITE: options.invite } : {}),
        ...(options.user ? { WEFT_USER: options.user } : {}),
        ...(options.deviceName ? { WEFT_DEVICE: options.deviceName } : {}),
      },
    });
    const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
    return {
      url: '',
      agent: undefined,
      openedWith: 'electron',
      async stop() {
        child.kill('SIGTERM');
        await exited;
      },
    };
  }
  const uiDir = options.uiDir ?? (await buildRenderer());
  const agent = await startAgent({ ...options, uiDir });
  const openedWith = mode === 'none' ? 'none' : 'browser';
  if (openedWith === 'browser') await agent.openInBrowser();
  return { url: agent.statusUrl, agent, openedWith, stop: () => agent.stop() };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [folder, server, stateDir] = process.argv.slice(2);
  if (!folder || !server || !stateDir) {
    process.stderr.write('usage: tsx apps/desktop/src/launch.ts <folder> <server-url|-> <state-dir>\n');
    process.exit(2);
  }
  const ui = await openDesktopUi({
    folder,
    // '-': no server yet (enrol from the Accounts screen), or the one enrolled earlier.
    ...(server === '-' ? {} : { server }),
    stateDir,
    ...(process.env.WEFT_ADMIN_TOKEN ? { adminToken: process.env.WEFT_ADMIN_TOKEN } : {}),
  });
  process.stdout.write(
    `Weft UI: ${ui.url ? `${ui.url} (opened in your browser; a new sign-in link: weft open --state ${stateDir})` : '(desktop app)'}\n`,
  );
  const stop = (): void => void ui.stop().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
