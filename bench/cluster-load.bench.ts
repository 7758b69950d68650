/**
 * The 50-device load bench (bench/proxy-load.ts's load) through the agent's real upload
 * path — each device an Engine with its ProxyClient scanning its folder and uploading it
 * (small files in bundles, large ones as block transfers) — against 1 proxy instance on
 * SQLite and 1, 2 and 3 instances on one PostgreSQL (issue #18), all on s3proxy. Devices
 * are spread over the instances round-robin (as DNS or a load balancer would). Printed,
 * never asserted: files/s, request latency p50/p99, each instance's peak RSS and
 * CPU-seconds per file, and the scaling efficiency of N instances against one.
 *
 *   npx tsx bench/cluster-load.bench.ts [--devices 50] [--small 100] [--large 1]
 *       [--large-bytes 2200000] [--runs sqlite,pg1,pg2,pg3] [--apply-slots N]
 *
 * Everything runs on this machine: the devices (one process), every instance, PostgreSQL
 * and s3proxy share its cores, so the figures show what the CPU allows; CPU-seconds per
 * file per instance is what projects to machines of their own.
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Engine, ProxyClient } from '@weft/core';
import { startS3Proxy } from '@weft/providers/testing';
import { startCluster } from '../e2e/src/cluster-harness.ts';
import { cpuSeconds, load, peakRssMiB, startProxy } from './agent-procs.ts';

const { values } = parseArgs({
  options: {
    devices: { type: 'string', default: '50' },
    small: { type: 'string', default: '100' },
    large: { type: 'string', default: '1' },
    'large-bytes': { type: 'string', default: String(2_200_000) },
    runs: { type: 'string', default: 'sqlite,pg1,pg2,pg3' },
    // cluster.applySlots for the PostgreSQL runs (the shared FOP budget; 0 = off), to see what
    // admission costs; unset: the proxy's default.
    'apply-slots': { type: 'string' },
  },
});
const DEVICES = Number(values.devices);
const SMALL = Number(values.small);
const LARGE = Number(values.large);
const LARGE_BYTES = Number(values['large-bytes']);

// Every request the devices make, timed (the agent's client speaks HTTP through fetch).
const latencies: number[] = [];
const realFetch = globalThis.fetch;
globalThis.fetch = async (...args: Parameters<typeof fetch>): Promise<Response> => {
  const t0 = performance.now();
  try {
    return await realFetch(...args);
  } finally {
    latencies.push(performance.now() - t0);
  }
};

function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
}

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** Device d's folder: SMALL files of 200 B–3 kB in folders of 100, LARGE files of LARGE_BYTES. */
async function makeTree(root: string, d: number): Promise<Map<string, string>> {
  const expected = new Map<string, string>();
  for (let i = 0; i < SMALL; i++) {
    const dir = join(root, 'small', String(Math.floor(i / 100)));
    if (i % 100 === 0) await fsp.mkdir(dir, { recursive: true });
    const c = Buffer.concat([Buffer.from(`device ${d} file ${i} `), randomBytes(200 + ((i * 37) % 3000))]);
    await fsp.writeFile(join(dir, `f${i}.txt`), c);
    expected.set(`small/${Math.floor(i / 100)}/f${i}.txt`, sha(c));
  }
  await fsp.mkdir(join(root, 'large'), { recursive: true });
  for (let i = 0; i < LARGE; i++) {
    const c = randomBytes(LARGE_BYTES + i);
    await fsp.writeFile(join(root, 'large', `${i}.bin`), c);
    expected.set(`large/${i}.bin`, sha(c));
  }
  return expected;
}

interface Target {
  readonly urls: readonly string[];
  readonly pids: () => (number | undefined)[];
  readonly adminToken: string;
  stop(): Promise<void>;
}

interface RunResult {
  name: string;
  instances: number;
  files: number;
  seconds: number;
  p50: number;
  p99: number;
  rss: number[];
  cpuPerFile: number[];
  clientCpuPerFile: number;
}

