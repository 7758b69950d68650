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
import WebSocket, { WebSocketServer } from 'ws';
import { MemoryProvider, collect } from '@weft/providers';
import { encodeBundle } from '@weft/wire/bundle';
import { signUpgrade } from '../src/interproxy/auth.ts';
import { encodeFrame, FrameTag, NO_FILE } from '../src/interproxy/frames.ts';
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

  it('a batch the destination refuses fails the send instead of hanging', async () => {
    const { listener } = await destination();
    const s = sender(listener.url);
    const a = file('a.txt', Buffer.from('x'));
    // Not canonical for the destination's path rules (a trailing dot segment): refused whole.
    await expect(s.send([a, { ...a, path: 'b/./c' }])).rejects.toThrow(/refused batch/);
    // The connection is still good for the next batch.
    expect((await s.send([a]))[0]).toMatchObject({ status: 'committed', mode: 'bundle' });
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

  it('answers malformed input with errors and nacks, never a crash, and stores nothing from it', async () => {
    const { receiver, listener, cloud } = await destination();
    const { headers } = signUpgrade('proxy-a', 'proxy-b', SECRET);
    const ws = new WebSocket(listener.url, { headers });
    cleanups.push(() => ws.terminate());
    const inbox: { type: string; code?: string; seq?: number; verdicts?: unknown[] }[] = [];
    ws.on('message', (d, binary) => {
      if (!binary) inbox.push(JSON.parse(String(d)) as (typeof inbox)[number]);
    });
    await new Promise((r) => ws.once('open', r));
    const next = async (type: string): Promise<(typeof inbox)[number]> => {
      for (let i = 0; i < 500; i++) {
        const k = inbox.findIndex((m) => m.type === type);
        if (k >= 0) return inbox.splice(k, 1)[0] as (typeof inbox)[number];
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error(`no ${type}`);
    };
    const session = randomBytes(16).toString('hex');
    ws.send('{"type":"batch","batch":0,"files":[]}'); // before hello
    expect((await next('error')).code).toBe('BAD_MESSAGE');
    ws.send(JSON.stringify({ type: 'hello', version: 1, proxy: 'proxy-a', session }));
    expect(await next('welcome')).toMatchObject({ resumed: false, acked: [] });
    ws.send('not json');
    expect((await next('error')).code).toBe('BAD_MESSAGE');
    const a = file('a.txt', Buffer.from('hello'));
    ws.send(
      JSON.stringify({
        type: 'batch',
        batch: 1,
        files: [a, { ...a }].map(({ path, size, sha256 }) => ({ path, size, sha256 })),
      }),
    );
    expect((await next('error')).code).toBe('BAD_BATCH'); // a path twice: refused whole
    ws.send(
      encodeFrame({
        tag: FrameTag.Bundle,
        session,
        seq: 0,
        batch: 1,
        file: NO_FILE,
        payload: new Uint8Array(10),
      }),
    );
    expect(await next('nack')).toMatchObject({ seq: 0, code: 'UNKNOWN_BATCH' });
    ws.send(
      JSON.stringify({ type: 'batch', batch: 2, files: [{ path: a.path, size: a.size, sha256: a.sha256 }] }),
    );
    expect((await next('verdicts')).verdicts).toEqual([{ path: 'a.txt', verdict: 'new' }]);
    const bundle = encodeBundle([{ path: a.path, mtimeMs: 0, sha256: a.sha256, content: a.content }]);
    const damaged = Uint8Array.from(bundle);
    const at = damaged.length - 8;
    damaged[at] = (damaged[at] ?? 0) ^ 0xff;
    ws.send(
      encodeFrame({ tag: FrameTag.Bundle, session, seq: 1, batch: 2, file: NO_FILE, payload: damaged }),
    );
    expect(await next('nack')).toMatchObject({ seq: 1, code: 'BAD_BLOCK' });
    const other = file('b.txt', Buffer.from('not in the batch'));
    ws.send(
      encodeFrame({
        tag: FrameTag.Bundle,
        session,
        seq: 2,
        batch: 2,
        file: NO_FILE,
        payload: encodeBundle([
          { path: other.path, mtimeMs: 0, sha256: other.sha256, content: other.content },
        ]),
      }),
    );
    expect(await next('nack')).toMatchObject({ seq: 2, code: 'BAD_BLOCK' });
    ws.send(
      encodeFrame({
        tag: FrameTag.Signature,
        session,
        seq: 3,
        batch: 2,
        file: 0,
        payload: new Uint8Array(4),
      }),
    );
    expect(await next('nack')).toMatchObject({ seq: 3, code: 'BAD_FRAME' });
    expect(receiver.stats.blocksStored).toBe(0);
    // The intact bundle still goes through on the same connection.
    ws.send(encodeFrame({ tag: FrameTag.Bundle, session, seq: 4, batch: 2, file: NO_FILE, payload: bundle }));
    expect(await next('ack')).toMatchObject({ seq: 4 });
    expect(await next('committed')).toMatchObject({ path: 'a.txt', sha256: a.sha256 });
    expect((await content(cloud, 'a.txt')).toString()).toBe('hello');
  });

  it('starts its open batch over when the destination restarted and lost the session', async () => {
    const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-ipx-'));
    cleanups.push(() => fsp.rm(dir, { recursive: true, force: true }));
    const cloud = new MemoryProvider({ name: 'dest-cloud' });
    const open = async (port?: number) => {
      const receiver = await PeerReceiver.open({
        selfId: 'proxy-b',
        peers: new Map([['proxy-a', SECRET]]),
        dir,
        deliver: async (f) => {
          await cloud.write(f.path, await fsp.readFile(f.file));
        },
      });
      return { receiver, listener: await listenPeer(receiver, port === undefined ? {} : { port }) };
    };
    let dest = await open();
    const port = dest.listener.port;
    cleanups.push(async () => {
      await dest.listener.close();
      await dest.receiver.close();
    });
    const link = new ThrottledLink({ bitsPerSecond: 16_000_000, latencyMs: 5 });
    cleanups.push(() => link.close());
    const fwd = await link.forward({ host: '127.0.0.1', port });
    const s = sender(`ws://127.0.0.1:${fwd.port}/peer/v1/stream`, { blockBytes: 64 * 1024, maxInFlight: 4 });
    await s.connect();
    const welcomes: { resumed: boolean }[] = [];
    s.on('welcome', (w: { resumed: boolean }) => welcomes.push(w));
    let restarted: Promise<void> | undefined;
    s.on('ack', () => {
      restarted ??= (async () => {
        await dest.listener.close();
        await dest.receiver.close();
        dest = await open(port);
      })();
    });
    const big = file('big.bin', randomBytes(1024 * 1024));
    const [outcome] = await s.send([big]);
    await restarted;
    expect(outcome).toMatchObject({ status: 'committed', mode: 'whole' });
    expect(welcomes.some((w) => !w.resumed)).toBe(true);
    expect((await content(cloud, 'big.bin')).equals(big.content)).toBe(true);
  });
});
