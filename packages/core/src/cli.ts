/**
 * `weft agent --folder DIR --server URL [--user U] [--admin-token-file F | --invite I | --token-file F] [--open]`
 * `weft status [--state DIR] [--json]`
 * `weft open [--state DIR] [--print]`: sign the browser in to a running agent's UI (a
 * one-time login link, through a 0600 launcher page; `--print` writes it out instead).
 *
 * The agent reads the clouds' OAuth clients from WEFT_DROPBOX_APP_KEY, WEFT_GOOGLE_CLIENT_ID /
 * WEFT_GOOGLE_CLIENT_SECRET, WEFT_ONEDRIVE_CLIENT_ID (or $WEFT_HOME/clouds.json), docs/clouds.md.
 *
 * `status` and `open` read the agent's secret from `<state>/agent.json` (0600) and send it
 * in a header, never on a command line.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { parseArgs } from 'node:util';
import { startAgent } from './agent.ts';
import { loadCloudClients } from './cloud-clients.ts';
import { traceLoopFromEnv } from './loop-trace.ts';
import { installProcessGuard } from './process-guard.ts';
import { usageLine } from './storage-usage.ts';
import { readSecretFile } from './token-file.ts';
import { openLoginInBrowser } from './ui-server/browser-open.ts';
import type { FolderStatus } from './status.ts';
import type { FolderStatusDto, SyncedFolder } from '@weft/ui-contract';

type ServerLine = NonNullable<FolderStatusDto['server']>;

const out = (line: string): void => void process.stdout.write(line + '\n');
const fail = (line: string): never => {
  process.stderr.write(`weft: ${line}\n`);
  process.exit(2);
};

const [command, ...rest] = process.argv.slice(2);
const defaultState = nodePath.join(process.env.WEFT_HOME ?? nodePath.join(os.homedir(), '.weft'), 'agent');

if (command === 'agent') {
  // No error may end the agent unheard (issue #14): logged, kept up; exits only when broken.
  installProcessGuard({ log: (line) => void process.stderr.write(line + '\n') });
  // WEFT_LOOP_TRACE_MS=50: what held the event loop, on stderr (loop-trace.ts).
  traceLoopFromEnv();
  const { values } = parseArgs({
    args: rest,
    options: {
      folder: { type: 'string' },
      server: { type: 'string' },
      state: { type: 'string' },
      user: { type: 'string' },
      device: { type: 'string' },
      token: { type: 'string' },
      'token-file': { type: 'string' },
      'admin-token': { type: 'string' },
      'admin-token-file': { type: 'string' },
      invite: { type: 'string' },
      'status-port': { type: 'string' },
      'up-limit': { type: 'string' },
      'down-limit': { type: 'string' },
      open: { type: 'boolean' },
    },
  });
  const rate = (v: string | undefined, name: string): number | undefined => {
    if (v === undefined) return undefined;
    const m = /^(\d+(?:\.\d+)?)\s*([kmg]?)(?:i?b)?(?:\/s)?$/i.exec(v.trim());
    if (!m) fail(`--${name} takes a rate such as 500k, 2m or 1g (bytes per second)`);
    const unit = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[
      (m?.[2] ?? '').toLowerCase() as '' | 'k' | 'm' | 'g'
    ];
    return Math.round(Number(m?.[1]) * unit);
  };
  const uploadBytesPerSecond = rate(values['up-limit'], 'up-limit');
  const downloadBytesPerSecond = rate(values['down-limit'], 'down-limit');
  if (!values.folder || !values.server)
    fail('usage: weft agent --folder DIR --server URL [--user U] [--admin-token-file FILE]');
  // A secret on the command line is shown to every local user (ps): files or environment only.
  if (values.token !== undefined)
    fail(
      '--token would show the device token to every user of this computer (ps); put it in a file only you can read (chmod 600) and pass --token-file FILE, or set WEFT_DEVICE_TOKEN',
    );
  if (values['admin-token'] !== undefined)
    fail(
      '--admin-token would show the admin token to every user of this computer (ps); put it in a file only you can read (chmod 600) and pass --admin-token-file FILE, or set WEFT_ADMIN_TOKEN',
    );
  const secretFrom = async (file: string | undefined, what: string): Promise<string | undefined> => {
    if (file === undefined) return undefined;
    try {
      return await readSecretFile(file, what);
    } catch (e) {
      return fail((e as Error).message);
    }
  };
  const token = (await secretFrom(values['token-file'], 'device token')) ?? process.env.WEFT_DEVICE_TOKEN;
  const adminToken =
    (await secretFrom(values['admin-token-file'], 'admin token')) ?? process.env.WEFT_ADMIN_TOKEN;
  // Dropbox / Google Drive / OneDrive sign-in (docs/clouds.md); a malformed value stops here.
  let clouds: ReturnType<typeof loadCloudClients> | undefined;
  try {
    clouds = loadCloudClients();
  } catch (e) {
    fail((e as Error).message);
  }
  const agent = await startAgent({
    folder: nodePath.resolve(values.folder as string),
    server: values.server as string,
    stateDir: values.state ?? defaultState,
    user: values.user,
    deviceName: values.device,
    token: token || undefined,
    adminToken: adminToken || undefined,
    invite: values.invite,
    statusPort: values['status-port'] ? Number(values['status-port']) : 0,
    uploadBytesPerSecond,
    downloadBytesPerSecond,
    oauth: clouds?.oauth ?? {},
  });
  out(`weft agent: syncing ${values.folder} with ${values.server}`);
  out(`weft agent: status at ${agent.statusUrl}`);
  const signIns = Object.keys(clouds?.oauth ?? {});
  out(
    `weft agent: cloud sign-in ${signIns.length ? `set up for ${signIns.join(', ')}` : 'not set up (see docs/clouds.md)'}`,
  );
  if (values.open) {
    await agent.openInBrowser();
    out('weft agent: opened the UI in your browser');
  } else out('weft agent: to open the UI, run `weft open` (or `weft open --print` for a one-time link)');
  const shutdown = (): void => {
    void agent.stop().then(() => process.exit(0));
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
} else if (command === 'status' || command === 'open') {
  const { values } = parseArgs({
    args: rest,
    options: { state: { type: 'string' }, json: { type: 'boolean' }, print: { type: 'boolean' } },
  });
  const stateDir = values.state ?? defaultState;
  let info: { statusUrl: string; secret: string };
  try {
    info = JSON.parse(await fsp.readFile(nodePath.join(stateDir, 'agent.json'), 'utf8')) as {
      statusUrl: string;
      secret: string;
    };
  } catch {
    fail(`no agent is running for ${stateDir}`);
    throw new Error('unreachable');
  }
  const headers = { 'x-weft-secret': info.secret };
  if (command === 'open') {
    const res = await fetch(new URL('/api/login', info.statusUrl), {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      // A link for a person to copy gets the longest life; one the browser opens, the default.
      body: JSON.stringify(values.print ? { validForSeconds: 600 } : {}),
    });
    if (!res.ok) fail(`the agent at ${info.statusUrl} refused: HTTP ${res.status}`);
    const { url } = (await res.json()) as { url: string };
    if (values.print) out(url);
    else {
      await openLoginInBrowser(url, stateDir);
      out('weft: opened the UI in your browser');
    }
    process.exit(0);
  }
  const res = await fetch(new URL('/api/status', info.statusUrl), { headers });
  if (!res.ok) fail(`the agent at ${info.statusUrl} refused: HTTP ${res.status}`);
  // The status of every synced folder together, with one line per folder when there are several.
  const s = (await res.json()) as FolderStatus & { folders?: SyncedFolder[]; server?: ServerLine };
  if (values.json) out(JSON.stringify(s, null, 2));
  else {
    const state = s.state === 'idle' && s.pendingOperations === 0 ? 'up to date' : s.state;
    out(`${s.folder}: ${state}${s.error ? ` (${s.error})` : ''}`);
    out(`  files ${s.files}, waiting ${s.pendingOperations}, conflicts ${s.conflicts.length}`);
    if ((s.folders?.length ?? 0) > 1)
      for (const f of s.folders ?? [])
        out(
          `  ${f.primary ? 'main folder' : `folder ${f.name}`} ${f.path}: ${f.state === 'idle' && f.pendingOperations === 0 ? 'up to date' : f.state}, ${f.files} files${f.error ? ` (${f.error})` : ''}`,
        );
    out(`  uploaded ${s.bytesUploaded} B, downloaded ${s.bytesDownloaded} B`);
    if (s.storage) out(`  ${usageLine(s.storage)}`);
    if (s.server)
      out(
        `  server ${s.server.url}${s.server.id ? ` (instance ${s.server.id})` : ''}${s.server.rttMs !== undefined ? `, ${s.server.rttMs} ms` : ''}; ${s.server.up} of ${s.server.instances} instances answer${s.server.failovers ? `, moved ${s.server.failovers}× after failures` : ''}`,
      );
    out(
      `  saved: ${s.savings.deltaBytesSaved} B by delta, ${s.savings.requestsSavedByBundling} requests by bundling, ${s.savings.operationsEliminated} operations eliminated`,
    );
    for (const t of s.transfers)
      out(`  ${t.direction === 'up' ? '↑' : '↓'} ${t.path} ${t.bytesDone}/${t.bytesTotal}`);
    for (const a of s.recent.slice(0, 10) as (FolderStatus['recent'][number] & { folder?: string })[])
      out(`  ${new Date(a.atMs).toISOString()} ${a.kind} ${a.folder ? `${a.folder}: ` : ''}${a.path}`);
  }
} else {
  out(
    'usage: weft agent --folder DIR --server URL [...] [--open] | weft status [--state DIR] [--json] | weft open [--state DIR] [--print]',
  );
  process.exit(command ? 2 : 0);
}
