// How busy one proxy instance may get before a new transfer on it slows down: the measurement
// behind the defaults of cluster.thetaCongested (θ_c, HyCloud Eq. 7) and cluster.thetaIdle
// (θ_l, Eq. 8) in docs/deployment.md.
//
// One proxy (bin/weft-proxy.mjs, its own process, embedded defaults) takes large-file blocks
// (1 MiB, PUT /v1/transfers/{id}/blocks, four in flight, as the agent sends them). First its
// capacity C: blocks as fast as they are acknowledged. Then an offered load u·C for u from 0
// to 1, paced, while a probe — what a new transfer meets — sends one 64 KiB block every 100 ms
// and times its acknowledgement. The knee is the highest u whose probe median stays under twice
// the idle one (and whose offered load is still carried): past it the instance is congested,
// so θ_c = 1 − u_knee; an instance is idle when two of them together would stay below the
// knee on one, θ_l = 1 − u_knee / 2. Figures are printed, never asserted.
//
//   npx tsx bench/cluster-theta.bench.ts [--seconds 4]
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { encodeTransferBlock } from '@weft/wire';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '4' } } });
const SECONDS = Number(values.seconds);
const KiB = 1024;
const MiB = 1024 * KiB;
const BLOCK = 1 * MiB;
const PROBE = 64 * KiB;
const AREA = 128 * MiB; // load blocks cycle over this much of the staging file

const dir = await fsp.mkdtemp(join(os.tmpdir(), 'weft-theta-'));
const admin = 'wfa_theta-bench-admin-token';
const proxy = spawn(
  process.execPath,
  [resolve(import.meta.dirname, '../packages/proxy-server/bin/weft-proxy.mjs')],
  {
    env: {
      ...process.env,
      WEFT_PROXY_DATA_DIR: dir,
      WEFT_PROXY_ADMIN_TOKEN: admin,
      WEFT_PROXY_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  },
);
const url = await new Promise<string>((ok, fail) => {
  proxy.once('exit', (c) => fail(new Error(`proxy exited ${c}`)));
  createInterface({ input: proxy.stdout! }).on('line', (l) => {
    const m = /listening on (\S+)/.exec(l);
    if (m) ok(m[1]!);
  });
});

const enrol = (await (
  await fetch(`${url}/v1/enrol`, {
    method: 'POST',
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ user: 'bench', deviceName: 'theta' }),
  })
).json()) as { token: string };
const auth = { authorization: `Bearer ${enrol.token}` };

async function openTransfer(path: string, size: number): Promise<string> {
  const res = await fetch(`${url}/v1/transfers`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ path, size, sha256: createHash('sha256').update(path).digest('hex'), mtimeMs: 1 }),
  });
  if (res.status !== 201) throw new Error(`open transfer: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { transferId: string }).transferId;
}

let seed = 1;
function noise(n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i += 4) b.writeUInt32LE((seed = (seed * 1664525 + 1013904223) >>> 0), i);
  return b;
}

const loadId = await openTransfer('load.bin', 8 * 1024 * MiB);
const probeId = await openTransfer('probe.bin', 8 * 1024 * MiB);
const loadFrames = Array.from({ length: AREA / BLOCK }, (_, i) =>
  encodeTransferBlock({ transferId: loadId, seq: i, offset: i * BLOCK, last: false, payload: noise(BLOCK) }),
);
let probeSeq = 0;
const probePayload = noise(PROBE);

async function put(id: string, frame: Uint8Array): Promise<void> {
  const res = await fetch(`${url}/v1/transfers/${id}/blocks`, {
    method: 'PUT',
    headers: { ...auth, 'content-type': 'application/octet-stream' },
    body: frame,
  });
  if (!res.ok) throw new Error(`block: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
}

/** Send load blocks for `ms`, four in flight, at most `bps` (Infinity: as fast as acked). */
async function load(ms: number, bps: number): Promise<number> {
  const start = performance.now();
  let sent = 0;
  let i = 0;
  const worker = async (): Promise<void> => {
    while (performance.now() - start < ms) {
      // Pace: the bytes sent so far may not run ahead of bps × elapsed.
      const due = (sent / bps) * 1000 - (performance.now() - start);
      if (due > 0) await new Promise((r) => setTimeout(r, due));
      if (performance.now() - start >= ms) break;
      sent += BLOCK;
      await put(loadId, loadFrames[i++ % loadFrames.length]!);
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return (sent / (performance.now() - start)) * 1000;
}

/** Probe latencies (ms) every 100 ms while `busy` runs. */
async function probe(busy: Promise<number>): Promise<{ carried: number; p50: number; p90: number }> {
  let done = false;
  const lat: number[] = [];
  const loop = (async () => {
    while (!done) {
      const t = performance.now();
      const off = (probeSeq % 512) * PROBE;
      await put(
        probeId,
        encodeTransferBlock({
          transferId: probeId,
          seq: probeSeq++,
          offset: off,
          last: false,
          payload: probePayload,
        }),
      );
      lat.push(performance.now() - t);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const carried = await busy;
  done = true;
  await loop;
  lat.sort((a, b) => a - b);
  const q = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] ?? NaN;
  return { carried, p50: q(0.5), p90: q(0.9) };
}

try {
  await load(1500, Infinity); // warm up
  const capacity = await load(SECONDS * 1000 * 1.5, Infinity);
  console.log(
    `capacity C = ${(capacity / MiB).toFixed(1)} MiB/s (1 MiB blocks, 4 in flight, fsync per block)`,
  );
  console.log('offered u·C   carried MiB/s   probe p50 ms   p90 ms');
  const rows: { u: number; ok: boolean }[] = [];
  let base = NaN;
  for (const u of [0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]) {
    const r = await probe(
      u === 0
        ? new Promise((ok) => setTimeout(() => ok(0), SECONDS * 1000))
        : load(SECONDS * 1000, u * capacity),
    );
    if (u === 0) base = r.p50;
    const ok = r.p50 < 2 * base && (u === 0 || r.carried >= 0.9 * u * capacity);
    rows.push({ u, ok });
    console.log(
      `${u.toFixed(1).padStart(9)}   ${(r.carried / MiB).toFixed(1).padStart(13)}   ${r.p50.toFixed(1).padStart(12)}   ${r.p90
        .toFixed(1)
        .padStart(6)}   ${ok ? '' : 'congested'}`,
    );
  }
  // The knee: the highest load before the first congested level.
  const firstBad = rows.findIndex((r) => !r.ok);
  const knee = firstBad < 0 ? 1 : rows[Math.max(0, firstBad - 1)]!.u;
  console.log(
    `knee u = ${knee.toFixed(1)} → θ_c = 1 − u = ${(1 - knee).toFixed(2)}, θ_l = 1 − u/2 = ${(1 - knee / 2).toFixed(2)}`,
  );
} finally {
  proxy.kill('SIGTERM');
  await new Promise((r) => proxy.once('exit', r));
  await fsp.rm(dir, { recursive: true, force: true });
}
