/**
 * Opening a one-time login link in the system browser without putting it on a command
 * line: any local user can read other processes' arguments (`ps`, /proc/<pid>/cmdline)
 * and could use the link before the browser does. The link goes into a 0600 launcher page
 * in the agent's 0700 state folder instead, and the browser is given that file's address
 * (as Jupyter does).
 */
import { spawn } from 'node:child_process';
import * as nodePath from 'node:path';
import { pathToFileURL } from 'node:url';
import { writePrivateFile } from '../private-file.ts';

/** The launcher page's name in the state folder. */
export const LAUNCHER_FILE = 'open-ui.html';

/** Hand a URL or file to the desktop's opener (xdg-open, open, explorer). */
export function systemOpen(target: string): void {
  const cmd = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
  const child = spawn(cmd, [target], { stdio: 'ignore', detached: true });
  child.on('error', () => undefined);
  child.unref();
}

/**
 * Show a folder in the file manager (the same opener); resolves false when there is none
 * (a machine without a desktop) or it failed.
 */
export function systemOpenFolder(path: string): Promise<boolean> {
  const cmd = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
  return new Promise((resolve) => {
    const child = spawn(cmd, [path], { stdio: 'ignore' });
    child.once('error', () => resolve(false));
    // explorer answers 1 even when it opened the folder.
    child.once('exit', (code) => resolve(code === 0 || process.platform === 'win32'));
  });
}

const escapeAttr = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * Write the launcher page for `loginUrl` into `dir` and open it; returns the page's path.
 * `open` receives only the file's address, never the link.
 */
export async function openLoginInBrowser(
  loginUrl: string,
  dir: string,
  open: (target: string) => void = systemOpen,
): Promise<string> {
  const file = nodePath.join(dir, LAUNCHER_FILE);
  const href = escapeAttr(loginUrl);
  await writePrivateFile(
    file,
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=${href}"><title>Opening Weft…</title></head><body><p><a href="${href}">Open Weft</a></p></body></html>\n`,
  );
  open(pathToFileURL(file).href);
  return file;
}
