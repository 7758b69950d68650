/**
 * Load test of the proxy server: N simulated devices (default 50) each save 1,000 small
 * files (in bundles) and 5 large ones (transfer blocks over the WebSocket stream with
 * asynchronous acks, then commit), all at once. Prints ops/s, request latency p50/p99 and
 * the server's peak RSS, and checks that every file landed byte-identical.
 *
 *   npx tsx bench/proxy-load.ts [--devices 50] [--small 1000] [--large 5] [--large-bytes 2200000] [--s3]
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import {
  encodeBundle,
  encodeTransferBlock,
  type BundleEntry,
  type BundleUploadResponse,
  type ListResponse,
  type OpsResponse,
  type StreamServerMessage,
  type TransferState,
} from '@weft/wire';
import { startS3Proxy, type RunningS3Proxy } from '@weft/providers/testing';

const { values } = parseArgs({
  options: {
    devices: { type: 'string', default: '50' },
    small: { type: 'string', default: '1000' },
    large: { type: 'string', default: '5' },
    'large-bytes': { type: 'string', default: String(2_200_000) },
    'bundle-files': { type: 'string', default: '100' },
    s3: { type: 'boolean', default: false },
  },
});
const DEVICES = Number(values.devices);
const SMALL = Number(values.small);
const LARGE = Number(values.large);
const LARGE_BYTES = Number(values['large-bytes']);
const PER_BUNDLE = Number(values['bundle-files']);
const BLOCK = 1024 * 1024;
const ADMIN = 'bench-admin-token-' + randomBytes(8).toString('hex');
const BIN = nodePath.resolve(
  fileURLToPath(import.meta.url),
  '../../packages/proxy-server/bin/weft-proxy.mjs',
);

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
const latencies: number[] = [];

async function timed<T>(f: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  try {
    return await f();
  } finally {
    latencies.push(performance.now() - t0);
  }
}

async function call<T>(
  url: string,
  token: string,
  method: string,
  path: string,
  body?: Uint8Array | object,
): Promise<T> {
  return timed(async () => {
    const binary = body instanceof Uint8Array;
    const res = await fetch(url + path, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined
          ? {}
          : { 'content-type': binary ? 'application/octet-stream' : 'application/json' }),
      },
      ...(body === undefined ? {} : { body: binary ? body : JSON.stringify(body) }),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
    return JSON.parse(text) as T;
  });
}

function content(device: number, i: number, size: number): Buffer {
  const head = Buffer.from(`device ${device} file ${i} `);
  const out = Buffer.alloc(size);
  head.copy(out);
  for (let k = head.length; k < size; k++) out[k] = (k * 31 + device * 7 + i) & 0xff;
  return out;
}

async function device(url: string, d: number): Promise<{ ops: number; expected: Map<string, string> }> {
  const enrol = await fetch(`${url}/v1/enrol`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ user: `user${d % 10}`, deviceName: `device-${d}` }),
  });
  const { token } = (await enrol.json()) as { token: string };
  const expected = new Map<string, string>();
  let ops = 0;
  // Small files, in bundles.
  for (let start = 0; start < SMALL; start += PER_BUNDLE) {
    const entries: BundleEntry[] = [];
    for (let i = start; i < Math.min(SMALL, start + PER_BUNDLE); i++) {
      const path = `dev${d}/small/${Math.floor(i / 100)}/f${i}.txt`;
      const c = content(d, i, 200 + ((i * 37) % 3000));
      expected.set(path, sha(c));
      entries.push({ path, rev: null, mtimeMs: Date.now(), sha256: sha(c), content: c });
    }
    const res = await call<BundleUploadResponse>(
      url,
      token,
      'POST',
      '/v1/bundles',
      encodeBundle(entries, { compress: true }),
    );
    for (const r of res.results)
      if (r.result.status !== 'applied') throw new Error(`${r.path}: ${JSON.stringify(r.result)}`);
    ops += entries.length;
  }
  // Large files: blocks over one WebSocket with async acks, then commit.
  const ws = new WebSocket(url.replace(/^http/, 'ws') + '/v1/stream', {
    headers: { authorization: `Bearer ${token}` },
  });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const waiting = new Map<string, () => void>();
  ws.on('message', (data) => {
    const m = JSON.parse(data.toString()) as StreamServerMessage;
    if (m.type === 'block-error') throw new Error(`block rejected: ${m.error.message}`);
    waiting.get(`${m.transferId}:${m.seq}`)?.();
  });
  for (let i = 0; i < LARGE; i++) {
    const path = `dev${d}/large/${i}.bin`;
    const data = content(d, 1_000_000 + i, LARGE_BYTES + i);
    expected.set(path, sha(data));
    const t = await call<TransferState>(url, token, 'POST', '/v1/transfers', {
      path,
      size: data.length,
      sha256: sha(data),
      mtimeMs: Date.now(),
    });
    const acks: Promise<void>[] = [];
    for (let off = 0, seq = 0; off < data.length; off += BLOCK, seq++) {
      const frame = encodeTransferBlock({
        transferId: t.transferId,
        seq,
        offset: off,
        last: off + BLOCK >= data.length,
        payload: data.subarray(off, off + BLOCK),
      });
      const t0 = performance.now();
      acks.push(
        new Promise<void>((resolve) =>
          waiting.set(`${t.transferId}:${seq}`, () => (latencies.push(performance.now() - t0), resolve())),
        ),
      );
      ws.send(frame);
    }
    await Promise.all(acks);
    const res = await call<OpsResponse>(url, token, 'POST', '/v1/ops', {
      ops: [
        {
          op: 'commit',
          path,
          sha256: sha(data),
          size: data.length,
          mtimeMs: Date.now(),
          transferId: t.transferId,
          baseRevision: null,
        },
      ],
    });
    if (res.results[0]?.status !== 'applied') throw new Error(`${path}: ${JSON.stringify(res.results[0])}`);
    ops += 1;
  }
  ws.close();
  // Verify that everything landed.
  const list = await call<ListResponse>(url, token, 'GET', `/v1/list?path=dev${d}&recursive=1`);
  const got = new Map(list.entries.filter((e) => e.kind === 'file').map((e) => [e.path, e.sha256]));
  for (const [p, h] of expected) if (got.get(p) !== h) throw new Error(`missing or wrong: ${p}`);
  return { ops, expected };
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
}

async function peakRss(pid: number): Promise<number> {
  const status = await fsp.readFile(`/proc/${pid}/status`, 'utf8');
  const m = /VmHWM:\s+(\d+) kB/.exec(status);
  return m ? Number(m[1]) * 1024 : 0;
}

async function main(): Promise<void> {
  const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-proxy-bench-'));
  let s3: RunningS3Proxy | undefined;
  const objectTier = values.s3
    ? await (async () => {
        s3 = await startS3Proxy({ bucket: 'weft-bench' });
        return {
          type: 's3',
          bucket: s3.bucket,
          endpoint: s3.endpoint,
          region: s3.region,
          forcePathStyle: true,
          accessKeyId: s3.accessKeyId,
          secretAccessKey: s3.secretAccessKey,
        };
      })()
    : { type: 'fs' };
  const config = nodePath.join(dir, 'config.json');
  await fsp.writeFile(
    config,
    JSON.stringify({ dataDir: nodePath.join(dir, 'data'), adminToken: ADMIN, logLevel: 'warn', objectTier }),
  );
  const child = spawn(process.execPath, [BIN, '--config', config], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`server exited ${code}`)));
  });
  let peak = 0;
  const sampler = setInterval(() => {
    peakRss(child.pid ?? 0).then(
      (r) => (peak = Math.max(peak, r)),
      () => undefined,
    );
  }, 500);
  const t0 = performance.now();
  try {
    const results = await Promise.all(Array.from({ length: DEVICES }, (_, d) => device(url, d)));
    const seconds = (performance.now() - t0) / 1000;
    peak = Math.max(peak, await peakRss(child.pid ?? 0));
    const ops = results.reduce((s, r) => s + r.ops, 0);
    const files = results.reduce((s, r) => s + r.expected.size, 0);
    const health = await fetch(`${url}/healthz`);
    console.log(
      `proxy load test — ${DEVICES} devices × (${SMALL} small + ${LARGE} large of ${LARGE_BYTES} B), object tier ${values.s3 ? 's3proxy' : 'fs'}`,
    );
    console.log(`  files landed and verified : ${files} (server ${health.ok ? 'up' : 'DOWN'})`);
    console.log(`  wall time                 : ${seconds.toFixed(1)} s`);
    console.log(`  file operations/s         : ${(ops / seconds).toFixed(0)}`);
    console.log(`  requests + block acks     : ${latencies.length}`);
    console.log(
      `  latency p50 / p99         : ${percentile(latencies, 50).toFixed(1)} ms / ${percentile(latencies, 99).toFixed(1)} ms`,
    );
    console.log(`  server peak RSS           : ${(peak / 1024 / 1024).toFixed(0)} MiB`);
  } finally {
    clearInterval(sampler);
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await s3?.stop();
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