async function run(name: string, target: Target, base: string): Promise<RunResult> {
  // Enrol and lay out every device first; time only the sync.
  const devices: {
    token: string;
    folder: string;
    state: string;
    expected: Map<string, string>;
    url: string;
  }[] = [];
  for (let d = 0; d < DEVICES; d++) {
    const url = target.urls[d % target.urls.length]!;
    const { token } = await ProxyClient.enrol(url, {
      user: `user${d}`,
      deviceName: `device-${d}`,
      adminToken: target.adminToken,
    });
    const folder = join(base, name, `d${d}`, 'Weft');
    const expected = await makeTree(folder, d);
    devices.push({ token, folder, state: join(base, name, `d${d}`, 'state'), expected, url });
  }
  latencies.length = 0;
  const cpu0 = target.pids().map(cpuSeconds);
  const client0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    devices.map(async (d, k) => {
      const client = new ProxyClient({ baseUrl: d.url, token: d.token });
      const engine = await Engine.open({
        folder: d.folder,
        stateDir: d.state,
        client,
        deviceName: `device-${k}`,
        watch: false,
        settleMs: 0,
        liveFeed: false,
      });
      await engine.start();
      await engine.syncNow();
      await engine.waitIdle();
      await engine.stop();
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const clientCpu = process.cpuUsage(client0);
  const cpu = target.pids().map((p, i) => cpuSeconds(p) - (cpu0[i] ?? 0));
  const rss = target.pids().map(peakRssMiB);
  const timed = [...latencies];
  // Everything landed, byte-identical by hash.
  let files = 0;
  for (const d of devices) {
    const client = new ProxyClient({ baseUrl: d.url, token: d.token });
    const got = new Map((await client.list('', true)).entries.map((e) => [e.path, e.sha256]));
    for (const [p, h] of d.expected) {
      if (got.get(p) !== h) throw new Error(`${name}: ${p} of ${d.folder} missing or wrong`);
      files += 1;
    }
  }
  await fsp.rm(join(base, name), { recursive: true, force: true });
  return {
    name,
    instances: target.urls.length,
    files,
    seconds,
    p50: percentile(timed, 50),
    p99: percentile(timed, 99),
    rss,
    cpuPerFile: cpu.map((c) => c / files),
    clientCpuPerFile: (clientCpu.user + clientCpu.system) / 1e6 / files,
  };
}

async function main(): Promise<void> {
  const s3 = await startS3Proxy({ bucket: 'weft-cluster-bench' });
  const { stop: stopS3, ...endpoint } = s3;
  const base = await fsp.mkdtemp(join(os.tmpdir(), 'weft-cluster-load-'));
  const results: RunResult[] = [];
  const objectTier = (prefix: string): Record<string, unknown> => ({
    type: 's3',
    bucket: s3.bucket,
    prefix,
    endpoint: s3.endpoint,
    region: s3.region,
    forcePathStyle: true,
    accessKeyId: s3.accessKeyId,
    secretAccessKey: s3.secretAccessKey,
  });
  // The same work on both stores: no packing (its flush timer would land in some runs and not
  // others), no versions kept, no shares.
  const same = { packs: { enabled: false }, versions: { retentionDays: 0 }, shares: { enabled: false } };
  try {
    for (const r of String(values.runs).split(',')) {
      const loadBefore = load();
      if (r === 'sqlite') {
        const dir = join(base, 'sqlite-proxy');
        await fsp.mkdir(dir, { recursive: true });
        const admin = randomBytes(24).toString('hex');
        const proxy = await startProxy(
          dir,
          admin,
          objectTier(`load-sqlite-${randomBytes(3).toString('hex')}`),
          same,
        );
        try {
          results.push(
            await run(
              'sqlite',
              {
                urls: [proxy.url],
                pids: () => [proxy.child.pid],
                adminToken: admin,
                stop: () => proxy.stop(),
              },
              base,
            ),
          );
        } finally {
          await proxy.stop();
        }
      } else {
        const n = Number(r.replace(/^pg/, ''));
        const cluster = await startCluster({
          instances: n,
          s3: endpoint,
          config: {
            ...same,
            opLogFile: undefined,
            ...(values['apply-slots'] === undefined
              ? {}
              : { cluster: { applySlots: Number(values['apply-slots']) } }),
          },
        });
        try {
          results.push(
            await run(
              r,
              {
                urls: cluster.instances.map((x) => x.url),
                pids: () => cluster.instances.map((x) => x.child?.pid),
                adminToken: cluster.adminToken,
                stop: () => cluster.stop(),
              },
              base,
            ),
          );
        } finally {
          await cluster.stop();
        }
      }
      const x = results.at(-1)!;
      console.log(
        `${x.name}: ${x.files} files in ${x.seconds.toFixed(1)} s (load before ${loadBefore}, after ${load()})`,
      );
    }
  } finally {
    await stopS3();
    await fsp.rm(base, { recursive: true, force: true });
  }
  const pg1 = results.find((x) => x.name === 'pg1');
  console.log(
    `\ncluster load bench — ${DEVICES} devices (one user each) × (${SMALL} small + ${LARGE} large of ${LARGE_BYTES} B), ` +
      `agent engines in one process, s3proxy, ${os.cpus().length} cores`,
  );
  console.log(
    'run      inst  files/s  p50 ms  p99 ms  peak RSS MiB/instance   CPU-ms/file/instance   client CPU-ms/file  scaling',
  );
  for (const x of results) {
    const rate = x.files / x.seconds;
    const eff =
      pg1 && x.name.startsWith('pg')
        ? `${((rate / (pg1.files / pg1.seconds) / x.instances) * 100).toFixed(0)} %`
        : '—';
    console.log(
      `${x.name.padEnd(8)} ${String(x.instances).padStart(4)}  ${rate.toFixed(0).padStart(7)}  ${x.p50.toFixed(1).padStart(6)}  ${x.p99
        .toFixed(1)
        .padStart(6)}  ${x.rss
        .map((m) => m.toFixed(0))
        .join('/')
        .padEnd(22)}  ${x.cpuPerFile
        .map((c) => (c * 1000).toFixed(2))
        .join('/')
        .padEnd(21)}  ${(x.clientCpuPerFile * 1000).toFixed(2).padStart(18)}  ${eff}`,
    );
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
