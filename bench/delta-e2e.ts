// The headline of the delta bench: what a running agent actually sends for an edit of a
// large file — its own block-size choice, its own compression, its own Eq. 2 decision, the
// signature included — measured end to end (agent → shaped link → proxy), beside
// `rsync -I -z --no-W` pushing the same new version onto the same old one through a loopback
// rsync daemon across an identical link. Every byte of both is counted by the link itself
// (TCP payload both ways: HTTP requests and responses for Weft, the rsync protocol for rsync).
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import { join } from 'node:path';
import { Engine, ProxyClient } from '@weft/core';
import { signatureBlockSize, startProxyServer } from '@weft/proxy-server';
import { chooseBlockSize } from '../packages/core/src/adaptive.ts';
import { ThrottledLink } from '../packages/mirror/src/interproxy/throttle.ts';

export interface LinkShape {
  readonly bitsPerSecond: number;
  readonly latencyMs: number;
}

export interface E2eRow {
  pair: string;
  MB: string;
  editor: string;
  'sig from': string;
  block: string;
  'Eq. 2': string;
  γ̂: string;
  'weft up B': string;
  'weft up s': string;
  'rsync -I -z B': string;
  'rsync s': string;
  'up / rsync': string;
  'weft down B': string;
  'down / rsync': string;
}

const shape = (l: LinkShape): { bitsPerSecond: number; latencyMs: number; burstBytes: number } => ({
  ...l,
  burstBytes: 64 * 1024,
});

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** A loopback rsync daemon serving `dir` as module `bench` (read-write). */
async function startRsyncDaemon(dir: string): Promise<{ port: number; stop(): Promise<void> }> {
  const port = await freePort();
  const conf = join(dir, '..', 'rsyncd.conf');
  const me = os.userInfo();
  await fsp.writeFile(
    conf,
    [
      `pid file = ${join(dir, '..', 'rsyncd.pid')}`,
      'use chroot = no',
      `uid = ${me.uid}`,
      `gid = ${me.gid}`,
      '[bench]',
      `path = ${dir}`,
      'read only = no',
      '',
    ].join('\n'),
  );
  const child = spawn(
    'rsync',
    ['--daemon', '--no-detach', `--config=${conf}`, `--port=${port}`, '--address=127.0.0.1'],
    {
      stdio: 'ignore',
    },
  );
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise<boolean>((r) => {
      const c = net.connect(port, '127.0.0.1', () => {
        c.destroy();
        r(true);
      });
      c.on('error', () => r(false));
    });
    if (ok) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port,
    stop: () =>
      new Promise<void>((r) => {
        if (child.exitCode !== null) return r();
        child.once('exit', () => r());
        child.kill('SIGTERM');
      }),
  };
}

/** rsync -I -z --no-W of `newFile` onto a copy of `oldFile` on the daemon, across its own link. */
async function rsyncOverLink(
  work: string,
  oldFile: string,
  newFile: string,
  link: LinkShape,
): Promise<{ bytes: number; seconds: number; stats: string }> {
  const module = join(work, 'rsync-module');
  await fsp.rm(module, { recursive: true, force: true });
  await fsp.mkdir(module, { recursive: true });
  await fsp.copyFile(oldFile, join(module, 'file'));
  const daemon = await startRsyncDaemon(module);
  const wan = new ThrottledLink(shape(link));
  const fwd = await wan.forward({ host: '127.0.0.1', port: daemon.port });
  try {
    const t0 = performance.now();
    const out = await new Promise<{ status: number | null; stdout: string; stderr: string }>((done) => {
      // -I: never skip on size/time; --no-W: the delta algorithm even though both ends are
      // local (a daemon transfer is remote to rsync anyway); -z: rsync's own deflate.
      const c = spawn('rsync', [
        '-I',
        '-z',
        '--no-W',
        '--stats',
        newFile,
        `rsync://127.0.0.1:${fwd.port}/bench/file`,
      ]);
      let stdout = '';
      let stderr = '';
      c.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      c.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      c.on('close', (status) => done({ status, stdout, stderr }));
    });
    const seconds = (performance.now() - t0) / 1000;
    if (out.status !== 0) throw new Error(`rsync exited ${out.status}: ${out.stderr}`);
    const same = spawnSync('cmp', ['-s', newFile, join(module, 'file')]).status === 0;
    if (!same) throw new Error('rsync did not reproduce the new version');
    const stats = `sent ${/Total bytes sent:\s*([\d,.]+)/.exec(out.stdout)?.[1] ?? '?'}, received ${
      /Total bytes received:\s*([\d,.]+)/.exec(out.stdout)?.[1] ?? '?'
    }`;
    return { bytes: wan.stats.bytesUp + wan.stats.bytesDown, seconds, stats };
  } finally {
    await fwd.close();
    await wan.close();
    await daemon.stop();
  }
}

interface Agent {
  engine: Engine;
  link: ThrottledLink;
  folder: string;
  plans: Record<string, unknown>[];
  stop(): Promise<void>;
}

const sum = (l: ThrottledLink): number => l.stats.bytesUp + l.stats.bytesDown;

