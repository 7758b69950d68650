/**
 * The inter-proxy link end to end inside one process: a PeerSender and a PeerReceiver on
 * loopback (port 0), joined directly or through the user-space throttled link. Files land
 * in a real provider (MemoryProvider) through `deliver`; contents compared byte for byte.
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { MemoryProvider, collect } from '@weft/providers';
import {
  listenPeer,
  PeerReceiver,
  PeerSender,
  ThrottledLink,
  type PeerListener,
  type SourceFile,
} from '../src/interproxy/index.ts';

const SECRET = 'k'.repeat(16) + randomBytes(16).toString('hex');
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function file(path: string, content: Uint8Array): SourceFile {
  return {
    path,
    size: content.byteLength,
    sha256: createHash('sha256').update(content).digest('hex'),
    content,
  };
}

async function destination(
  secret = SECRET,
): Promise<{ receiver: PeerReceiver; listener: PeerListener; cloud: MemoryProvider }> {
  const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-ipx-'));
  const cloud = new MemoryProvider({ name: 'dest-cloud' });
  const receiver = await PeerReceiver.open({
    selfId: 'proxy-b',
    peers: new Map([['proxy-a', secret]]),
    dir,
    deliver: async (f) => {
      await cloud.write(f.path, await fsp.readFile(f.file));
    },
  });
  const listener = await listenPeer(receiver);
  cleanups.push(async () => {
    await listener.close();
    await receiver.close();
    await fsp.rm(dir, { recursive: true, force: true });
  });
  return { receiver, listener, cloud };
}

function sender(url: string, extra: Partial<ConstructorParameters<typeof PeerSender>[0]> = {}): PeerSender {
  const s = new PeerSender({ url, selfId: 'proxy-a', peerId: 'proxy-b', secret: SECRET, ...extra });
  cleanups.push(() => s.close());
  return s;
}

async function content(p: MemoryProvider, path: string): Promise<Buffer> {
  return Buffer.from(await collect(await p.read(path)));
}

describe('inter-proxy link', () => {
  it('sends small files bundled, large new files whole and changed ones as deltas; unchanged ones not at all', async () => {
    const { receiver, listener, cloud } = await destination();
    const s = sender(listener.url, { blockBytes: 256 * 1024 });
    await s.connect();
    const small = Array.from({ length: 40 }, (_, i) => file(`docs/f${i}.bin`, randomBytes(3000 + i)));
    const words = [
      'lorem',
      'ipsum',
      'dolor',
      'sit',
      'amet',
      'consectetur',
      'adipiscing',
      'elit',
      'sed',
      'do',
    ];
    const text = Buffer.from(Array.from({ length: 180_000 }, () => words[randomBytes(1)[0]! % 10]).join(' ')); // ~1 MiB
    const big = file('big/log.txt', text);
    const first = await s.send([...small, big]);
    expect(first.filter((o) => o.status === 'committed')).toHaveLength(41);
    expect(first.find((o) => o.path === 'big/log.txt')?.mode).toBe('whole');
    expect(first.filter((o) => o.mode === 'bundle')).toHaveLength(40);
    for (const f of [...small, big]) expect((await content(cloud, f.path)).equals(f.content)).toBe(true);

    // Second version: one small file edited, the large file edited in the middle.
    const edited = Buffer.from(text);
    edited.write('EDITED-IN-THE-MIDDLE', 500_000);
    const big2 = file('big/log.txt', edited);
    const small0 = file('docs/f0.bin', randomBytes(2000));
    const sentBefore = s.stats.bytesSent;
    const second = await s.send([small0, ...small.slice(1), big2]);
    const byPath = new Map(second.map((o) => [o.path, o]));
    expect(byPath.get('big/log.txt')).toMatchObject({ status: 'committed', mode: 'delta' });
    expect(byPath.get('docs/f0.bin')).toMatchObject({ status: 'committed', mode: 'bundle' });
    expect(second.filter((o) => o.status === 'unchanged')).toHaveLength(39);
    // A delta of a 20-byte edit, plus one 2 KB file: far less than the 1 MiB file.
    expect(s.stats.bytesSent - sentBefore).toBeLessThan(100_000);
    expect((await content(cloud, 'big/log.txt')).equals(edited)).toBe(true);
    expect((await content(cloud, 'docs/f0.bin')).equals(small0.content)).toBe(true);
    // Step 5: the history of the changed file was updated when idle (Eq. 1–2).
    await receiver.whenIdle();
    expect(receiver.cache.predictor.snapshot('big/log.txt')?.n).toBe(1);
    expect(receiver.cache.get('big/log.txt')?.sha256).toBe(big2.sha256);
  });

  it('refuses a peer with a wrong secret, and a destination that cannot prove the secret', async () => {
    const { listener } = await destination('x'.repeat(40));
    const bad = sender(listener.url, { reconnectMinMs: 10_000 });
    await expect(bad.connect()).rejects.toThrow(/refused our credentials \(401\)/);

    // An impostor that accepts anything and answers with a made-up proof.
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    cleanups.push(() => new Promise<void>((r) => wss.close(() => r())));
    let gotData = false;
    wss.on('connection', (ws) => {
      ws.on('message', (data) => {
        const m = JSON.parse(String(data)) as { type: string; session: string };
        if (m.type !== 'hello') gotData = true;
        else
          ws.send(
            JSON.stringify({
              type: 'welcome',
              version: 1,
              proxy: 'proxy-b',
              session: m.session,
              proof: '0'.repeat(64),
              resumed: false,
              acked: [],
            }),
          );
      });
    });
    await new Promise((r) => wss.once('listening', r));
    const port = (wss.address() as { port: number }).port;
    const fooled = sender(`ws://127.0.0.1:${port}/peer/v1/stream`);
    await expect(fooled.connect()).rejects.toThrow(/failed authentication/);
    expect(gotData).toBe(false);
  });

  it('after the link is cut mid-transfer, re-sends exactly the blocks that were not acknowledged', async () => {
    const { receiver, listener, cloud } = await destination();
    const link = new ThrottledLink({ bitsPerSecond: 16_000_000, latencyMs: 5 });
    cleanups.push(() => link.close());
    const fwd = await link.forward({ host: '127.0.0.1', port: listener.port });
    const s = sender(`ws://127.0.0.1:${fwd.port}/peer/v1/stream`, { blockBytes: 64 * 1024, maxInFlight: 6 });
    await s.connect();
    const big = file('video/raw.bin', randomBytes(2 * 1024 * 1024 + 123)); // 33 blocks
    const sent = new Set<number>();
    const acked = new Set<number>();
    const resent: number[] = [];
    const expectedResends: number[] = [];
    let cut = false;
    s.on('sent', (seq: number) => sent.add(seq));
    s.on('resent', (seq: number) => {
      // Never a block the destination had acknowledged.
      expect(acked.has(seq)).toBe(false);
      resent.push(seq);
    });
    s.on('welcome', (w: { acked: number[] }) => {
      // What should go again on this connection: sent, not acknowledged, not held by the destination.
      expectedResends.push(...[...sent].filter((q) => !acked.has(q) && !w.acked.includes(q)));
    });
    s.on('ack', (seq: number) => {
      acked.add(seq);
      if (!cut && acked.size === 8) {
        cut = true;
        expect(link.cutAll()).toBeGreaterThan(0);
      }
    });
    const [outcome] = await s.send([big]);
    expect(outcome).toMatchObject({ status: 'committed', mode: 'whole' });
    expect((await content(cloud, 'video/raw.bin')).equals(big.content)).toBe(true);

    expect(cut).toBe(true);
    expect(s.stats.reconnects).toBeGreaterThanOrEqual(1);
    // The cut caught blocks in flight, and exactly those were sent again.
    expect(expectedResends.length).toBeGreaterThan(0);
    expect(resent.sort((a, b) => a - b)).toEqual(expectedResends.sort((a, b) => a - b));
    expect(s.stats.blocksSent).toBe(33);
    expect(s.stats.blocksResent).toBe(expectedResends.length);
    expect(s.stats.blocksResent).toBeLessThanOrEqual(6); // at most the window, never the whole file
    // Every block stored once at the destination.
    expect(receiver.stats.blocksStored).toBe(33);
  });
});
