/**
 * `npm start`: run Weft on its embedded defaults — no configuration, no accounts.
 *
 * Starts the proxy server (SQLite metadata, filesystem tier and object tier in a local
 * data folder), enrols this computer as a device the first time, and opens the Weft window
 * through `openDesktopUi`: the desktop app when Electron (with its binary) is installed,
 * otherwise an agent serving the UI, opened in the system browser. Everything survives a
 * restart. WEFT_HOME (default ~/.weft) holds the data; WEFT_FOLDER (default ~/Weft) is the
 * synced folder; WEFT_NO_OPEN=1 serves the UI without opening anything (headless, tests) and
 * prints a one-time sign-in link instead (`npx weft open --print` gives another).
 *
 * `npm start -- --demo-clouds`: pretend Dropbox, Google Drive and OneDrive and a second
 * person to share with, no accounts needed (scripts/demo-clouds.ts, docs/clouds.md).
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { openDesktopUi } from '@weft/desktop';
import { CloudClientSettingsError, MAX_LOGIN_TTL_MS, loadCloudClients } from '@weft/core';
import { startProxyServer } from '@weft/proxy-server';
import { privateDir, writePrivateFile } from '@weft/providers/private-files';

const home = process.env.WEFT_HOME ?? nodePath.join(os.homedir(), '.weft');
const folder = process.env.WEFT_FOLDER ?? nodePath.join(os.homedir(), 'Weft');
const say = (line: string): void => void process.stdout.write(line + '\n');

async function readJson<T>(file: string): Promise<T | undefined> {
  try {
    return JSON.parse(await fsp.readFile(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

/** The port we used last time if it is free again (so the device keeps its server URL). */
async function preferredPort(wanted: number | undefined): Promise<number> {
  if (!wanted) return 0;
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(0));
    probe.listen(wanted, '127.0.0.1', () => probe.close(() => resolve(wanted)));
  });
}

// --demo-clouds: pretend Dropbox, Drive and OneDrive and a second person, to try sharing
// without any account (scripts/demo-clouds.ts, docs/clouds.md "Trying it without accounts").
if (process.argv.slice(2).includes('--demo-clouds')) {
  const { runDemoFromStart } = await import('./demo-clouds.ts');
  await runDemoFromStart({ home, say });
  // The demo runs until Ctrl+C (its own signal handlers stop it).
} else {
  await startNormally();
}

async function startNormally(): Promise<void> {
  // Dropbox / Google Drive / OneDrive sign-in: the OAuth clients from the environment or
  // $WEFT_HOME/clouds.json (docs/clouds.md), for the agent and for the proxy (which refreshes
  // the tokens given to it for sharing). A malformed value stops here, naming the variable.
  let clouds: ReturnType<typeof loadCloudClients>;
  try {
    clouds = loadCloudClients();
  } catch (e) {
    if (!(e instanceof CloudClientSettingsError)) throw e;
    process.stderr.write(`weft: ${e.message}\n`);
    process.exit(2);
  }

  // Owner-only whatever the umask, also when an older run left looser modes.
  await privateDir(home);
  const startFile = nodePath.join(home, 'start.json');
  const saved = await readJson<{ port?: number }>(startFile);
  const firstRun = saved === undefined;

  // The embedded proxy's admin token is needed only to enrol this computer (the first run, or
  // after its enrolment was lost), so it lives for one run, in memory: the proxy is given only
  // its hash, and nothing of it is written down. start.json keeps the port alone; one from an
  // older version that still holds a plaintext token is rewritten without it (that token is
  // then refused: devices enrolled with it keep their own tokens).
  const adminToken = 'wfa_' + randomBytes(24).toString('base64url');
  const proxy = await startProxyServer({
    dataDir: nodePath.join(home, 'proxy'),
    adminTokenSha256: createHash('sha256').update(adminToken).digest('hex'),
    port: await preferredPort(saved?.port),
    logLevel: 'warn',
    shares: { oauth: clouds.proxy },
  });
  const port = Number(new URL(proxy.url).port);
  await writePrivateFile(startFile, JSON.stringify({ port }));

  const noOpen = process.env.WEFT_NO_OPEN === '1' || process.env.WEFT_NO_OPEN === 'true';
  const ui = await openDesktopUi({
    open: noOpen ? 'none' : 'auto',
    folder,
    server: proxy.url,
    stateDir: nodePath.join(home, 'agent'),
    user:
      os
        .userInfo()
        .username.toLowerCase()
        .replace(/[^a-z0-9_.-]/g, '') || 'me',
    deviceName:
      os
        .hostname()
        .replace(/[/\\()]/g, '-')
        .slice(0, 60) || 'this computer',
    adminToken,
    oauth: clouds.oauth,
  });

  if (firstRun) say('Welcome to Weft. Files you put in the folder below are synced to your Weft storage.');
  say(`Weft folder:  ${folder}`);
  if (ui.openedWith === 'electron') say('Weft window:  the desktop app (in the tray)');
  else if (ui.openedWith === 'browser' || !ui.agent) say(`Weft window:  ${ui.url} (opened in your browser)`);
  else {
    // Nothing opened: a link for the person at this terminal, valid once (the browser that
    // uses it signs in) and for ten minutes.
    say(`Weft window:  ${ui.agent.loginUrl(MAX_LOGIN_TTL_MS)}`);
    say('              (a one-time sign-in link, valid for 10 minutes; another: npx weft open --print)');
  }
  say(`Proxy server: ${proxy.url} (data in ${home})`);
  const signIns = Object.keys(clouds.oauth);
  if (signIns.length) say(`Cloud sign-in: ${signIns.join(', ')}`);
  say('Press Ctrl+C to stop.');

  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await ui.stop();
    await proxy.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
}