/**
 * Runs one chain of versions of one file through two agents (A, B) and a proxy, each agent
 * behind its own shaped link; returns a row per edit.
 */
export async function runAgentChain(
  name: string,
  versions: readonly { label: string; file: string }[],
  link: LinkShape,
): Promise<{ rows: E2eRow[]; notes: string[] }> {
  const work = await fsp.mkdtemp(join(os.tmpdir(), 'weft-bench-delta-'));
  const adminToken = randomBytes(24).toString('hex');
  const server = await startProxyServer({
    dataDir: join(work, 'proxy'),
    adminToken,
    logLevel: 'warn',
    objectTier: { type: 'fs' },
  });
  const agents: Agent[] = [];
  const notes: string[] = [];
  const open = async (deviceName: string): Promise<Agent> => {
    const wan = new ThrottledLink(shape(link));
    const u = new URL(server.url);
    const fwd = await wan.forward({ host: u.hostname, port: Number(u.port) });
    const { token } = await ProxyClient.enrol(fwd.url, { user: 'bench', deviceName, adminToken });
    const client = new ProxyClient({ baseUrl: fwd.url, token });
    const folder = join(work, deviceName, 'Weft');
    await fsp.mkdir(folder, { recursive: true });
    const plans: Record<string, unknown>[] = [];
    const engine = await Engine.open({
      folder,
      stateDir: join(work, deviceName, 'state'),
      client,
      deviceName,
      watch: false,
      liveFeed: false,
      settleMs: 0,
      trace: (event, detail) => {
        if (event === 'delta-plan') plans.push(detail as Record<string, unknown>);
      },
    });
    await engine.start();
    const a: Agent = {
      engine,
      link: wan,
      folder,
      plans,
      stop: async () => {
        await engine.stop();
        await fwd.close();
        await wan.close();
      },
    };
    agents.push(a);
    return a;
  };
  const rows: E2eRow[] = [];
  try {
    const A = await open('A');
    const B = await open('B');
    const file = `${name}.tar`;
    const first = versions[0];
    if (!first) return { rows, notes };
    await fsp.copyFile(first.file, join(A.folder, file));
    await A.engine.syncNow();
    await B.engine.syncNow();
    notes.push(
      `${name} ${first.label}: first upload ${A.engine.lastUpload?.mode ?? '?'} (${sum(A.link)} B on A's link)`,
    );
    for (let i = 1; i < versions.length; i++) {
      const prev = versions[i - 1];
      const next = versions[i];
      if (!prev || !next) continue;
      // Editors: A edits a version it uploaded itself (its own signature), then B and A
      // edit versions that came down to them (the server's signature travels first).
      const editor = [A, B, A][(i - 1) % 3] ?? A;
      const other = editor === A ? B : A;
      const row = editor.engine.journal.getFile(file);
      const prevSize = (await fsp.stat(prev.file)).size;
      const sigFrom = row?.signature ? 'own' : 'server';
      const upBlock = row?.signature ? (row.signatureBlock ?? 0) : signatureBlockSize(prevSize);
      editor.plans.length = 0;
      await fsp.copyFile(next.file, join(editor.folder, file));
      const up0 = sum(editor.link);
      const t0 = performance.now();
      await editor.engine.syncNow();
      const upSeconds = (performance.now() - t0) / 1000;
      const up = sum(editor.link) - up0;
      const plan = editor.plans.at(-1);
      const mode = editor.engine.lastUpload?.mode ?? '?';
      // The block size the other device's signature goes up with (history or √size).
      const oldSize = (await fsp.stat(join(other.folder, file))).size;
      const downBlock = chooseBlockSize(other.engine.blockSizeHistory(file), oldSize);
      const down0 = sum(other.link);
      await other.engine.syncNow();
      const down = sum(other.link) - down0;
      const same = spawnSync('cmp', ['-s', next.file, join(other.folder, file)]).status === 0;
      if (!same) throw new Error(`${name} ${next.label}: the other device does not hold the new version`);
      const rs = await rsyncOverLink(work, prev.file, next.file, link);
      notes.push(`${name} ${prev.label}→${next.label}: rsync --stats ${rs.stats}`);
      rows.push({
        pair: `${name} ${prev.label}→${next.label}`,
        MB: ((await fsp.stat(next.file)).size / 1e6).toFixed(1),
        editor: editor === A ? 'A' : 'B',
        'sig from': sigFrom,
        block: `up ${upBlock} / down ${downBlock}`,
        'Eq. 2': `${mode} (${String(plan?.stage ?? '?')})`,
        γ̂: typeof plan?.gamma === 'number' ? plan.gamma.toFixed(3) : '?',
        'weft up B': String(up),
        'weft up s': upSeconds.toFixed(1),
        'rsync -I -z B': String(rs.bytes),
        'rsync s': rs.seconds.toFixed(1),
        'up / rsync': (up / rs.bytes).toFixed(2),
        'weft down B': String(down),
        'down / rsync': (down / rs.bytes).toFixed(2),
      });
    }
  } finally {
    for (const a of agents) await a.stop();
    await server.close();
    await fsp.rm(work, { recursive: true, force: true });
  }
  return { rows, notes };
}
