// How large-file blocks travel: what the agent does (`PUT /v1/transfers/{id}/blocks`, four
// blocks in flight, each on a keep-alive connection of its own, through ProxyClient) beside
// the `/v1/stream` WebSocket (one connection, acknowledgements in completion order) with the
// same number of blocks in flight, and with more. Same proxy (embedded defaults: fs object
// tier), same file, same process run; on loopback and through the shaped 50 Mbit/s, 40 ms RTT
// link the other benches use. Figures are printed, never asserted.
//
//   npx tsx bench/block-transport.bench.ts [--mib 256] [--wan-mib 32]   (WEFT_BENCH_WAN=0: loopback only)
//
// The agent's row is the headline (it is what runs); the stream rows say what switching the
// agent to the stream would buy (docs/formats/api.md cites this bench).
import { createHash, randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { ProxyClient } from '@weft/core';
import { startProxyServer } from '@weft/proxy-server';
import { encodeTransferBlock, type StreamServerMessage } from '@weft/wire';
// The same user-space WAN link the inter-proxy bench uses (token bucket + one-way delay).
import { ThrottledLink } from '../packages/mirror/src/interproxy/throttle.ts';

const { values } = parseArgs({
  options: { mib: { type: 'string', default: '256' }, 'wan-mib': { type: 'string', default: '32' } },
});
const MiB = 1024 * 1024;
const BLOCK = 4 * MiB; // the agent's block size (MAX_BLOCK_PAYLOAD)

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

function frames(transferId: string, data: Buffer): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let off = 0, seq = 0; off < data.length; off += BLOCK, seq++)
    out.push(
      encodeTransferBlock({
        transferId,
        seq,
        offset: off,
        last: off + BLOCK >= data.length,
        payload: data.subarray(off, off + BLOCK),
      }),
    );
  return out;
}

/** The agent's way: synchronous PUTs, `inFlight` at once (the engine's blocksInFlight, 4). */
async function viaPut(
  client: ProxyClient,
  id: string,
  blocks: Uint8Array[],
  inFlight: number,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < blocks.length) {
      const frame = blocks[next++] as Uint8Array;
      await client.putBlock(id, frame);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
}

/** One WebSocket, at most `window` blocks unacknowledged. */
async function viaStream(url: string, token: string, blocks: Uint8Array[], window: number): Promise<void> {
  const ws = new WebSocket(url.replace(/^http/, 'ws') + '/v1/stream', {
    headers: { authorization: `Bearer ${token}` },
  });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  await new Promise<void>((resolve, reject) => {
    let sent = 0;
    let acked = 0;
    const pump = (): void => {
      while (sent < blocks.length && sent - acked < window) ws.send(blocks[sent++] as Uint8Array);
    };
    ws.on('message', (data) => {
      const m = JSON.parse(String(data)) as StreamServerMessage;
      if (m.type === 'block-error') return reject(new Error(`block refused: ${m.error.message}`));
      acked += 1;
      if (acked === blocks.length) resolve();
      else pump();
    });
    ws.once('error', reject);
    pump();
  });
  ws.close();
}

interface Row {
  link: string;
  transport: string;
  seconds: number;
  bytes: number;
}

async function run(label: string, link: ThrottledLink | undefined, size: number): Promise<Row[]> {
  const work = await fsp.mkdtemp(join(os.tmpdir(), 'weft-bench-blocks-'));
  const server = await startProxyServer({ dataDir: join(work, 'proxy'), logLevel: 'warn', port: 0 });
  const fwd = link
    ? await link.forward({ host: '127.0.0.1', port: Number(new URL(server.url).port) })
    : undefined;
  const url = fwd?.url ?? server.url;
  const rows: Row[] = [];
  try {
    const { token } = await server.enrol('bench', 'bench-device');
    const client = new ProxyClient({ baseUrl: url, token });
    const variants: [string, (id: string, b: Uint8Array[]) => Promise<void>][] = [
      ['PUT blocks, 4 in flight (the agent)', (id, b) => viaPut(client, id, b, 4)],
      ['/v1/stream, 4 in flight', (id, b) => viaStream(url, token, b, 4)],
      ['/v1/stream, 16 in flight', (id, b) => viaStream(url, token, b, 16)],
    ];
    let n = 0;
    for (const [transport, send] of variants) {
      const data = randomBytes(size); // fresh content each time: no dedupe by hash
      const t = await client.createTransfer({
        path: `f${n++}.bin`,
        size,
        sha256: sha(data),
        mtimeMs: Date.now(),
        baseRevision: null,
      });
      const blocks = frames(t.transferId, data);
      const t0 = performance.now();
      await send(t.transferId, blocks);
      rows.push({ link: label, transport, seconds: (performance.now() - t0) / 1000, bytes: size });
      await client.abandonTransfer(t.transferId);
    }
  } finally {
    await fwd?.close();
    await server.close();
    await fsp.rm(work, { recursive: true, force: true });
  }
  return rows;
}

const rows = await run('loopback', undefined, Number(values.mib) * MiB);
if (process.env.WEFT_BENCH_WAN !== '0') {
  const link = new ThrottledLink({ bitsPerSecond: 50_000_000, latencyMs: 20, burstBytes: 64 * 1024 });
  rows.push(...(await run('50 Mbit/s, 40 ms RTT', link, Number(values['wan-mib']) * MiB)));
}
console.log('\nLarge-file blocks (4 MiB, uncompressed random data), proxy on embedded defaults (fs tier)\n');
const table = [
  ['link', 'transport', 'MiB', 'seconds', 'MiB/s'],
  ...rows.map((r) => [
    r.link,
    r.transport,
    String(r.bytes / MiB),
    r.seconds.toFixed(2),
    (r.bytes / MiB / r.seconds).toFixed(1),
  ]),
];
const widths = (table[0] ?? []).map((_, i) => Math.max(...table.map((r) => (r[i] ?? '').length)));
for (const r of table) console.log(r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  '));
