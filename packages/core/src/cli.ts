/**
 * `weft agent --folder DIR --server URL [--user U] [--admin-token T | --invite I | --token T]`
 * `weft status [--state DIR]`
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { parseArgs } from 'node:util';
import { startAgent } from './agent.ts';
import type { FolderStatus } from './status.ts';

const out = (line: string): void => void process.stdout.write(line + '\n');
const fail = (line: string): never => {
  process.stderr.write(`weft: ${line}\n`);
  process.exit(2);
};

const [command, ...rest] = process.argv.slice(2);
const defaultState = nodePath.join(process.env.WEFT_HOME ?? nodePath.join(os.homedir(), '.weft'), 'agent');

if (command === 'agent') {
  const { values } = parseArgs({
    args: rest,
    options: {
      folder: { type: 'string' },
      server: { type: 'string' },
      state: { type: 'string' },
      user: { type: 'string' },
      device: { type: 'string' },
      token: { type: 'string' },
      'admin-token': { type: 'string' },
      invite: { type: 'string' },
      'status-port': { type: 'string' },
      'up-limit': { type: 'string' },
      'down-limit': { type: 'string' },
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
    fail('usage: weft agent --folder DIR --server URL [--user U] [--admin-token T]');
  const agent = await startAgent({
    folder: nodePath.resolve(values.folder as string),
    server: values.server as string,
    stateDir: values.state ?? defaultState,
    user: values.user,
    deviceName: values.device,
    token: values.token,
    adminToken: values['admin-token'] ?? process.env.WEFT_ADMIN_TOKEN,
    invite: values.invite,
    statusPort: values['status-port'] ? Number(values['status-port']) : 0,
    uploadBytesPerSecond,
    downloadBytesPerSecond,
  });
  out(`weft agent: syncing ${values.folder} with ${values.server}`);
  out(`weft agent: status at ${agent.statusUrl}`);
  const shutdown = (): void => {
    void agent.stop().then(() => process.exit(0));
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
} else if (command === 'status') {
  const { values } = parseArgs({
    args: rest,
    options: { state: { type: 'string' }, json: { type: 'boolean' } },
  });
  const stateDir = values.state ?? defaultState;
  let info: { statusUrl: string };
  try {
    info = JSON.parse(await fsp.readFile(nodePath.join(stateDir, 'agent.json'), 'utf8')) as {
      statusUrl: string;
    };
  } catch {
    fail(`no agent is running for ${stateDir}`);
    throw new Error('unreachable');
  }
  const res = await fetch(new URL('/api/status', info.statusUrl));
  const s = (await res.json()) as FolderStatus;
  if (values.json) out(JSON.stringify(s, null, 2));
  else {
    const state = s.state === 'idle' && s.pendingOperations === 0 ? 'up to date' : s.state;
    out(`${s.folder}: ${state}${s.error ? ` (${s.error})` : ''}`);
    out(`  files ${s.files}, waiting ${s.pendingOperations}, conflicts ${s.conflicts.length}`);
    out(`  uploaded ${s.bytesUploaded} B, downloaded ${s.bytesDownloaded} B`);
    out(
      `  saved: ${s.savings.deltaBytesSaved} B by delta, ${s.savings.requestsSavedByBundling} requests by bundling, ${s.savings.operationsEliminated} operations eliminated`,
    );
    for (const t of s.transfers)
      out(`  ${t.direction === 'up' ? '↑' : '↓'} ${t.path} ${t.bytesDone}/${t.bytesTotal}`);
    for (const a of s.recent.slice(0, 10)) out(`  ${new Date(a.atMs).toISOString()} ${a.kind} ${a.path}`);
  }
} else {
  out('usage: weft agent --folder DIR --server URL [...] | weft status [--state DIR] [--json]');
  process.exit(command ? 2 : 0);
}
